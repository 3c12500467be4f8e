"""The session stores side by side on one scripted workload (issues 24 and 50): memory,
SQLite and PostgreSQL, each at both durability levels (``"process"``, ``"power"``).

* per journaled tool call (a call with effects): an agent run whose script makes N inline
  calls minus one making M calls, divided by N - M (the turn's fixed cost cancels out); each
  call writes its intent and its outcome to the store's journal;
* per run: a whole short run (create the session, one model reply, 3 tool calls, the final
  answer), end to end.

Ratios are to SQLite at the same durability level; the goal is PostgreSQL per journaled call
<= 3x SQLite.

Issue 50 (SPEC §5 v4, read-only tools), at durability ``"process"``:

* per read-only call: a run of R calls to a tool declared ``read_only=True`` minus a run of
  none (each the fastest of several runs), divided by R (R = 100: the end-of-script commit,
  the only one, is spread over the calls); goal <= 1.5x the in-memory call;
* per call with effects: beside its floor, the in-memory call plus two commits of the store
  (one journal record each, through the path the driver takes: the store's synchronous
  ``journal_appender`` when it has one, else ``append_journal``), measured in the same run;
  goal within 1.2x of the floor;
* per run of the mixed script (10 read-only calls, then one call with effects): each store
  beside memory.

PostgreSQL is a throwaway local server started for the run (tests/_postgres.py:
``initdb``/``pg_ctl`` from Debian's ``postgresql``), or ``--postgres URL`` (an empty database).

    python benchmarks/stores.py            # N=1000, M=100, 5 repeats
    python benchmarks/stores.py --quick    # N=200, M=20, 3 repeats (CI smoke: bounded)
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

from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.sessions import BaseSessionService, JournalRecord

LOOP = """total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""

READS = """total = 0
for i in range({n}):
    total += call_tool("read", {{"x": i}})
{{"type": "final_result", "value": total}}"""

