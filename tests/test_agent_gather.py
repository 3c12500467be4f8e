"""`asyncio.gather` over tool calls through the agent and ``Runner``, on the real interpreter
and real SQLite files: the calls of one gather run concurrently, each is journaled
(intent, outcome), approvable and completable on its own, and a recovery re-runs no tool
whose outcome is stored. Each test runs on a plain run and inside a namespace session
(``persist_namespace=True``: the continuation is the paused session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_helpers import APP, SESSION, USER, fence, intents_of, outcomes_of, slot_of
from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from test_faults import Ledger, collect, final_script, fresh_runner, start, tools_for

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[False, True], ids=["run", "session"])
def persist(request: pytest.FixtureRequest) -> bool:
    """``persist_namespace``: whether the agent runs its scripts in a namespace session."""
    return bool(request.param)


async def assert_mode(service: Any, persist: bool) -> None:
    """The turn in flight stores the idle session it started from exactly when in a session."""
    slot = await slot_of(service)
    assert slot is not None
    namespace = slot.data.get("namespace")
    assert (isinstance(namespace, dict) and "session" in namespace) is persist, namespace


async def test_the_calls_of_a_gather_run_concurrently(tmp_path: Path, persist: bool) -> None:
    started = {"a": anyio.Event(), "b": anyio.Event()}

    async def meet(name: str) -> str:
        """Waits until the other call has started too."""
        started[name].set()
        other = "b" if name == "a" else "a"
        await started[other].wait()
        return f"met {name}"

    script = (
        "import asyncio\n"
        'r = await asyncio.gather(call_tool("meet", {"name": "a"}), call_tool("meet", {"name": "b"}))\n'
        + final_script("r")
    )
    agent = CodeActAgent(
        name="coder",
        model=ScriptedModel([fence(script)]),
        runtime=MontyRuntime(),
        tools=[meet],
        persist_namespace=persist,
    )
    with SqliteSessionService(tmp_path / "s.db") as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        with anyio.fail_after(20):  # one call after the other would wait forever
            events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert intents_of(service) == ["meet", "meet"]
        assert [o["v"] for o in outcomes_of(service)] == ["met a", "met b"]
    assert json.loads(events[-1].text) == ["met a", "met b"]


async def test_each_call_of_a_gather_is_approved_on_its_own(tmp_path: Path, persist: bool) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = (
        "import asyncio\n"
        'r = await asyncio.gather(call_tool("charge", {"item": "x"}), call_tool("note", {"text": "n"}),'
        ' call_tool("charge", {"item": "y"}))\n' + final_script("r")
    )
    await start(db, ledger, script, persist_namespace=persist)
    assert ledger.lines() == ["note n"]  # the ungated call ran; both charges wait for a human
    with SqliteSessionService(db) as service:
        await assert_mode(service, persist)
        runner = fresh_runner(service, ledger, persist_namespace=persist)
        pending = await runner.pending(user_id=USER, session_id=SESSION)
        assert [(p.tool, p.args, p.kind) for p in pending] == [
            ("charge", {"item": "x"}, "confirmation"),
            ("charge", {"item": "y"}, "confirmation"),
        ]
        await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=pending[1].call_key))
        assert ledger.lines() == ["note n", "charge y"]
        left = await runner.pending(user_id=USER, session_id=SESSION)
        assert [p.call_key for p in left] == [pending[0].call_key]
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger, persist_namespace=persist)
        events = await collect(runner.approve(user_id=USER, session_id=SESSION, call_key=pending[0].call_key))
        assert await slot_of(service) is None
        assert await runner.pending(user_id=USER, session_id=SESSION) == []
    assert ledger.lines() == ["note n", "charge y", "charge x"]  # each ran once
    assert json.loads(events[-1].text) == ["charged x", "noted n", "charged y"]


async def test_a_denied_call_of_a_gather_raises_in_the_script(tmp_path: Path, persist: bool) -> None:
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = (
        "import asyncio\ntry:\n"
        '    r = await asyncio.gather(call_tool("charge", {"item": "x"}), call_tool("note", {"text": "n"}))\n'
        "except PermissionError as e:\n    r = str(e)\n" + final_script("r")
    )
    await start(db, ledger, script, persist_namespace=persist)
    with SqliteSessionService(db) as service:
        runner = fresh_runner(service, ledger, persist_namespace=persist)
        events = await collect(runner.deny(user_id=USER, session_id=SESSION, reason="too much"))
    assert ledger.lines() == ["note n"]
    assert "denied by a human reviewer: too much" in events[-1].text


async def test_a_recovery_reruns_no_gathered_call_whose_outcome_is_stored(tmp_path: Path, persist: bool) -> None:
    """The process dies just after the first outcome of a gather is stored: the recovered
    turn replays the script, takes every stored outcome from the journal and runs again only
    a call whose intent is stored without an outcome (the at-least-once window)."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")

    class Crash(BaseException):
        pass

    class CrashingSqlite(SqliteSessionService):
        outcomes = 0

        async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
            await super().append_journal(session, turn, records, **kwargs)
            self.outcomes += sum(r.kind == "outcome" for r in records)
            if self.outcomes == 1:
                raise Crash

    script = (
        "import asyncio\n"
        'r = await asyncio.gather(call_tool("note", {"text": "a"}), call_tool("note", {"text": "b"}))\n'
        + final_script("r")
    )
    with CrashingSqlite(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=_agent(ledger, [fence(script)], persist), session_service=service)
        with pytest.raises(Crash):
            await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    assert sorted(ledger.lines()) == ["note a", "note b"]
    with SqliteSessionService(db) as service:
        await assert_mode(service, persist)  # the turn in flight
        stored = {o["v"] for o in outcomes_of(service)}
        assert stored & {"noted a", "noted b"}  # each outcome is stored as its tool returns
        runner = Runner(app_name=APP, agent=_agent(ledger, [], persist), session_service=service)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message=None))
        assert await slot_of(service) is None
    for text in "ab":  # a stored outcome never runs again; one without reruns once
        assert ledger.lines().count(f"note {text}") == (1 if f"noted {text}" in stored else 2)
    assert json.loads(events[-1].text) == ["noted a", "noted b"]


