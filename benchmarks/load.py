"""Many sessions at once on this machine's cores (issue 54): 1, 16 and 128 sessions, each
running one ``--calls``-call script (default 100), all at once; total tool calls per second
and CPU seconds per call, codeact beside smolagents' ``CodeAgent``, in one run.

Columns, each level measured for every column before the next level starts:

* **smolagents** ``CodeAgent``: the same sessions in a thread pool of the same size (N runs in
  N threads), in smolagents' own venv (``_peers.py``; created from PyPI on first use), run as
  a child process that prints JSON (``_load_peer.py``). It records nothing per call.
* **codeact, memory**: N sessions of one ``Runner`` (``InMemorySessionService``) in one event
  loop (anyio task group), every call journaled in memory.
* **codeact, SQLite, read-only tools**: the same on one SQLite file (durability "process"),
  the tool declared ``read_only=True`` (issue 50: its outcomes are committed once, at the end
  of the script, not per call).
* **codeact, SQLite, effectful tools**: the same tool without ``read_only``: each call commits
  its intent and its outcome (reported, no goal).

Each session's model replies once with a loop of ``--calls`` calls to ``inc``; the session is
created (codeact) or the agent built (smolagents) before the clock starts; the clock stops when
the last run of the level has returned. CPU seconds are the process's own (all its threads:
``resource.getrusage``) over the same span. Each figure is the best of ``--repeats`` rounds
(the shortest wall time, the least CPU time), on both sides: on a machine other processes load,
a scheduler hiccup lasts as long as a whole round, so the best round is the one that measures
the work (as ``stores.py``); ``--median`` takes medians instead.

Goals (printed beside each figure): codeact in memory >= 2x smolagents' calls per second at
every level; codeact on SQLite with read-only tools >= smolagents at every level; CPU seconds
per call at 128 sessions <= 1.3x that at 1 session (codeact memory and SQLite read-only).

Run: ``python benchmarks/load.py`` (``--json PATH`` also writes the figures; ``--quick``: 20
calls per script, one round, the peer only if its venv already exists: a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _peers import DEFAULT_ROOT, peer_python

from codeact import CodeActAgent, Content, FunctionTool, MontyRuntime, Part, Runner, SqliteSessionService
from codeact.models import BaseLlm, LlmResponse
from codeact.sessions import BaseSessionService, InMemorySessionService

HERE = Path(__file__).resolve().parent
LEVELS = (1, 16, 128)
LOOP = """total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""
GOAL_MEMORY = 2.0  # codeact memory calls/s >= 2x the peer's
GOAL_READ_ONLY = 1.0  # codeact SQLite read-only calls/s >= the peer's
GOAL_CPU_GROWTH = 1.3  # CPU per call at 128 sessions <= 1.3x that at 1


def inc(x: int) -> int:
    """Adds one.

    Args:
        x: the number.
    """
    return x + 1


class Replay(BaseLlm):
    """One reply, a new text each time (a serial comment on the script's first line, as a
    model's text is new each time: no cache keyed by script text serves a replayed script);
    nothing recorded."""

    name = "replay"

    def __init__(self, script: str) -> None:
        self.script = script
        self.served = 0

    async def generate_content(self, request: Any) -> LlmResponse:
        """The reply: the script in a fence."""
        self.served += 1
        text = f"```python\n# reply {self.served}\n{self.script}\n```"
        return LlmResponse(content=Content(role="model", parts=[Part(text=text)]), finish_reason="stop")


