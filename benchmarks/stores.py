"""The session stores side by side on one scripted workload (issue 24): memory, SQLite and
PostgreSQL, each at both durability levels (``"process"``, ``"power"``).

* per journaled tool call: an agent run whose script makes N inline calls minus one making
  M calls, divided by N - M (the turn's fixed cost cancels out); each call writes its intent
  and its outcome to the store's journal;
* per run: a whole short run (create the session, one model reply, 3 tool calls, the final
  answer), end to end.

Ratios are to SQLite at the same durability level; the goal is PostgreSQL per journaled call
<= 3x SQLite. PostgreSQL is a throwaway local server started for the run (tests/_postgres.py:
``initdb``/``pg_ctl`` from Debian's ``postgresql``), or ``--postgres URL`` (an empty database).

    python benchmarks/stores.py            # N=1000, M=100, 5 repeats
    python benchmarks/stores.py --quick    # N=200, M=20, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.sessions import BaseSessionService

LOOP = """total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: the number.
    """
    return x + 1


async def run_s(service: BaseSessionService, n: int, sid: str) -> float:
    """Seconds of one run (session creation included) whose script makes ``n`` calls."""
    agent = CodeActAgent(
        name="bench",
        model=ScriptedModel([f"```python\n{LOOP.format(n=n)}\n```"]),
        runtime=MontyRuntime(),
        tools=[inc],
        max_tool_calls=None,
    )
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    t0 = time.perf_counter()
    await service.create_session(app_name="bench", user_id="u", session_id=sid)
    events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go")]
    elapsed = time.perf_counter() - t0
    assert events[-1].text == str(sum(range(1, n + 1))), events[-1]
    return elapsed


async def measure(
    makers: dict[str, Callable[[], BaseSessionService]], big: int, small: int, repeats: int
) -> dict[str, dict[str, float]]:
    """Each store's figures; the stores take turns within each repeat (side by side: a change
    in the machine's load falls on all of them alike)."""
    per_call: dict[str, list[float]] = {key: [] for key in makers}
    per_run: dict[str, list[float]] = {key: [] for key in makers}
    services = {key: make() for key, make in makers.items()}
    try:
        for service in services.values():
            await run_s(service, 3, "warm")
        for i in range(repeats):
            for key, service in services.items():
                b = await run_s(service, big, f"b{i}")
                s = await run_s(service, small, f"s{i}")
                per_call[key].append((b - s) / (big - small))
                per_run[key].append(statistics.median([await run_s(service, 3, f"r{i}.{j}") for j in range(5)]))
    finally:
        for service in services.values():
            service.close()
    return {
        key: {
            "per_call_us": statistics.median(per_call[key]) * 1e6,
            "per_run_ms": statistics.median(per_run[key]) * 1e3,
        }
        for key in makers
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats (CI)")
    parser.add_argument("--postgres", help="a postgresql:// URL of an empty database (default: a throwaway server)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    big, small, repeats = (200, 20, 3) if args.quick else (1000, 100, 5)

    from codeact.sessions import PostgresSessionService

    server = None
    if args.postgres:
        urls = {"process": args.postgres, "power": args.postgres}
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from _postgres import PostgresServer, _bin_dir  # type: ignore[import-not-found]

        bin_dir = _bin_dir()
        if bin_dir is None:
            print("no PostgreSQL binaries (initdb): apt-get install postgresql, or pass --postgres URL")
            return 2
        server = PostgresServer(bin_dir, fsync=True)
        urls = {"process": server.new_database(), "power": server.new_database()}

    results: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            stores: dict[str, Callable[[], BaseSessionService]] = {"memory/process": InMemorySessionService}
            for level in ("process", "power"):
                db = Path(folder) / f"{level}.db"
                stores[f"sqlite/{level}"] = lambda db=db, level=level: SqliteSessionService(db, durability=level)  # type: ignore[misc]
                stores[f"postgres/{level}"] = lambda level=level: PostgresSessionService(urls[level], durability=level)  # type: ignore[misc]
            results = anyio.run(measure, stores, big, small, repeats)
    finally:
        if server is not None:
            server.stop()

    print(
        f"per journaled call: runs of {big} and {small} calls, median of {repeats} (the stores take turns in "
        "each repeat); per run: 3 calls, end to end"
    )
    print(f"{'store':<18}{'per call':>12}{'vs sqlite':>11}{'per run':>11}{'vs sqlite':>11}")
    for key, r in results.items():
        level = key.split("/")[1]
        base = results[f"sqlite/{level}"]
        print(
            f"{key:<18}{r['per_call_us']:>9.0f} us{r['per_call_us'] / base['per_call_us']:>10.2f}x"
            f"{r['per_run_ms']:>8.2f} ms{r['per_run_ms'] / base['per_run_ms']:>10.2f}x"
        )
    for level in ("process", "power"):
        ratio = results[f"postgres/{level}"]["per_call_us"] / results[f"sqlite/{level}"]["per_call_us"]
        verdict = "ok" if ratio <= 3.0 else "MISS"
        print(f"goal: postgres per journaled call <= 3x sqlite ({level}): {ratio:.2f}x {verdict}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
