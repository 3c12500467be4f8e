"""Load and isolation: many concurrent sessions in one event loop, each a multi-turn agent
on its own ``MontyRuntime`` (its own mount) with tools and a suspension for confirmation,
stored in one SQLite file; then several processes writing to one SQLite file at once.

``CODEACT_LOAD_SESSIONS`` sets the number of sessions (CI: 100; ``make load``: 1,000). The
figures (wall time, peak RSS) are printed and written to ``CODEACT_LOAD_REPORT`` if set.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from codeact import (
    CodeActAgent,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    Mount,
    PathAccess,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    ToolContext,
)

SESSIONS = int(os.environ.get("CODEACT_LOAD_SESSIONS", "100"))
REPORT = os.environ.get("CODEACT_LOAD_REPORT")

TURN1 = """
from pathlib import Path
print("hello from {sid}")
Path("/work/note.txt").write_text("{sid}")
r = call_tool("lookup", {{"sid": "{sid}"}})
{{"type": "observation", "value": r}}
"""
TURN2 = """
from pathlib import Path
note = Path("/work/note.txt").read_text()
print("turn two of {sid}")
approved = call_tool("approve", {{"sid": "{sid}"}})
files = sorted([p.name for p in Path("/work").iterdir()])
{{"type": "final_result", "value": {{"sid": "{sid}", "note": note, "approved": approved, "files": files}}}}
"""


def lookup(sid: str, tool_context: ToolContext) -> str:
    """Looks a session up (and records it in session state)."""
    tool_context.state["owner"] = sid
    return f"OBS-{sid}"


def approve(sid: str) -> str:
    """Approves (needs a human decision)."""
    return f"approved-{sid}"


def make_agent(sid: str, folder: Path) -> CodeActAgent:
    def reply(request: object) -> str:
        code = TURN2 if f"OBS-{sid}" in repr(request) else TURN1
        return "```python\n" + code.format(sid=sid).strip() + "\n```"

    runtime = MontyRuntime(mounts=[Mount(virtual_path="/work", host_path=folder, access=PathAccess.READ_WRITE)])
    return CodeActAgent(
        name="coder",
        model=ScriptedModel(reply),
        runtime=runtime,
        tools=[lookup, approve],
        require_tool_confirmation=["approve"],
    )


async def one_session(service: SqliteSessionService, root: Path, i: int) -> dict:
    sid = f"sess-{i:05d}"
    folder = root / sid
    folder.mkdir()
    agent = make_agent(sid, folder)
    await service.create_session(app_name="load", user_id="u", session_id=sid)
    runner = Runner(app_name="load", agent=agent, session_service=service)
    first = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message=f"go {sid}")]
    keys = [k for e in first for k in e.actions.requested_tool_confirmations]
    assert len(keys) == 1, (sid, [e.text for e in first])
    rc = RunConfig(tool_confirmation_decisions={keys[0]: True})
    second = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message=None, run_config=rc)]
    return {"sid": sid, "final": second[-1].text, "suspended": True}


class PeakRss:
    def __init__(self) -> None:
        self.peak = 0
        self._stop = False

    async def sample(self) -> None:
        try:
            import psutil
        except ImportError:  # pragma: no cover
            return
        proc = psutil.Process()
        while not self._stop:
            self.peak = max(self.peak, proc.memory_info().rss)
            await asyncio.sleep(0.05)


async def load(root: Path) -> dict:
    rss = PeakRss()
    sampler = asyncio.ensure_future(rss.sample())
    t0 = time.perf_counter()
    with SqliteSessionService(root / "sessions.db") as service:
        results = await asyncio.gather(*(one_session(service, root, i) for i in range(SESSIONS)))
        wall = time.perf_counter() - t0
        sessions = [await service.get_session(app_name="load", user_id="u", session_id=r["sid"]) for r in results]
    rss._stop = True
    await sampler
    return {"results": results, "sessions": sessions, "wall": wall, "peak_rss": rss.peak}


def journal_rows(db: Path, sid: str) -> list[tuple[str, int, str]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT kind, seq, data FROM journal WHERE session_id = ? ORDER BY turn, seq, kind", (sid,)
        ).fetchall()
    finally:
        con.close()


def test_concurrent_sessions_complete_and_stay_isolated(tmp_path: Path) -> None:
    out = asyncio.run(load(tmp_path))
    sid_pattern = re.compile(r"sess-\d{5}")
    for r, session in zip(out["results"], out["sessions"], strict=True):
        sid = r["sid"]
        final = json.loads(r["final"]) if r["final"].startswith("{") else r["final"]
        assert final == {"sid": sid, "note": sid, "approved": f"approved-{sid}", "files": ["note.txt"]}, final
        assert session.state.get("owner") == sid
        assert session.state.get("codeact_pending") is None
        # No other session's id anywhere in this session's events or journal (tool results).
        dumped = json.dumps([e.model_dump(mode="json") for e in session.events])
        assert set(sid_pattern.findall(dumped)) == {sid}
        journal = [json.loads(d) for kind, _, d in journal_rows(tmp_path / "sessions.db", sid) if kind == "outcome"]
        assert journal == [{"v": f"OBS-{sid}"}, {"v": f"approved-{sid}"}]
        assert (tmp_path / sid / "note.txt").read_text() == sid
    con = sqlite3.connect(tmp_path / "sessions.db")
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    con.close()
    figures = {
        "sessions": SESSIONS,
        "wall_seconds": round(out["wall"], 2),
        "sessions_per_second": round(SESSIONS / out["wall"], 1),
        "peak_rss_mib": round(
            max(out["peak_rss"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20, 1
        ),
        "events": sum(len(s.events) for s in out["sessions"]),
    }
    print("\nLOAD", json.dumps(figures))
    if REPORT:
        Path(REPORT).write_text(json.dumps(figures))


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from codeact import Event, Content, SqliteSessionService
    db, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    async def main():
        with SqliteSessionService(db) as service:
            for i in range(n):
                s = await service.create_session(app_name="w", user_id=who, session_id=f"{who}-{i}")
                for j in range(3):
                    e = Event(invocation_id=f"inv-{i}", author="user", content=Content.from_text(f"{who} {i} {j}"))
                    s = await service.append_event(s, e) and await service.get_session(
                        app_name="w", user_id=who, session_id=f"{who}-{i}")
    asyncio.run(main())
    print("ok")
    """
)


