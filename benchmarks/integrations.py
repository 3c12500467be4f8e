"""Cost per tool call of a pydantic-ai ``run_code`` script: codeact's ``CodeActToolset`` beside
pydantic-ai-harness ``CodeMode``, on the same tool, the same offline model, in one run.

Each agent run is two model turns: the model sends one ``run_code`` script that chains N calls
of a trivial async tool (``inc``; async, so neither side pays pydantic-ai's thread hop for sync
tools), then answers. The cost per tool call is the slope between N=0 and
N=``--calls``, so the model turns and the agent machinery cancel out.

Run: ``python benchmarks/integrations.py [--quick] [--json PATH]`` (needs
``codeact[pydantic-ai]``; the CodeMode column needs ``pydantic-ai-harness[code-mode]``, and is
left out, with a note, when it is not installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from codeact.integrations.pydantic_ai import CodeActToolset


def make_tools() -> FunctionToolset:
    tools = FunctionToolset()

    @tools.tool_plain
    async def inc(x: int) -> int:
        """Adds one."""
        return x + 1

    return tools


def model_for(code: str) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart(info.function_tools[0].name, {"code": code})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(reply)


def codeact_agent(n: int, inline_steps: bool = True) -> Agent:
    code = f't = 0\nfor i in range({n}):\n    t = call_tool("inc", {{"x": t}})\nt'
    toolset = CodeActToolset(make_tools(), max_tool_calls=None, inline_steps=inline_steps)
    return Agent(model_for(code), toolsets=[toolset])


def codeact_worker_agent(n: int) -> Agent:
    return codeact_agent(n, inline_steps=False)


def codemode_agent(n: int) -> Agent | None:
    try:
        from pydantic_ai_harness import CodeMode
    except ImportError:
        return None
    code = f"t = 0\nfor i in range({n}):\n    t = await inc(x=t)\nt"  # async tools are awaited in CodeMode
    return Agent(model_for(code), toolsets=[make_tools()], capabilities=[CodeMode(max_tool_calls=1_000_000)])


async def time_runs(agent: Agent, repeats: int) -> float:
    """Median seconds of one ``agent.run`` over ``repeats`` runs (after one warm-up)."""
    await agent.run("go")
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await agent.run("go")
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def measure(calls: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": calls, "repeats": repeats, "columns": {}}
    columns = (
        ("codeact CodeActToolset", codeact_agent),
        ("codeact, inline_steps=False", codeact_worker_agent),
        ("pydantic-ai-harness CodeMode", codemode_agent),
    )
    for name, build in columns:
        empty, full = build(0), build(calls)
        if empty is None or full is None:
            out["columns"][name] = None
            continue
        t0 = await time_runs(empty, repeats)
        tn = await time_runs(full, repeats)
        out["columns"][name] = {
            "run_ms_0_calls": t0 * 1e3,
            f"run_ms_{calls}_calls": tn * 1e3,
            "per_call_us": (tn - t0) / calls * 1e6,
        }
    ours, theirs = out["columns"]["codeact CodeActToolset"], out["columns"]["pydantic-ai-harness CodeMode"]
    out["ratio"] = theirs["per_call_us"] / ours["per_call_us"] if ours and theirs else None
    return out


def render(r: dict[str, Any]) -> None:
    n = r["calls"]
    head = f"run, {n} calls"
    print(f"{'':<32}{'run, 0 calls':>14}{head:>16}{'per tool call':>16}")
    for name, col in r["columns"].items():
        if col is None:
            print(f"{name:<32}{'(not installed)':>46}")
            continue
        print(
            f"{name:<32}{col['run_ms_0_calls']:>11.2f} ms{col['run_ms_' + str(n) + '_calls']:>13.2f} ms"
            f"{col['per_call_us']:>13.1f} us"
        )
    if r["ratio"] is not None:
        verdict = "PASS" if r["ratio"] >= 25 else "MISS"
        print(f"\nCodeActToolset is {r['ratio']:.1f}x cheaper per tool call ({verdict}, goal >= 25x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--calls", type=int, default=None, help="tool calls per script (default 500, quick 100)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    calls = args.calls or (100 if args.quick else 500)
    repeats = 3 if args.quick else 9
    print(
        f"codeact integrations benchmark ({'quick' if args.quick else 'full'}), python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}"
    )
    result = asyncio.run(measure(calls, repeats))
    render(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
