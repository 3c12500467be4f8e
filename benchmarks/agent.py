"""Agent-loop overhead: what a CodeAct turn and a tool call cost beyond the interpreter.

One run prints one table, all figures measured side by side in this process:

* per-turn overhead of ``CodeActAgent`` (ScriptedModel, in-memory session) for scripts
  with 0, 1 and 10 tool calls, beside the bare ``MontyRuntime`` cost of the same scripts;
* the added cost per tool call (both checkpoints included);
* the same with ``SqliteSessionService``, with the bytes the database grows per tool call;
* the worst delay of a 5 ms heartbeat task while a ~1 s CPU-bound script runs.

Targets (issue 3): <= 200 us per turn beyond the runtime, <= 30 us added per tool call
(in-memory session), heartbeat worst delay <= 10 ms.

Run: ``python benchmarks/agent.py`` (``--quick`` for the CI smoke run, ``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from codeact import (
    Call,
    CodeActAgent,
    InMemorySessionService,
    MontyRuntime,
    ResourceLimits,
    ResumeValue,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)


def script_with_calls(n: int) -> str:
    body = "".join(f'v{i} = call_tool("inc", {{"x": {i}}})\n' for i in range(n))
    total = " + ".join(f"v{i}" for i in range(n)) or "0"
    return f'{body}{{"type": "final_result", "value": {total}}}'


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: a number.
    """
    return x + 1


def bare_runtime_us(runtime: MontyRuntime, script: str, repeats: int) -> float:
    """Median microseconds to run ``script`` on the bare runtime, tools answered in place
    (with one dump per call, as the agent does)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step = runtime.start(script, "agent.py")
        while isinstance(step, Call):
            step.call.dump()
            step = step.call.resume(ResumeValue(step.call.keyword_args["x"] + 1))
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


async def agent_turn_us(calls: int, repeats: int, service_factory: Any) -> float:
    """Median microseconds of one single-turn agent run (fresh session each time)."""
    reply = f"```python\n{script_with_calls(calls)}\n```"
    model = ScriptedModel(lambda request: reply)
    agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime(), tools=[inc])
    service, _ = service_factory()
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    samples = []
    for i in range(repeats):
        await service.create_session(app_name="bench", user_id="u", session_id=f"s{i}")
        t0 = time.perf_counter()
        events = [e async for e in runner.run_async(user_id="u", session_id=f"s{i}", new_message="go")]
        samples.append(time.perf_counter() - t0)
        assert events[-1].text == str(sum(range(1, calls + 1))), events[-1]
    service.close()
    return statistics.median(samples) * 1e6


async def heartbeat_worst_ms(iterations: int) -> tuple[float, float]:
    """Worst extra delay of a 5 ms heartbeat while a CPU-bound script runs, and the
    script's wall time (s)."""
    script = f"t = 0\nfor i in range({iterations}):\n    t += i\n" + '{"type": "final_result", "value": t}'
    agent = CodeActAgent(
        name="cpu",
        model=ScriptedModel([f"```python\n{script}\n```"]),
        runtime=MontyRuntime(ResourceLimits(max_duration=60)),
    )
    runner = Runner(app_name="hb", agent=agent, auto_create_session=True)
    worst = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal worst
        while not done:
            t0 = time.perf_counter()
            await anyio.sleep(0.005)
            worst = max(worst, time.perf_counter() - t0 - 0.005)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        async for _ in runner.run_async(user_id="u", session_id="s", new_message="go"):
            pass
        done = True
    return worst * 1e3, time.perf_counter() - t0


TYPICAL_SCRIPT = """from pathlib import Path
lines = Path("/data/iris.csv").read_text().strip().splitlines()
header = lines[0].split(",")
petal = {}
for line in lines[1:]:
    row = dict(zip(header, line.split(",")))
    petal.setdefault(row["species"], []).append(float(row["petal_length"]))
summary = {}
for species in sorted(petal):
    stats = call_tool("describe", {"values": petal[species]})
    summary[species] = stats
print(f"read {len(lines) - 1} rows")
{"type": "observation", "value": summary}"""


def subset_check_us(repeats: int) -> float:
    """Median microseconds of the static subset check of a fresh (uncached) 13-line script:
    the cost ``MontyRuntime.start`` adds to each new model-written script."""
    from codeact.runtime._check import check_script

    samples = []
    for i in range(repeats):
        script = TYPICAL_SCRIPT + f"\n# {i}"
        t0 = time.perf_counter()
        check_script(script)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def memory_store() -> tuple[Any, Any]:
    return InMemorySessionService(), lambda: 0