MIXED = """total = 0
for i in range(10):
    total += call_tool("read", {"x": i})
total += call_tool("inc", {"x": total})
{"type": "final_result", "value": total}"""
MIXED_RESULT = 2 * sum(range(1, 11)) + 1


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: the number.
    """
    return x + 1


READ = FunctionTool(inc, name="read", read_only=True)


async def run_s(service: BaseSessionService, n: int, sid: str, script: str = LOOP) -> float:
    """Seconds of one run (session creation included) whose script makes ``n`` calls
    (``script``: ``LOOP`` calls with effects, ``READS`` read-only ones, ``MIXED`` both)."""
    agent = CodeActAgent(
        name="bench",
        model=ScriptedModel([f"```python\n{script.format(n=n) if script != MIXED else MIXED}\n```"]),
        runtime=MontyRuntime(),
        tools=[inc, READ],
        max_tool_calls=None,
    )
    runner = Runner(app_name="bench", agent=agent, session_service=service)
    t0 = time.perf_counter()
    await service.create_session(app_name="bench", user_id="u", session_id=sid)
    events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go")]
    elapsed = time.perf_counter() - t0
    expected = MIXED_RESULT if script == MIXED else sum(range(1, n + 1))
    assert events[-1].text == str(expected), events[-1]
    return elapsed


async def commit_s(service: BaseSessionService, sid: str, records: int) -> float:
    """Seconds per commit of one journal record (fenced by the slot version), through the
    path the turn driver takes: the store's ``journal_appender`` when it takes the record,
    else ``append_journal``."""
    session = await service.create_session(app_name="bench", user_id="u", session_id=sid)
    version = await service.save_turn(
        app_name="bench", user_id="u", session_id=sid, data={"turn": "t"}, snapshot=None, expected_version=0
    )
    appender = service.journal_appender()
    t0 = time.perf_counter()
    for i in range(records):
        record = [JournalRecord("outcome", i, '{"v":1}')]
        if appender is None or not appender(session, "t", record, version):
            await service.append_journal(session, "t", record, expected_version=version)
    return (time.perf_counter() - t0) / records


async def fastest(service: BaseSessionService, n: int, name: str, script: str, inner: int) -> float:
    """The fastest of ``inner`` runs of ``script`` with ``n`` calls: on a loaded machine a
    hiccup of the scheduler lasts milliseconds, as long as a whole run, so the fastest run is
    the one that measures the work."""
    return min([await run_s(service, n, f"{name}.{j}", script) for j in range(inner)])


async def measure_read_only(
    makers: dict[str, Callable[[], BaseSessionService]], reads: int, repeats: int, inner: int = 5
) -> dict[str, dict[str, float]]:
    """Issue 50's figures per store (durability "process"): per read-only call (a run of
    ``reads`` calls minus a run of none, over ``reads``), per call with effects (the same
    way) and the commit it is compared with, per run of the mixed script. The stores take
    turns within each repeat."""
    figures: dict[str, dict[str, list[float]]] = {
        key: {"read_us": [], "effect_us": [], "commit_us": [], "mixed_ms": []} for key in makers
    }
    services = {key: make() for key, make in makers.items()}
    try:
        for service in services.values():
            await run_s(service, 3, "ro-warm", READS)
            await run_s(service, 3, "fx-warm")
        for i in range(repeats):
            for key, service in services.items():
                f = figures[key]

                none = await fastest(service, 0, f"none.{i}", READS, inner)
                f["read_us"].append((await fastest(service, reads, f"ro.{i}", READS, inner) - none) / reads * 1e6)
                f["effect_us"].append((await fastest(service, reads, f"fx.{i}", LOOP, inner) - none) / reads * 1e6)
                f["commit_us"].append(await commit_s(service, f"c.{i}", reads) * 1e6)
                mixed = [await run_s(service, 0, f"m{i}.{j}", MIXED) for j in range(5)]
                f["mixed_ms"].append(statistics.median(mixed) * 1e3)
    finally:
        for service in services.values():
            service.close()
    return {key: {name: statistics.median(v) for name, v in f.items()} for key, f in figures.items()}


def report_read_only(results: dict[str, dict[str, float]], reads: int, repeats: int) -> None:
    """Prints issue 50's table: ratios to memory, and each store's effect call beside its floor."""
    mem = results["memory"]
    print(
        f"\nread-only calls (issue 50), durability 'process': per call = (run of {reads} calls - run of none) / "
        f"{reads} (each the fastest of several runs), median of {repeats}; floor = in-memory call with effects + 2 "
        "commits of the store"
    )
    print(
        f"{'store':<10}{'read-only':>12}{'vs memory':>11}{'effects':>11}{'commit':>10}{'floor':>10}"
        f"{'vs floor':>10}{'mixed run':>12}{'vs memory':>11}"
    )
    for key, r in results.items():
        floor = mem["effect_us"] + 2 * r["commit_us"] if key != "memory" else mem["effect_us"]
        print(
            f"{key:<10}{r['read_us']:>9.1f} us{r['read_us'] / mem['read_us']:>10.2f}x{r['effect_us']:>8.1f} us"
            f"{r['commit_us']:>7.1f} us{floor:>7.1f} us{r['effect_us'] / floor:>9.2f}x"
            f"{r['mixed_ms']:>9.2f} ms{r['mixed_ms'] / mem['mixed_ms']:>10.2f}x"
        )
    for key, r in results.items():
        if key == "memory":
            continue
        ratio = r["read_us"] / mem["read_us"]
        verdict = "ok" if ratio <= 1.5 else "MISS"
        print(f"goal: {key} per read-only call <= 1.5x the in-memory call: {ratio:.2f}x {verdict}")
        ratio = r["effect_us"] / (mem["effect_us"] + 2 * r["commit_us"])
        verdict = "ok" if ratio <= 1.2 else "MISS"
        print(f"goal: {key} per call with effects within 1.2x of its floor: {ratio:.2f}x {verdict}")


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
    parser.add_argument("--read-only-only", action="store_true", help="only issue 50's read-only figures")
    args = parser.parse_args(argv)
    big, small, repeats = (200, 20, 3) if args.quick else (1000, 100, 5)
    reads, ro_repeats = 100, (2 if args.quick else 5)

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
    read_only: dict[str, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            stores: dict[str, Callable[[], BaseSessionService]] = {"memory/process": InMemorySessionService}
            for level in ("process", "power"):
                db = Path(folder) / f"{level}.db"
                stores[f"sqlite/{level}"] = lambda db=db, level=level: SqliteSessionService(db, durability=level)  # type: ignore[misc]
                stores[f"postgres/{level}"] = lambda level=level: PostgresSessionService(urls[level], durability=level)  # type: ignore[misc]
            if not args.read_only_only:
                results = anyio.run(measure, stores, big, small, repeats)
            ro_db = Path(folder) / "read-only.db"
            ro_stores: dict[str, Callable[[], BaseSessionService]] = {
                "memory": InMemorySessionService,
                "sqlite": lambda: SqliteSessionService(ro_db, durability="process"),
                "postgres": lambda: PostgresSessionService(urls["process"], durability="process"),
            }
            read_only = anyio.run(measure_read_only, ro_stores, reads, ro_repeats, 3 if args.quick else 5)
    finally:
        if server is not None:
            server.stop()
    report_read_only(read_only, reads, ro_repeats)
    if args.json:
        args.json.write_text(json.dumps({"stores": results, "read_only": read_only}, indent=2))
    if args.read_only_only:
        return 0

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
