"""A tool call through the agent on a quiet machine and on one whose cores are busy.

Issue 54 item 1: every step is handed to a native worker thread, and that hand-off degraded
under contention by other processes far more than a plain Python loop (5.6x smolagents'
``CodeAgent`` call with two busy-loop processes on both cores, 1.56x quiet). This measures,
side by side in one run, each figure in a child process of its own:

* ``codeact``: a tool call through ``CodeActAgent`` (in-memory session): the slope between a
  run of 1,000 calls and one of 100, in wall time and in CPU time of the whole process (the
  step workers included; ``time.process_time``);
* ``before`` (with ``--before-tree PATH``, a ``python/`` folder of another build with its
  ``_monty``): the same on that tree;
* ``smolagents`` (with ``--smolagents-python PATH``, a Python that imports smolagents): a
  ``CodeAgent`` call (nothing recorded per call), the slope between a 1-call and a 501-call
  script, wall and CPU;

each once on a quiet machine and once while ``--busy`` (default two) processes run
``while True: pass``. The table gives microseconds per call and the ratios to smolagents.

Run: ``python benchmarks/contention.py --smolagents-python ~/.cache/codeact/bench-venvs/smolagents/bin/python``
(``--before-tree /path/to/main/python``, ``--repeats N``, ``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

LOOP_SCRIPT = """total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""


def _codeact_child(repeats: int) -> dict[str, float]:
    import anyio

    from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel

    def inc(x: int) -> int:
        """Adds one."""
        return x + 1

    async def one_run(n: int, sid: str) -> tuple[float, float]:
        service = InMemorySessionService()
        reply = f"```python\n{LOOP_SCRIPT.format(n=n)}\n```"
        agent = CodeActAgent(
            name="bench", model=ScriptedModel([reply]), runtime=MontyRuntime(), tools=[inc], max_tool_calls=None
        )
        runner = Runner(app_name="bench", agent=agent, session_service=service)
        await service.create_session(app_name="bench", user_id="u", session_id=sid)
        w0, c0 = time.perf_counter(), time.process_time()
        events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go")]
        w1, c1 = time.perf_counter(), time.process_time()
        assert events[-1].text == str(sum(range(1, n + 1))), events[-1]
        return w1 - w0, c1 - c0

    async def main() -> dict[str, float]:
        await one_run(100, "warm")
        walls, cpus = [], []
        for i in range(repeats):
            big = await one_run(1000, f"a{i}")
            small = await one_run(100, f"b{i}")
            walls.append((big[0] - small[0]) / 900)
            cpus.append((big[1] - small[1]) / 900)
        return {"wall_us": statistics.median(walls) * 1e6, "cpu_us": statistics.median(cpus) * 1e6}

    return anyio.run(main)


def _smolagents_child(repeats: int) -> dict[str, float]:
    import logging

    sys.path.insert(0, str(HERE))
    from _smolagents_bench import code_agent, code_reply

    logging.disable(logging.CRITICAL)
    many = 501
    small, big = code_agent([code_reply(1, True)]), code_agent([code_reply(many, True)])
    walls, cpus = [], []
    for i in range(repeats + 1):
        pair = []
        for agent, model in (small, big):
            model.reset()
            w0, c0 = time.perf_counter(), time.process_time()
            agent.run("go", reset=True)
            pair.append((time.perf_counter() - w0, time.process_time() - c0))
        if i:
            walls.append((pair[1][0] - pair[0][0]) / (many - 1))
            cpus.append((pair[1][1] - pair[0][1]) / (many - 1))
    return {"wall_us": statistics.median(walls) * 1e6, "cpu_us": statistics.median(cpus) * 1e6}


def _child(python: str, kind: str, repeats: int, tree: Path | None) -> dict[str, float] | str:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    cmd = [python, str(Path(__file__).resolve()), "--child", kind, "--repeats", str(repeats)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", choices=("codeact", "smolagents"))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes of the loaded half")
    parser.add_argument("--before-tree", type=Path, help="another codeact python/ folder, measured beside")
    parser.add_argument("--smolagents-python", type=str, help="a Python that imports smolagents")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.child == "codeact":
        print(json.dumps(_codeact_child(args.repeats)))
        return 0
    if args.child == "smolagents":
        print(json.dumps(_smolagents_child(args.repeats)))
        return 0

    this_tree = HERE.parent / "python"
    columns: list[tuple[str, str, str, Path | None]] = [("codeact", sys.executable, "codeact", this_tree)]
    if args.before_tree:
        columns.append(("before", sys.executable, "codeact", args.before_tree))
    if args.smolagents_python:
        columns.append(("smolagents", args.smolagents_python, "smolagents", None))
    out: dict[str, dict[str, Any]] = {}
    for load in ("quiet", "loaded"):
        busy = []
        if load == "loaded":
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
            time.sleep(0.5)
        try:
            for label, python, kind, tree in columns:
                out[f"{label}/{load}"] = {"figures": _child(python, kind, args.repeats, tree)}
        finally:
            for p in busy:
                p.kill()
                p.wait()
    print(f"per tool call, microseconds (median of {args.repeats}); loaded: {args.busy} busy-loop processes")
    print(f"{'':<22}{'wall':>10}{'cpu':>10}{'wall/smol':>11}{'cpu/smol':>10}")
    for load in ("quiet", "loaded"):
        peer = out.get(f"smolagents/{load}", {}).get("figures")
        for label, *_ in columns:
            figures = out[f"{label}/{load}"]["figures"]
            if isinstance(figures, str):
                print(f"{label + ' ' + load:<22}{figures}")
                continue
            row = f"{label + ' ' + load:<22}{figures['wall_us']:>10.1f}{figures['cpu_us']:>10.1f}"
            if isinstance(peer, dict):
                row += f"{figures['wall_us'] / peer['wall_us']:>10.2f}x{figures['cpu_us'] / peer['cpu_us']:>9.2f}x"
            print(row)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