def sqlite_store_factory(folder: Path) -> Any:
    counter = iter(range(10**6))

    def make() -> tuple[Any, Any]:
        path = folder / f"bench{next(counter)}.db"
        return SqliteSessionService(path), lambda: 0

    return make


async def sqlite_bytes_per_call(folder: Path) -> float:
    """Bytes the database file grows per tool call: two runs (1 and 10 calls) on fresh
    databases, measured after closing (the WAL is checkpointed into the file)."""
    sizes = {}
    for calls in (1, 10):
        path = folder / f"size{calls}.db"
        model = ScriptedModel(lambda request, n=calls: f"```python\n{script_with_calls(n)}\n```")
        agent = CodeActAgent(name="bench", model=model, runtime=MontyRuntime(), tools=[inc])
        with SqliteSessionService(path) as service:
            runner = Runner(app_name="bench", agent=agent, session_service=service)
            for i in range(20):
                await service.create_session(app_name="bench", user_id="u", session_id=f"s{i}")
                async for _ in runner.run_async(user_id="u", session_id=f"s{i}", new_message="go"):
                    pass
        sizes[calls] = path.stat().st_size / 20
    return (sizes[10] - sizes[1]) / 9


async def main_async(quick: bool) -> dict[str, Any]:
    repeats = 15 if quick else 101
    runtime = MontyRuntime()
    bare = {n: bare_runtime_us(runtime, script_with_calls(n), repeats * 3) for n in (0, 1, 10)}
    mem = {n: await agent_turn_us(n, repeats, memory_store) for n in (0, 1, 10)}
    with tempfile.TemporaryDirectory() as tmp:
        factory = sqlite_store_factory(Path(tmp))
        sql = {n: await agent_turn_us(n, max(5, repeats // 3), factory) for n in (0, 1, 10)}
        bytes_per_call = await sqlite_bytes_per_call(Path(tmp))
    hb_ms, hb_wall = await heartbeat_worst_ms(3_000_000 if quick else 30_000_000)
    check_us = subset_check_us(repeats)
    per_call_mem = ((mem[10] - bare[10]) - (mem[1] - bare[1])) / 9
    per_call_sql = ((sql[10] - bare[10]) - (sql[1] - bare[1])) / 9
    return {
        "bare_us": bare,
        "agent_memory_us": mem,
        "agent_sqlite_us": sql,
        "turn_overhead_memory_us": mem[0] - bare[0],
        "turn_overhead_sqlite_us": sql[0] - bare[0],
        "per_call_memory_us": per_call_mem,
        "per_call_sqlite_us": per_call_sql,
        "sqlite_bytes_per_call": bytes_per_call,
        "subset_check_us": check_us,
        "heartbeat_worst_ms": hb_ms,
        "heartbeat_script_s": hb_wall,
    }


def render(r: dict[str, Any]) -> None:
    print(f"{'tool calls per script':<28}{'bare runtime':>14}{'agent, memory':>16}{'agent, sqlite':>16}")
    for n in (0, 1, 10):
        row = (r["bare_us"][n], r["agent_memory_us"][n], r["agent_sqlite_us"][n])
        print(f"{n:<28}{row[0]:>11.1f} us{row[1]:>13.1f} us{row[2]:>13.1f} us")
    print()

    def line(label: str, value: float, unit: str, goal: float | None) -> None:
        verdict = "" if goal is None else ("  PASS" if value <= goal else "  MISS") + f" (goal <= {goal:g} {unit})"
        print(f"{label:<44}{value:>10.1f} {unit}{verdict}")

    line("per-turn overhead beyond the runtime (memory)", r["turn_overhead_memory_us"], "us", 200)
    line("added per tool call, both checkpoints (memory)", r["per_call_memory_us"], "us", 30)
    line("per-turn overhead beyond the runtime (sqlite)", r["turn_overhead_sqlite_us"], "us", None)
    line("added per tool call, both checkpoints (sqlite)", r["per_call_sqlite_us"], "us", None)
    line("sqlite bytes grown per tool call", r["sqlite_bytes_per_call"], "B", None)
    line("static subset check of a fresh 13-line script", r["subset_check_us"], "us", None)
    line(f"heartbeat worst delay ({r['heartbeat_script_s']:.2f} s script)", r["heartbeat_worst_ms"], "ms", 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    print(
        f"codeact agent benchmark ({'quick' if args.quick else 'full'}), python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}"
    )
    result = anyio.run(main_async, args.quick)
    render(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