COLUMNS: dict[str, tuple[str, bool]] = {
    # column -> (store, tool declared read-only)
    "codeact memory": ("memory", False),
    "codeact sqlite read-only": ("sqlite", True),
    "codeact sqlite effectful": ("sqlite", False),
}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def codeact_level(
    service: BaseSessionService, sessions: int, calls: int, read_only: bool, tag: str
) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``sessions`` runs at once, each one ``calls``-call script,
    on one runner over ``service``."""
    tool = FunctionTool(inc, name="inc", read_only=read_only)
    agent = CodeActAgent(
        name="bench", model=Replay(LOOP.format(n=calls)), runtime=MontyRuntime(), tools=[tool], max_tool_calls=None
    )
    runner = Runner(app_name="load", agent=agent, session_service=service)
    sids = [f"{tag}-{i}" for i in range(sessions)]
    for sid in sids:
        await service.create_session(app_name="load", user_id="u", session_id=sid)
    finals: list[str] = []

    async def one(sid: str) -> None:
        events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go")]
        finals.append(events[-1].text)

    c0, t0 = cpu_s(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for sid in sids:
            tg.start_soon(one, sid)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    assert finals == [str(sum(range(1, calls + 1)))] * sessions, finals[:3]
    return wall, cpu


def codeact_column(
    column: str, sessions: int, calls: int, repeats: int, folder: Path, pick: Any = min
) -> dict[str, float]:
    """``pick`` (``min``: the best; or ``statistics.median``) of ``repeats`` rounds of one column
    at one level (a fresh store each round)."""
    store, read_only = COLUMNS[column]
    rounds = []
    for r in range(repeats):
        tag = f"{store}-{read_only}-{sessions}-{r}"
        service: BaseSessionService = (
            InMemorySessionService() if store == "memory" else SqliteSessionService(folder / f"{tag}.db")
        )
        with service:
            rounds.append(anyio.run(codeact_level, service, sessions, calls, read_only, tag))
    return {
        "wall_s": pick(r[0] for r in rounds),
        "cpu_s": pick(r[1] for r in rounds),
        "calls": sessions * calls,
    }


def peer_level(python: Path, levels: list[int], calls: int, repeats: int, median: bool) -> dict[str, Any]:
    """The smolagents column's figures for ``levels`` (``_load_peer.py`` in its venv), or
    ``{"error": ...}``."""
    args = [str(python), str(HERE / "_load_peer.py"), "--levels", ",".join(map(str, levels))]
    args += ["--calls", str(calls), "--repeats", str(repeats), *(["--median"] if median else [])]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=HERE)
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def others_busy() -> tuple[float, float] | None:
    """(CPU seconds the machine has spent busy, CPU seconds of this process and its children)
    from /proc/stat (as ``runtime.py``); None where unavailable."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)  # minus idle, iowait
    t = os.times()
    return busy / hz, t.user + t.system + t.children_user + t.children_system


def per_second(row: dict[str, float]) -> float:
    return row["calls"] / row["wall_s"]


def cpu_us(row: dict[str, float]) -> float:
    return row["cpu_s"] / row["calls"] * 1e6


def verdict(ok: bool, goal: str) -> str:
    return f"{'PASS' if ok else 'MISS'} ({goal})"


