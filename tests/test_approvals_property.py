"""A fault-injection property test over the whole decision path (issue 17): approve, deny,
recover, a new message, an idle run, with faults injected at each step, on a real SQLite
file and the real interpreter.

Faults (counted per kind; the test fails if a kind was never injected):

- ``roster``: a deploy with another tool roster tries the decision first;
- ``crash``: the runner dies between a tool's side effect and its outcome record (a
  ``BaseException`` out of the tool, as a kill would end the run);
- ``store``: the store fails at the k-th write of the step;
- ``lease``: another host's claim sits on the turn and its lease expires on the clock;
- ``redeliver``: the step is sent again with the same run key;
- ``edit``: the stored record's pending call is edited to name another call.

Invariants: the tool that runs after an approval is the one ``pending()`` listed (name and
arguments); a tool never runs again after its outcome is recorded (so each side effect happens
once, plus once per crash injected inside it); a pending call is never lost (it stays listed, or
the turn is reported interrupted and recovers); the final result equals an uninterrupted run's.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import example as hypothesis_example
from hypothesis import strategies as st

from agent_helpers import APP, SESSION, USER, fence
from codeact import (
    AlreadyResumingError,
    CallsPendingError,
    CodeActAgent,
    FunctionTool,
    MontyRuntime,
    NoPendingCallError,
    Runner,
    ScriptedModel,
    SessionStoreError,
    SqliteSessionService,
)
from codeact.exceptions import ScriptExhaustedError

SCRIPT = """
a = call_tool("note", {"text": "a"})
try:
    p = call_tool("pay", {"amount": 900})
except PermissionError:
    p = "denied"