@pytest.mark.parametrize("writers", [4])
def test_concurrent_writer_processes_do_not_corrupt_one_sqlite_file(tmp_path: Path, writers: int) -> None:
    db = tmp_path / "shared.db"
    n = max(10, SESSIONS // 4)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), f"w{k}", str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(writers)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        assert out.strip() == "ok"
    con = sqlite3.connect(db)
    assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    counts = {t: con.execute(f"select count(*) from {t}").fetchone()[0] for t in tables}
    con.close()
    assert any(c == writers * n * 3 for c in counts.values()), counts  # every event of every writer
    assert any(c == writers * n for c in counts.values()), counts  # every session


# ------------------------------------------------------------------ 128 sessions, loop free
# Issue 54: 128 sessions at once in one event loop (asyncio and trio), each one script of
# tool calls, while a ticker task measures the loop's longest stall. Module-wide serial
# (tests/conftest.py: SERIAL_MODULES): a stall measured beside the parallel suite on 2 cores
# would measure the other tests' processes, not this loop.
#
# Expected to fail until issue 54's hand-off lands (xfail, not strict: it passes only on a quiet
# machine today): the driver's StopPacer yields every 2 ms *per session* and each advance may
# block the loop up to INLINE_WAIT (2 ms) in ``resume_within``, so with 128 sessions ready at
# once the ticker waits behind 128 x (2 + 2) ms: stalls of 300-900 ms measured on 2 loaded
# cores (a lone ticker on the same machine: under 30 ms).

AT_ONCE = 128
CALLS_EACH = 50
STALL_LIMIT = 0.050  # seconds
TICK = 0.002

LOOP_SCRIPT = """total = 0
for i in range({n}):
    total += call_tool("inc", {{"x": i}})
{{"type": "final_result", "value": total}}"""


def inc(x: int) -> int:
    """Adds one."""
    return x + 1


class LoopStalled(AssertionError):
    """The event loop stalled longer than ``STALL_LIMIT`` (the only failure the xfail allows:
    a wrong result still fails the test)."""


class Ticker:
    """A task that sleeps ``TICK`` again and again: its longest gap beyond ``TICK`` is the
    event loop's longest stall while it ran."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0
        self.done = False

    async def run(self) -> None:
        last = time.perf_counter()
        while not self.done:
            await anyio.sleep(TICK)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last - TICK)
            self.ticks += 1
            last = now


@pytest.mark.anyio
@pytest.mark.parametrize("store", ["memory", "sqlite-read-only", "sqlite"])
@pytest.mark.xfail(
    reason="issue 54: the loop stalls behind 128 sessions' 2 ms paces and inline waits",
    raises=LoopStalled,
    strict=False,
)
async def test_128_sessions_at_once_never_stall_the_event_loop(tmp_path: Path, store: str) -> None:
    tool = FunctionTool(inc, name="inc", read_only=store == "sqlite-read-only")
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel(lambda request: f"```python\n{LOOP_SCRIPT.format(n=CALLS_EACH)}\n```"),
        runtime=MontyRuntime(),
        tools=[tool],
        max_tool_calls=None,
    )
    service = InMemorySessionService() if store == "memory" else SqliteSessionService(tmp_path / "s.db")
    runner = Runner(app_name="load", agent=agent, session_service=service)
    finals: dict[str, str] = {}
    ticker = Ticker()

    async def one(sid: str) -> None:
        await service.create_session(app_name="load", user_id="u", session_id=sid)
        events = [e async for e in runner.run_async(user_id="u", session_id=sid, new_message="go")]
        finals[sid] = events[-1].text

    with service:
        async with anyio.create_task_group() as outer:
            outer.start_soon(ticker.run)
            await anyio.sleep(TICK * 3)
            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(AT_ONCE):
                    tg.start_soon(one, f"s{i:03d}")
            wall = time.perf_counter() - t0
            ticker.done = True
        sessions = [await service.get_session(app_name="load", user_id="u", session_id=sid) for sid in finals]
    assert finals == {f"s{i:03d}": str(sum(range(1, CALLS_EACH + 1))) for i in range(AT_ONCE)}
    assert all(s is not None and s.state.get("codeact_pending") is None for s in sessions)
    print(
        f"\n{store}: {AT_ONCE} sessions x {CALLS_EACH} calls in {wall:.2f} s; worst stall {ticker.worst * 1e3:.1f} ms"
    )
    if ticker.worst > STALL_LIMIT:  # first: a stalled loop also leaves the ticker few ticks
        raise LoopStalled(f"the event loop stalled {ticker.worst * 1e3:.1f} ms (limit {STALL_LIMIT * 1e3:g} ms)")
    assert ticker.ticks > 10, ticker.ticks  # the ticker ran throughout
