"""Helper of ``agent.py``: the pydantic-ai and ADK columns, each run in that peer's own venv
(``_peers.py``; stdlib + the peer only). ``_smolagents_bench.py`` is smolagents' column.

Usage: ``python _agent_peers.py {pydantic_ai,adk} [--quick]``; prints one JSON line. Offline
fake models (no network), the same workloads as codeact's rows in ``agent.py``:

* ``pydantic_ai`` (pydantic-ai-harness installs pydantic-ai):
  ``tool_calling_marginal_turn_ms``: one more model turn of an ``Agent`` whose
  ``FunctionModel`` calls the tool ``inc`` once per turn (a 2-turn and a 12-turn run);
  ``code_mode_per_call_us``: a tool call from code under pydantic-ai-harness ``CodeMode()``
  (the model's one ``run_code`` call runs a script of 1 and of 100 ``await inc(x=i)`` lines:
  ``CodeMode`` allows 100 tool calls per ``run_code`` by default, and 500 at most);
* ``adk``: ``tool_calling_marginal_turn_ms`` of an ``LlmAgent`` over a ``BaseLlm`` that asks
  for one ``inc`` function call per turn (``InMemoryRunner``, a fresh session per run).

Each figure is the median over alternating pairs of (big run - small run) / steps, after one
warm-up pair. ``version``: the peer distribution's version.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

TURNS = 12
CODE_MODE_MANY = 100


def slope(small: Callable[[], Any], big: Callable[[], Any], steps: int, repeats: int) -> float:
    """Seconds per step: median over ``repeats`` pairs (after a warm-up pair) of the two runs'
    difference over ``steps``."""
    samples = []
    for i in range(repeats + 1):
        pair = []
        for run in (small, big):
            t0 = time.perf_counter()
            run()
            pair.append(time.perf_counter() - t0)
        if i:
            samples.append((pair[1] - pair[0]) / steps)
    return statistics.median(samples)


def inc(x: int) -> int:
    """Adds one."""
    return x + 1


def pydantic_ai(repeats: int) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai_harness import CodeMode

    def turns_agent(turns: int) -> Agent[None, str]:
        def reply(messages: list[Any], info: Any) -> ModelResponse:
            done = sum(1 for m in messages if isinstance(m, ModelResponse))
            if done < turns - 1:
                return ModelResponse(parts=[ToolCallPart("inc", {"x": done}, tool_call_id=f"c{done}")])
            return ModelResponse(parts=[TextPart("done")])

        return Agent(FunctionModel(reply), tools=[inc])

    def code_agent(calls: int) -> Agent[None, str]:
        script = "".join(f"v{i} = await inc(x={i})\n" for i in range(calls)) + "v0"

        def reply(messages: list[Any], info: Any) -> ModelResponse:
            if any(isinstance(m, ModelResponse) for m in messages):
                returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
                assert returned and returned[0].content == 1, messages[-1]  # the script ran: v0 == 1
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": script}, tool_call_id="code")])

        return Agent(FunctionModel(reply), tools=[inc], capabilities=[CodeMode()])

    def runner(agent: Agent[None, str]) -> Callable[[], Any]:
        def run() -> None:
            result = agent.run_sync("go")
            assert result.output == "done", result.output

        return run

    out: dict[str, Any] = {"version": metadata.version("pydantic-ai-slim")}
    out["harness_version"] = metadata.version("pydantic-ai-harness")
    out["tool_calling_marginal_turn_ms"] = (
        slope(runner(turns_agent(2)), runner(turns_agent(TURNS)), TURNS - 2, repeats) * 1e3
    )
    out["code_mode_per_call_us"] = (
        slope(runner(code_agent(1)), runner(code_agent(CODE_MODE_MANY)), CODE_MODE_MANY - 1, repeats) * 1e6
    )
    return out


def adk(repeats: int) -> dict[str, Any]:
    from google.adk.agents import LlmAgent
    from google.adk.models import BaseLlm, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def make(turns: int) -> Callable[[], Any]:
        class Fake(BaseLlm):
            async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
                done = sum(1 for c in llm_request.contents if c.role == "model")
                if done < turns - 1:
                    call = types.FunctionCall(name="inc", args={"x": done}, id=f"c{done}")
                    part = types.Part(function_call=call)
                else:
                    part = types.Part(text="done")
                yield LlmResponse(content=types.Content(role="model", parts=[part]))

        runner = InMemoryRunner(agent=LlmAgent(name="peer", model=Fake(model="fake"), tools=[inc]), app_name="b")
        counter = iter(range(10**9))

        async def once() -> None:
            sid = f"s{next(counter)}"
            await runner.session_service.create_session(app_name="b", user_id="u", session_id=sid)
            message = types.Content(role="user", parts=[types.Part(text="go")])
            last = None
            async for event in runner.run_async(user_id="u", session_id=sid, new_message=message):
                last = event
            assert last is not None and last.content and last.content.parts[0].text == "done", last

        return lambda: asyncio.run(once())

    out: dict[str, Any] = {"version": metadata.version("google-adk")}
    out["tool_calling_marginal_turn_ms"] = slope(make(2), make(TURNS), TURNS - 2, repeats) * 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=("pydantic_ai", "adk"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeats = 5 if args.quick else 15
    out = pydantic_ai(repeats) if args.peer == "pydantic_ai" else adk(repeats)
    print(json.dumps(out), flush=True)
    sys.stderr.flush()
    # pydantic-monty (CodeMode's sandbox) may abort at interpreter shutdown from its worker
    # thread (see _latency_peers.py): the figures are out, skip the shutdown.
    os._exit(0)


if __name__ == "__main__":
    main()