b = call_tool("note", {"text": "b"})
{"type": "final_result", "value": [a, p, b]}
"""

KINDS = ("roster", "crash", "store", "lease", "redeliver", "edit")
INJECTED: collections.Counter[str] = collections.Counter()
EXAMPLES = [0]


class Crash(BaseException):
    """The process ends here (a kill): not an exception a tool pipeline catches."""


class World:
    """One example: a SQLite file, a ledger of side effects, the faults armed for the step."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "s.db"
        self.ledger: list[str] = []
        self.crash_on: str | None = None  # the tool whose next run dies after its side effect
        self.crashes: collections.Counter[str] = collections.Counter()
        self.fail_write: int | None = None  # the k-th store write of the step fails
        self.writes = 0
        self.clock = time.time()

    def tools(self, extra: bool = False) -> list[Any]:
        def note(text: str) -> str:
            """Writes a note."""
            self.ledger.append(f"note {text}")
            self._maybe_crash(f"note {text}")
            return f"noted {text}"

        def pay(amount: int) -> str:
            """Pays (needs approval)."""
            self.ledger.append(f"pay {amount}")
            self._maybe_crash(f"pay {amount}")
            return f"paid {amount}"

        tools: list[Any] = [FunctionTool(note, run_in_thread=False), FunctionTool(pay, requires_confirmation=True)]
        if extra:

            def audit() -> str:
                """A tool of a later deploy."""
                return "ok"

            tools.append(FunctionTool(audit))
        return tools

    def _maybe_crash(self, what: str) -> None:
        if self.crash_on == what:
            self.crash_on = None
            self.crashes[what] += 1
            raise Crash(what)

    def runner(self, service: SqliteSessionService, *, extra: bool = False, replies: int = 0) -> Runner:
        agent = CodeActAgent(
            name="coder",
            model=ScriptedModel([fence(SCRIPT)] * replies),
            runtime=MontyRuntime(),
            tools=self.tools(extra),
        )
        return Runner(app_name=APP, agent=agent, session_service=service, clock=lambda: self.clock)

    def service(self) -> SqliteSessionService:
        world = self

        class Faulty(SqliteSessionService):
            def _count(self, records: Any = ()) -> None:
                world.writes += 1
                if world.fail_write is not None and world.writes == world.fail_write:
                    world.fail_write = None
                    if any(r.kind == "outcome" for r in records) and world.ledger:
                        # the outcome of the tool that just ran is lost: the same window as a
                        # crash between its side effect and its outcome record
                        world.crashes[world.ledger[-1]] += 1
                    raise SessionStoreError("injected store failure")

            async def save_turn(self, **kwargs: Any) -> int:
                self._count()
                return await super().save_turn(**kwargs)

            async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
                self._count(records)
                await super().append_journal(session, turn, records, **kwargs)

            async def append_event(self, session: Any, event: Any) -> Any:
                self._count()
                return await super().append_event(session, event)

        return Faulty(self.db)

    def record(self) -> dict[str, Any] | None:
        con = sqlite3.connect(self.db)
        try:
            row = con.execute("SELECT data FROM turns WHERE data IS NOT NULL").fetchone()
        finally:
            con.close()
        return json.loads(row[0]) if row else None

    def write_record(self, data: dict[str, Any]) -> None:
        con = sqlite3.connect(self.db)
        con.execute("UPDATE turns SET data = ?", (json.dumps(data),))
        con.commit()
        con.close()


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def step(world: World, action: str, fault: str | None, k: int, key: str) -> tuple[list[Any], Any]:
    """Runs one action with ``fault`` armed; returns the events and what ``pending()`` showed
    before an approval (None otherwise). Expected typed errors end the step quietly."""
    shown = None
    if fault == "lease":
        data = world.record()
        if data is not None:
            now = world.clock
            data["claim"] = {"owner": "far:1:x", "host": "far", "pid": 1, "taken_at": now, "renewed_at": now}
            world.write_record(data)
            with SqliteSessionService(world.db) as plain:
                with pytest.raises(AlreadyResumingError):  # a live claim is never taken over
                    await collect(world.runner(plain).approve(user_id=USER, session_id=SESSION))
            world.clock += 31  # its lease runs out
    if fault == "edit":
        data = world.record()
        if data is not None and data.get("pending"):
            data["pending"][0] |= {"tool": "pay", "args": {"amount": 999999}}
            world.write_record(data)
    if fault == "roster":
        with SqliteSessionService(world.db) as plain:
            stale = world.runner(plain, extra=True)
            try:
                events = await collect(stale.approve(user_id=USER, session_id=SESSION))
                assert events[-1].error_code == "codeact.stale_checkpoint"
            except (NoPendingCallError, AlreadyResumingError):
                pass
    if fault == "crash":
        world.crash_on = {"start": "note a", "approve": "pay 900", "deny": "note b", "recover": "note b"}.get(action)
    if fault == "store":
        world.writes, world.fail_write = 0, k
    events: list[Any] = []
    with world.service() as service:
        runner = world.runner(service, replies=1 if action == "start" else 0)
        for attempt in range(2 if fault == "redeliver" else 1):
            try:
                if action == "start":
                    events = await collect(
                        runner.run_async(user_id=USER, session_id=SESSION, new_message="go", run_key=key)
                    )
                elif action == "approve":
                    pending = await runner.pending(user_id=USER, session_id=SESSION)
                    if pending:
                        shown = (pending[0].tool, pending[0].args)
                    events = await collect(runner.approve(user_id=USER, session_id=SESSION, run_key=key))
                elif action == "deny":
                    events = await collect(runner.deny(user_id=USER, session_id=SESSION, reason="no", run_key=key))
                elif action == "recover":
                    events = await collect(runner.recover(user_id=USER, session_id=SESSION, run_key=key))
                elif action == "idle":
                    info = await runner.turn_info(user_id=USER, session_id=SESSION)
                    if info is not None and info.status == "suspended":
                        events = await collect(runner.run_async(user_id=USER, session_id=SESSION))
                        assert not any(e.author == "user" for e in events)
                elif action == "message":
                    events = await collect(
                        runner.run_async(user_id=USER, session_id=SESSION, new_message="never mind", run_key=key)
                    )
            except (Crash, SessionStoreError, NoPendingCallError, CallsPendingError, AlreadyResumingError) as exc:
                if os.environ.get("CODEACT_PROPERTY_DEBUG"):
                    print(action, fault, attempt, "->", type(exc).__name__, exc)
            except ScriptExhaustedError:
                if os.environ.get("CODEACT_PROPERTY_DEBUG"):
                    print(action, fault, attempt, "-> the model was asked")
                assert action == "message"  # a message after the run finished starts a new invocation
            if attempt == 1:
                assert all(e.custom_metadata.get("codeact_replayed") for e in events if e.custom_metadata), events
    world.crash_on, world.fail_write = None, None  # a fault is armed for its step only
    return events, shown