def render(figures: dict[str, Any], levels: list[int]) -> None:
    peer = figures.get("smolagents", {})
    name = f"smolagents {peer['version']} CodeAgent" if "version" in peer else "smolagents CodeAgent"
    print(f"\n{'sessions':>8}  {'column':<28}{'calls/s':>10}{'CPU us/call':>13}{'x peer':>9}  goal")
    for n in levels:
        key = str(n)
        theirs = peer.get("levels", {}).get(key)
        if theirs is None:
            print(f"{n:>8}  {name:<28}  {peer.get('error') or peer.get('skipped') or '-'}")
        else:
            print(f"{n:>8}  {name:<28}{per_second(theirs):>10.0f}{cpu_us(theirs):>13.1f}{'1.00x':>9}")
        for column in COLUMNS:
            row = figures[column][key]
            ratio = per_second(row) / per_second(theirs) if theirs else None
            cell = f"{ratio:>8.2f}x" if ratio is not None else f"{'-':>9}"
            goal = ""
            if ratio is not None and column == "codeact memory":
                goal = verdict(ratio >= GOAL_MEMORY, f">= {GOAL_MEMORY:g}x peer")
            elif ratio is not None and column == "codeact sqlite read-only":
                goal = verdict(ratio >= GOAL_READ_ONLY, f">= {GOAL_READ_ONLY:g}x peer")
            print(f"{'':>8}  {column:<28}{per_second(row):>10.0f}{cpu_us(row):>13.1f}{cell}  {goal}")
    first, last = str(levels[0]), str(levels[-1])
    print(f"\nCPU seconds per call at {last} sessions / at {first}:")
    columns = ["smolagents"] if "levels" in peer else []
    for column in [*columns, *COLUMNS]:
        rows = peer["levels"] if column == "smolagents" else figures[column]
        growth = cpu_us(rows[last]) / cpu_us(rows[first])
        goal = ""
        if column in ("codeact memory", "codeact sqlite read-only"):
            goal = verdict(growth <= GOAL_CPU_GROWTH, f"<= {GOAL_CPU_GROWTH:g}x")
        print(f"  {column:<36}{growth:>6.2f}x  {goal}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 calls per script, one round, existing peer venv only")
    parser.add_argument("--calls", type=int, help="calls per script (default 100; --quick 20)")
    parser.add_argument("--repeats", type=int, help="rounds per level and column (default 3; --quick 1)")
    parser.add_argument("--median", action="store_true", help="medians of the rounds instead of the best")
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)), help="sessions at once, comma-separated")
    parser.add_argument("--no-peer", action="store_true", help="codeact only")
    parser.add_argument("--venvs", type=Path, default=DEFAULT_ROOT, help="where the peer venvs live")
    parser.add_argument("--smolagents-python", help="interpreter with smolagents, instead of its venv")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    calls = args.calls or (20 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 3)
    levels = [int(x) for x in args.levels.split(",")]
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    pick_name = "median" if args.median else "best"
    print(
        f"load: {','.join(map(str, levels))} sessions at once, {calls} calls each, {pick_name} of {repeats}; "
        f"python {sys.version.split()[0]}, {cores} cores usable, load {os.getloadavg()[0]:.2f}"
    )
    figures: dict[str, Any] = {column: {} for column in COLUMNS}
    busy0, t0 = others_busy(), time.perf_counter()
    python: Path | str = "--no-peer"
    if not args.no_peer:
        given = {"smolagents": args.smolagents_python} if args.smolagents_python else None
        python = peer_python("smolagents", args.venvs, create=not args.quick, given=given)
    figures["smolagents"] = {"skipped": python} if isinstance(python, str) else {"levels": {}}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "warm-up").mkdir()
        for column in COLUMNS:  # warm-up, not counted
            codeact_column(column, 1, calls, 1, Path(tmp) / "warm-up")
        for n in levels:
            if isinstance(python, Path) and (not args.quick or n == levels[0]):
                # one child per level (alternating with codeact's columns), or one for all (--quick)
                got = peer_level(python, levels if args.quick else [n], calls, repeats, args.median)
                if "error" in got:
                    figures["smolagents"] = got
                    python = "failed"
                else:
                    figures["smolagents"]["version"] = got["version"]
                    figures["smolagents"]["levels"].update(got["levels"])
            for column in COLUMNS:
                pick = statistics.median if args.median else min
                figures[column][str(n)] = codeact_column(column, n, calls, repeats, Path(tmp), pick)
    render(figures, levels)
    busy1, wall = others_busy(), time.perf_counter() - t0
    if busy0 is not None and busy1 is not None:
        others = max(0.0, ((busy1[0] - busy0[0]) - (busy1[1] - busy0[1])) / wall)
        figures["other_processes_cpus_busy"] = others
        print(f"\nother processes kept {others:.2f} of {cores} CPUs busy on average during the run", end="")
        print(": a loaded machine (the issue's contention case)" if others > 0.25 else "")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
