"""Property test of SPEC §5 (v2, v4): random scripts of inline, read-only, confirmation and
long-running calls, driven through ``Runner`` on a SQLite file by random interleavings of
approve, deny, complete, idle runs, new messages, crashes (before or after a random journal
write: an intent, an outcome, a buffered flush of read-only outcomes, a suspension's commit)
and a concurrent resumer. After every step: no recorded outcome was lost or changed; no tool
ran after its outcome was recorded; no call with effects started before the outcome of every
earlier call was durable; a call with effects ran at most once more than the crashes in its
at-least-once window (a read-only call may run again after any crash); and the final result
equals an uninterrupted run's.

Bounded for CI: ``CODEACT_PROPERTY_EXAMPLES`` (default 20) examples.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import tempfile
import warnings
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    AlreadyResumingError,
    CallsPendingError,
    CodeActAgent,
    FunctionTool,
    LongRunningFunctionTool,
    MontyRuntime,
    NoPendingCallError,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.sessions import JournalRecord, expand_batches

EXAMPLES = int(os.environ.get("CODEACT_PROPERTY_EXAMPLES", "20"))
STATS = {"crashes": 0, "concurrent": 0, "batch": 0}  # batch: crashes around a write of a batch record


class Crash(BaseException):
    """The process dies: nothing catches it."""


def script_for(kinds: list[str]) -> str:
    lines = ["out = []"]
    for i, kind in enumerate(kinds):
        tool = {"n": "note", "c": "charge", "l": "render", "r": "lookup"}[kind]
        call = f'out.append(call_tool("{tool}", {{"k": {i}}}))'
        lines.append(f'try:\n    {call}\nexcept PermissionError:\n    out.append("denied")')
    lines.append('{"type": "final_result", "value": out}')
    return "\n".join(lines)


class World:
    """One session on one SQLite file, and the ledger of side effects per call position."""

    def __init__(self, folder: Path, kinds: list[str]) -> None:
        self.db = folder / "s.db"
        self.kinds = kinds
        self.runs: dict[int, int] = {}
        self.recorded: dict[int, Any] = {}  # outcomes seen recorded so far
        # call -> how many crashes fell between its tool running and its outcome being stored:
        # each such crash allows one more run (the documented at-least-once window).
        self.allowed_reruns: collections.Counter[int] = collections.Counter()
        self.crash_at: tuple[int, bool] | None = None  # (n-th journal write, before it)
        self.crashes = 0
        self.final: Any = None
        self.expected: dict[int, Any] = {}

    def tools(self) -> list[Any]:
        def tool_fn(kind: str) -> Any:
            def run(k: int) -> str:
                self.runs[k] = self.runs.get(k, 0) + 1
                recorded = self.journal_outcomes()
                if k in recorded:  # a tool ran again after its outcome was recorded
                    raise AssertionError(f"call {k} ran after its outcome was recorded")
                if kind != "lookup":  # a call with effects: what the script saw is durable first
                    missing = [j for j in range(k) if j not in recorded]
                    if missing:
                        raise AssertionError(f"call {k} ({kind}) started before calls {missing} were durable")
                return f"{kind} {k}"

            run.__name__ = kind
            run.__doc__ = f"The {kind} tool."
            return run

        return [
            tool_fn("note"),
            FunctionTool(tool_fn("charge"), requires_confirmation=True),
            LongRunningFunctionTool(tool_fn("render")),
            FunctionTool(tool_fn("lookup"), read_only=True),
        ]

    def agent(self) -> CodeActAgent:
        return CodeActAgent(
            name="coder",
            model=ScriptedModel(lambda request: fence(script_for(self.kinds))),
            runtime=MontyRuntime(),
            tools=self.tools(),
        )

    def service(self) -> SqliteSessionService:
        world = self

        class Crashing(SqliteSessionService):
            writes = 0

            async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
                self.writes += 1
                hit = world.crash_at is not None and world.crash_at[0] == self.writes
                if hit:
                    STATS["batch"] += any(r.kind == "batch" for r in records)
                if hit and world.crash_at[1]:
                    world.crash_at = None
                    world.allowed_reruns.update(r.seq for r in expand_batches(records) if r.kind == "outcome")
                    raise Crash
                await super().append_journal(session, turn, records, **kwargs)
                if hit:
                    world.crash_at = None
                    raise Crash

            async def commit_turn(self, session: Any, turn: str, records: Any, **kwargs: Any) -> int:
                # a suspension's or checkpoint's commit of the held read-only outcomes: a
                # journal write too
                self.writes += 1
                hit = world.crash_at is not None and world.crash_at[0] == self.writes
                if hit:
                    STATS["batch"] += any(r.kind == "batch" for r in records)
                if hit and world.crash_at[1]:
                    world.crash_at = None
                    raise Crash
                version = await super().commit_turn(session, turn, records, **kwargs)
                if hit:
                    world.crash_at = None
                    raise Crash
                return version

            def journal_appender(self) -> Any:
                # The store's synchronous write, which the driver tries first: the same
                # crashes, counted by the writes it takes (one it declines is counted above).
                def now(session: Any, turn: str, records: Any, expected_version: Any) -> bool:
                    hit = world.crash_at is not None and world.crash_at[0] == self.writes + 1
                    if hit and world.crash_at[1]:
                        STATS["batch"] += any(r.kind == "batch" for r in records)
                        self.writes += 1
                        world.crash_at = None
                        world.allowed_reruns.update(r.seq for r in expand_batches(records) if r.kind == "outcome")
                        raise Crash
                    if not SqliteSessionService._append_journal_now(self, session, turn, records, expected_version):
                        return False
                    self.writes += 1
                    if hit:
                        STATS["batch"] += any(r.kind == "batch" for r in records)
                        world.crash_at = None
                        raise Crash
                    return True

                return now

        return Crashing(self.db)

    def journal_outcomes(self) -> dict[int, Any]:
        if not self.db.exists():
            return {}
        con = sqlite3.connect(self.db)
        try:
            rows = con.execute("SELECT kind, seq, data FROM journal").fetchall()
        except sqlite3.OperationalError:
            return {}
        finally:
            con.close()
        # the held outcomes of read-only calls are in batch records (one row per flush)
        records = expand_batches([JournalRecord(kind, seq, data) for kind, seq, data in rows])
        return {r.seq: json.loads(r.data) for r in records if r.kind == "outcome"}

    def check(self) -> None:
        now = self.journal_outcomes()
        for k, outcome in self.recorded.items():
            assert now.get(k) == outcome, f"the recorded outcome of call {k} was lost or changed"
        self.recorded = now
        for k, n in self.runs.items():
            if self.kinds[k] == "r":  # read-only: may run again after any crash before its outcome was durable
                assert n <= 1 + self.crashes, f"read-only call {k} ran {n} times"
            else:
                assert n <= 1 + self.allowed_reruns[k], f"call {k} ran {n} times"


async def act(world: World, action: str, data: Any) -> None:
    """One caller action, in a fresh service (as a new process would)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        with world.service() as service:
            runner = Runner(app_name=APP, agent=world.agent(), session_service=service)
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            try:
                if session is None:
                    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
                    events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go")]
                else:
                    events = await decide(world, runner, action, data)
            except Crash:
                STATS["crashes"] += 1
                world.crashes += 1
                return
            if events and events[-1].text.startswith("["):
                world.final = json.loads(events[-1].text)


