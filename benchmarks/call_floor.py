"""The per-call floor and the marginal turn (issue 54, items 2 and 3), before and after in one run.

For this tree and, with ``--before-tree PATH`` (another codeact ``python/`` folder, e.g. a
checkout of main with its built ``_monty``), for that tree in alternating child processes:

* Python function calls per tool call through the agent (cProfile, in-memory store): a
  script looping ``call_tool("lookup", {"i": i})`` 100 times minus a script with none, / 100;
  the event loop's pacing yields are switched off so the count does not depend on the load;
  the least of 5 runs (an advance that misses the inline wait takes the ticket's path);
* the turn slot bytes written per marginal turn (slot JSON and blobs: a 12-turn minus a
  2-turn run, / 10, the workload of ``agent.py``'s marginal turn);
* wall and CPU time per tool call (1,000-call minus 100-call loop script, / 900) and per
  marginal turn, each the slope between the fastest runs of each size over all rounds (the
  figure least disturbed by other load on the machine).

Run: ``python benchmarks/call_floor.py [--before-tree PATH] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import cProfile, json, pstats, sys, time
import anyio
sys.path.insert(0, BENCH)
import codeact.agent._pacing as pacing
import agent as b
from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.sessions._service import to_json


def lookup(i: int) -> int:
    '''Looks up.

    Args:
        i: a number.
    '''
    return i + 1


class Counting(InMemorySessionService):
    written = 0

    async def save_turn(self, **kw):
        if kw["data"] is not None:
            self.written += len(to_json(kw["data"], "t"))
        return await super().save_turn(**kw)

    async def commit_turn(self, session, turn, records, **kw):
        self.written += len(to_json(kw["data"], "t"))
        return await super().commit_turn(session, turn, records, **kw)

    async def put_blob(self, **kw):
        self.written += len(kw["data"])
        return await super().put_blob(**kw)


async def timed(agent, service, sid, profile=None):
    runner = Runner(app_name="b", agent=agent, session_service=service)
    await service.create_session(app_name="b", user_id="u", session_id=sid)
    if profile is not None:
        profile.enable()
    w, c = time.perf_counter(), time.process_time()
    async for _ in runner.run_async(user_id="u", session_id=sid, new_message="go"):
        pass
    w, c = time.perf_counter() - w, time.process_time() - c
    if profile is not None:
        profile.disable()
    return w, c


def looping(n, tool="lookup", arg="i"):
    body = f't = 0\nfor i in range({n}):\n    t += call_tool("{tool}", {{"{arg}": i}})\n'
    return f'```python\n{body}{{"type": "final_result", "value": t}}\n```'


def loop_agent(n):
    model = ScriptedModel([looping(n)])
    return CodeActAgent(name="b", model=model, runtime=MontyRuntime(), tools=[lookup], max_tool_calls=None)


def turns_agent(replies):
    model = b.ReplayModel(replies)
    return CodeActAgent(name="b", model=model, runtime=MontyRuntime(), tools=[b.inc], max_tool_calls=None)


async def main():
    out = {"calls": [], "t2": [], "t12": [], "l100": [], "l1000": []}
    saved = pacing.PACE_SECONDS
    for i in range(5):
        service = InMemorySessionService()
        counts = []
        for n in (0, 100):
            await timed(loop_agent(n), service, f"w{n}-{i}")
            profile = cProfile.Profile()
            pacing.PACE_SECONDS = 1e9
            try:
                import codeact.agent._driver as driver
                if hasattr(driver, "PACE_SECONDS"):
                    driver.PACE_SECONDS = 1e9
                await timed(loop_agent(n), service, f"p{n}-{i}", profile)
            finally:
                pacing.PACE_SECONDS = saved
                if hasattr(driver, "PACE_SECONDS"):
                    driver.PACE_SECONDS = saved
            counts.append(pstats.Stats(profile).total_calls)
        out["calls"].append((counts[1] - counts[0]) / 100)
    small = [b.fence(b.OBSERVE_SCRIPT), b.fence(b.FINAL_SCRIPT)]
    big = [b.fence(b.OBSERVE_SCRIPT)] * 11 + [b.fence(b.FINAL_SCRIPT)]
    one, many = Counting(), Counting()
    await timed(turns_agent(small), one, "x")
    await timed(turns_agent(big), many, "y")
    out["slot_bytes_per_turn"] = (many.written - one.written) / 10
    service = InMemorySessionService()
    for i in range(9):
        out["t2"].append(await timed(turns_agent(small), service, f"a{i}"))
        out["t12"].append(await timed(turns_agent(big), service, f"c{i}"))
    for i in range(5):
        out["l100"].append(await timed(loop_agent(100), service, f"l{i}"))
        out["l1000"].append(await timed(loop_agent(1000), service, f"m{i}"))
    print(json.dumps(out))


anyio.run(main)
"""


def measure(tree: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = f"BENCH = {str(Path(__file__).parent)!r}\n" + CHILD
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def slope(rounds: list[dict], small: str, big: str, steps: int, j: int) -> float:
    return (min(r[j] for x in rounds for r in x[big]) - min(r[j] for x in rounds for r in x[small])) / steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-tree", type=Path, help="another codeact python/ tree, measured beside this one")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trees = {"after": Path(__file__).resolve().parent.parent / "python"}
    if args.before_tree:
        trees = {"before": args.before_tree.resolve(), **trees}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            results[name].append(measure(tree))
    print(f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}, {args.rounds} rounds")
    rows = [
        ("Python function calls per tool call", lambda r: min(c for x in r for c in x["calls"]), ""),
        ("slot bytes written per marginal turn", lambda r: r[0]["slot_bytes_per_turn"], "B"),
        ("per tool call, wall", lambda r: slope(r, "l100", "l1000", 900, 0) * 1e6, "us"),
        ("per tool call, CPU", lambda r: slope(r, "l100", "l1000", 900, 1) * 1e6, "us"),
        ("marginal turn, wall", lambda r: slope(r, "t2", "t12", 10, 0) * 1e3, "ms"),
        ("marginal turn, CPU", lambda r: slope(r, "t2", "t12", 10, 1) * 1e3, "ms"),
    ]
    print(f"{'':<40}" + "".join(f"{name:>12}" for name in trees) + ("   after/before" if len(trees) > 1 else ""))
    for label, figure, unit in rows:
        values = [figure(results[name]) for name in trees]
        ratio = f"   {values[-1] / values[0]:.2f}" if len(values) > 1 and values[0] else ""
        print(f"{label:<40}" + "".join(f"{v:>9.2f} {unit:<2}" for v in values) + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