async def test_a_gathered_call_is_stored_when_it_returns_not_when_its_slowest_sibling_does(
    tmp_path: Path, persist: bool
) -> None:
    """A fast call of a gather returns while a slow one still runs, and the process dies
    before the slow one returns: the fast call's outcome is stored already, so the
    recovered turn runs only the slow call again."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")

    class Crash(BaseException):
        pass

    stored = anyio.Event()

    class WatchedSqlite(SqliteSessionService):
        async def append_journal(self, session: Any, turn: str, records: Any, **kwargs: Any) -> None:
            await super().append_journal(session, turn, records, **kwargs)
            if any(r.kind == "outcome" for r in records):
                stored.set()

    async def slow(text: str) -> str:
        """Writes a note after a while."""
        ledger.add(f"slow {text}")
        if ledger.lines().count(f"slow {text}") == 1:
            with anyio.fail_after(10):
                await stored.wait()  # the fast sibling's outcome is in the journal
            raise Crash  # the process dies while this call runs
        return f"slow {text}"

    def agent(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="coder",
            model=ScriptedModel(replies),
            runtime=MontyRuntime(),
            tools=[*tools_for(ledger), slow],
            persist_namespace=persist,
        )

    script = (
        "import asyncio\n"
        'r = await asyncio.gather(call_tool("note", {"text": "a"}), call_tool("slow", {"text": "b"}))\n'
        + final_script("r")
    )
    with WatchedSqlite(db) as service:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        runner = Runner(app_name=APP, agent=agent([fence(script)]), session_service=service)
        with pytest.raises(BaseException) as raised:
            await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
        assert _contains(raised.value, Crash), raised.value
        assert len(outcomes_of(service)) == 1
    with SqliteSessionService(db) as service:
        runner = Runner(app_name=APP, agent=agent([]), session_service=service)
        events = await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message=None))
    assert ledger.lines().count("note a") == 1  # stored before the crash: never again
    assert ledger.lines().count("slow b") == 2
    assert json.loads(events[-1].text) == ["noted a", "slow b"]


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    """``exc`` is ``kind`` or an exception group holding one (task groups wrap what they raise)."""
    if isinstance(exc, kind):
        return True
    return any(_contains(e, kind) for e in getattr(exc, "exceptions", ()))


def _agent(ledger: Ledger, replies: list[str], persist: bool) -> CodeActAgent:
    return CodeActAgent(
        name="coder",
        model=ScriptedModel(replies),
        runtime=MontyRuntime(),
        tools=tools_for(ledger),
        persist_namespace=persist,
    )


async def test_a_confirmation_gated_gather_checkpoint_survives_a_new_process(tmp_path: Path, persist: bool) -> None:
    """A single-call gather (the call competes with nothing, yet is a gather) suspends and
    resumes from its stored continuation."""
    db, ledger = tmp_path / "s.db", Ledger(tmp_path / "ledger")
    script = 'import asyncio\nr = await asyncio.gather(call_tool("charge", {"item": "z"}))\n' + final_script("r")
    await start(db, ledger, script, persist_namespace=persist)
    with SqliteSessionService(db) as service:
        slot = await slot_of(service)
        assert slot.data["gather"] is True
        await assert_mode(service, persist)
        runner = fresh_runner(service, ledger, persist_namespace=persist)
        events = await collect(runner.approve(user_id=USER, session_id=SESSION))
    assert ledger.lines() == ["charge z"]
    assert json.loads(events[-1].text) == ["charged z"]