async def decide(world: World, runner: Runner, action: str, data: Any) -> list[Any]:
    pending = await runner.pending(user_id=USER, session_id=SESSION)
    if action == "idle" or not pending:
        return [e async for e in runner.run_async(user_id=USER, session_id=SESSION)]
    if action == "message":
        try:
            [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="hello?")]
        except CallsPendingError:
            return []
        raise AssertionError("a new message while calls are pending was accepted")
    p = pending[0]
    k = int(p.call_key.rsplit(":", 1)[1])
    if action == "deny":
        world.expected[k] = "denied"
        return [e async for e in runner.deny(user_id=USER, session_id=SESSION, call_key=p.call_key)]
    if p.kind == "completion":
        value = f"done {k}"
        world.expected[k] = value
        return [e async for e in runner.complete(user_id=USER, session_id=SESSION, call_key=p.call_key, value=value)]
    world.expected[k] = f"charge {k}"
    if action == "concurrent":
        results: list[Any] = []

        async def approve_in(service: SqliteSessionService) -> None:
            with service:
                other = Runner(app_name=APP, agent=world.agent(), session_service=service)
                try:
                    approvals = other.approve(user_id=USER, session_id=SESSION, call_key=p.call_key)
                    results.append([e async for e in approvals])
                except (AlreadyResumingError, NoPendingCallError):
                    results.append(None)

        async with anyio.create_task_group() as tg:
            tg.start_soon(approve_in, SqliteSessionService(world.db))
            tg.start_soon(approve_in, SqliteSessionService(world.db))
        assert sum(r is not None for r in results) == 1, "exactly one concurrent resumer wins"
        STATS["concurrent"] += 1
        return next(r for r in results if r is not None)
    return [e async for e in runner.approve(user_id=USER, session_id=SESSION, call_key=p.call_key)]