async def example(world: World, plan: list[tuple[str, str | None, int]]) -> None:
    with SqliteSessionService(world.db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    started = False
    decision: str | None = None
    for i, (action, fault, k) in enumerate(plan):
        if not started:
            action = "start"
        if fault is not None:
            INJECTED[fault] += 1
        events, shown = await step(world, action, fault, k, f"step-{i}")
        started = started or bool(events) or world.record() is not None or bool(world.ledger)
        if "pay 900" in world.ledger and decision is None and shown is not None:
            assert shown == ("pay", {"amount": 900})  # what ran is what was listed
            decision = "approve"
        check(world)
    # finish: approve (or recover) until the turn ends, with no faults
    for _ in range(6):
        with SqliteSessionService(world.db) as service:
            runner = world.runner(service, replies=0 if started else 1)
            info = await runner.turn_info(user_id=USER, session_id=SESSION)
            if info is None:
                if not started:
                    events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
                    started = True
                    continue
                break
            assert info.status in ("suspended", "interrupted"), info
            if info.status == "interrupted":
                await collect(runner.recover(user_id=USER, session_id=SESSION))
            else:
                (p,) = info.pending  # a pending call is never lost
                assert (p.tool, p.args) == ("pay", {"amount": 900})
                await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=p.call_key, digest=p.digest))
                decision = decision or "approve"
        check(world)
    with SqliteSessionService(world.db) as service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    finals = [e for e in session.events if e.is_final_response() and e.author == "coder"]
    # an uninterrupted run's result for the decision taken (pay runs only after an approval)
    expected = ["noted a", "paid 900" if "pay 900" in world.ledger else "denied", "noted b"]
    assert finals and json.loads(finals[-1].text) == expected, [e.text for e in session.events]
    keys = [(e.custom_metadata or {}).get("codeact_run_key") for e in session.events if e.author == "user"]
    assert len(keys) == len(set(keys)), keys  # no message stored twice for one run key


def check(world: World) -> None:
    for what in ("note a", "pay 900", "note b"):
        assert world.ledger.count(what) <= 1 + world.crashes[what], (what, world.ledger, world.crashes)


ACTIONS = st.sampled_from(["approve", "deny", "recover", "idle", "message", "approve"])
FAULTS = st.one_of(st.none(), st.sampled_from(KINDS))


@settings(
    max_examples=int(os.environ.get("CODEACT_PROPERTY_EXAMPLES", "25")),
    deadline=None,
    derandomize=True,  # the same examples on every run
    suppress_health_check=[HealthCheck.too_slow],
)
# Every kind of fault at least once, whatever the generated examples are.
@hypothesis_example(plan=[("approve", None, 1), ("approve", "roster", 1), ("approve", "edit", 1)])
@hypothesis_example(plan=[("approve", "crash", 1), ("recover", "redeliver", 1), ("approve", "lease", 1)])
@hypothesis_example(plan=[("approve", None, 1), ("deny", "store", 2), ("approve", "crash", 1)])
@given(plan=st.lists(st.tuples(ACTIONS, FAULTS, st.integers(1, 4)), min_size=2, max_size=5))
def _property(plan: list[tuple[str, str | None, int]]) -> None:
    EXAMPLES[0] += 1
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(example, World(Path(folder)), plan)


def test_decision_path_under_injected_faults() -> None:
    INJECTED.clear()
    EXAMPLES[0] = 0
    _property()
    print(f"\ndecision-path property: {EXAMPLES[0]} examples, faults injected {dict(INJECTED)}")
    for kind in KINDS:
        assert INJECTED[kind] > 0, f"no {kind} fault was injected: the property proved nothing about it"