ACTIONS = st.sampled_from(["approve", "approve", "deny", "idle", "message", "crash", "concurrent"])


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(kinds=st.lists(st.sampled_from(["n", "c", "l", "r", "r"]), min_size=1, max_size=5), data=st.data())
def test_random_interleavings_keep_the_contract(kinds: list[str], data: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp), kinds)
        for k, kind in enumerate(kinds):
            if kind == "n":
                world.expected[k] = f"note {k}"
            elif kind == "r":
                world.expected[k] = f"lookup {k}"

        async def scenario() -> None:
            for _ in range(8 * len(kinds) + 4):
                if world.final is not None:
                    break
                action = data.draw(ACTIONS)
                if action == "crash":
                    world.crash_at = (data.draw(st.integers(1, 3)), data.draw(st.booleans()))
                    action = data.draw(st.sampled_from(["approve", "deny", "idle"]))
                await act(world, action, data)
                world.check()
            while world.final is None:  # finish: approve everything left
                world.crash_at = None
                await act(world, "approve", data)
                world.check()

        anyio.run(scenario)
        # equals an uninterrupted run with the same decisions
        assert world.final == [world.expected[k] for k in range(len(kinds))]


def test_a_crash_before_or_after_each_batched_flush_keeps_the_contract() -> None:
    """Reads, a write, reads: the held outcomes are flushed as one batch record with the
    write's intent and at the end of the script. A crash before or after each journal write
    (the batched flushes among them), then recovery: the same checks as above, and the
    crashes did fall on batch records."""
    kinds = ["r", "r", "n", "r", "r"]
    before = STATS["batch"]
    for n in range(1, 4):  # the write's intent with reads 0 and 1, its outcome, the end with reads 3 and 4
        for crash_before in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                world = World(Path(tmp), kinds)
                world.expected = {k: f"{'lookup' if kind == 'r' else 'note'} {k}" for k, kind in enumerate(kinds)}

                async def scenario(world: World = world, n: int = n, crash_before: bool = crash_before) -> None:
                    world.crash_at = (n, crash_before)
                    await act(world, "idle", None)
                    world.check()
                    while world.final is None:
                        await act(world, "idle", None)
                        world.check()

                anyio.run(scenario)
                assert world.crashes == 1, (n, crash_before)
                assert world.final == [world.expected[k] for k in range(len(kinds))]
    assert STATS["batch"] - before == 4  # writes 1 and 3, before and after
