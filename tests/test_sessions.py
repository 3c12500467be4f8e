"""Session services: InMemorySessionService and SqliteSessionService, under asyncio and trio."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

import codeact.sessions
from codeact.exceptions import CodeActError
from codeact.sessions import (
    BaseSessionService,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    JournalRecord,
    Part,
    Session,
    SessionExistsError,
    SessionNotFoundError,
    SessionStoreError,
    SqliteSessionService,
    StaleSessionError,
    ToolConfirmation,
    TurnConflictError,
)
from codeact.sessions import _memory as memory_module
from codeact.sessions import _sqlite as sqlite_module
from conftest import ServiceFactory

pytestmark = pytest.mark.anyio

APP = "app"


def user_event(text: str, delta: dict[str, Any] | None = None, **kwargs: Any) -> Event:
    return Event(
        author="user",
        invocation_id="inv-1",
        content=Content.from_text(text),
        actions=EventActions(state_delta=delta or {}),
        **kwargs,
    )


def texts(session: Session | None) -> list[str]:
    assert session is not None
    return [e.text for e in session.events]


def test_exports() -> None:
    assert isinstance(codeact.sessions.__all__, tuple)
    public = {n for n in dir(codeact.sessions) if not n.startswith("_")}
    assert set(codeact.sessions.__all__) <= public
    assert issubclass(SessionStoreError, CodeActError)
    for cls in (SessionNotFoundError, SessionExistsError, StaleSessionError):
        assert issubclass(cls, SessionStoreError)


# --- create / get / list / delete ---------------------------------------------------------


async def test_create_get_list_delete(service: BaseSessionService) -> None:
    s1 = await service.create_session(app_name=APP, user_id="u1", state={"a": 1}, session_id="s1")
    assert (s1.id, s1.app_name, s1.user_id, s1.state, s1.events) == ("s1", APP, "u1", {"a": 1}, [])
    s2 = await service.create_session(app_name=APP, user_id="u1")
    assert len(s2.id) == 32
    await service.create_session(app_name=APP, user_id="u2", session_id="s1")  # same id, other user
    await service.create_session(app_name="other", user_id="u1", session_id="s1")  # other app

    got = await service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"a": 1}
    assert got.last_update_time == s1.last_update_time
    assert await service.get_session(app_name=APP, user_id="u1", session_id="missing") is None
    assert await service.get_session(app_name=APP, user_id="u3", session_id="s1") is None

    await service.append_event(s1, user_event("hi"))
    listed = await service.list_sessions(app_name=APP, user_id="u1")
    assert [s.id for s in listed] == ["s1", s2.id]
    assert all(s.events == [] for s in listed)
    assert listed[0].state == {"a": 1}
    everyone = await service.list_sessions(app_name=APP, user_id=None)
    assert sorted((s.user_id, s.id) for s in everyone) == sorted([("u1", "s1"), ("u1", s2.id), ("u2", "s1")])

    await service.delete_session(app_name=APP, user_id="u1", session_id="s1")
    assert await service.get_session(app_name=APP, user_id="u1", session_id="s1") is None
    assert await service.get_session(app_name=APP, user_id="u2", session_id="s1") is not None
    assert [s.id for s in await service.list_sessions(app_name=APP, user_id="u1")] == [s2.id]
    await service.delete_session(app_name=APP, user_id="u1", session_id="s1")  # no-op
    # the id can be reused, and the new session does not inherit the old events or state
    again = await service.create_session(app_name=APP, user_id="u1", session_id="s1")
    assert again.state == {}
    assert texts(await service.get_session(app_name=APP, user_id="u1", session_id="s1")) == []


async def test_duplicate_id_raises(service: BaseSessionService) -> None:
    await service.create_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionExistsError, match="'s' already exists"):
        await service.create_session(app_name=APP, user_id="u", session_id="s")


async def test_returned_sessions_are_copies(service: BaseSessionService) -> None:
    initial = {"nested": {"x": [1]}}
    s = await service.create_session(app_name=APP, user_id="u", state=initial, session_id="s")
    initial["nested"]["x"].append(2)
    s.state["nested"]["x"].append(3)
    event = user_event("hi", {"k": {"v": 1}})
    stored = await service.append_event(s, event)
    event.actions.state_delta["k"]["v"] = 2
    stored.actions.state_delta["k"]["v"] = 3
    s.state["k"]["v"] = 4
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == {"nested": {"x": [1]}, "k": {"v": 1}}
    got.events[0].content.parts[0].text = "changed"  # type: ignore[union-attr]
    assert texts(await service.get_session(app_name=APP, user_id="u", session_id="s")) == ["hi"]


async def test_event_filters(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for i in range(5):
        await service.append_event(s, user_event(f"e{i}", timestamp=100.0 + i))

    async def get(**kw: Any) -> list[str]:
        return texts(await service.get_session(app_name=APP, user_id="u", session_id="s", **kw))

    assert await get() == ["e0", "e1", "e2", "e3", "e4"]
    assert await get(num_recent_events=2) == ["e3", "e4"]
    assert await get(num_recent_events=0) == []
    assert await get(num_recent_events=10) == ["e0", "e1", "e2", "e3", "e4"]
    assert await get(after_timestamp=102.0) == ["e2", "e3", "e4"]
    assert await get(after_timestamp=101.5, num_recent_events=1) == ["e4"]


# --- append_event and state -----------------------------------------------------------------


async def test_append_applies_state_delta(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", state={"a": 1, "b": 2}, session_id="s")
    before = s.last_update_time
    e1 = user_event("one", {"a": 10, "c": [1, 2]})
    stored = await service.append_event(s, e1)
    assert stored == e1
    assert s.events == [stored]
    assert s.events[0] is stored
    assert s.state == {"a": 10, "b": 2, "c": [1, 2]}
    assert s.last_update_time > before
    await service.append_event(s, user_event("two", {"b": None}))
    assert s.state == {"a": 10, "b": None, "c": [1, 2]}

    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == {"a": 10, "b": None, "c": [1, 2]}
    assert texts(got) == ["one", "two"]
    assert got.events[0].actions.state_delta == {"a": 10, "c": [1, 2]}
    assert got.last_update_time == s.last_update_time


async def test_state_scopes(service: BaseSessionService) -> None:
    a1 = await service.create_session(app_name=APP, user_id="alice", session_id="a1", state={"user:lang": "en"})
    a2 = await service.create_session(app_name=APP, user_id="alice", session_id="a2")
    b1 = await service.create_session(app_name=APP, user_id="bob", session_id="b1")
    other = await service.create_session(app_name="other", user_id="alice", session_id="o1")
    assert a2.state == {"user:lang": "en"}  # user scope is visible at creation
    assert b1.state == {}

    await service.append_event(
        a1, user_event("x", {"app:model": "m1", "user:name": "Alice", "topic": "cats", "temp:scratch": 1})
    )
    assert a1.state == {"user:lang": "en", "app:model": "m1", "user:name": "Alice", "topic": "cats", "temp:scratch": 1}
    await service.append_event(b1, user_event("y", {"user:name": "Bob", "app:limit": 3}))

    async def state(app: str, user: str, sid: str) -> dict[str, Any]:
        got = await service.get_session(app_name=app, user_id=user, session_id=sid)
        assert got is not None
        return got.state

    assert await state(APP, "alice", "a1") == {
        "user:lang": "en",
        "user:name": "Alice",
        "app:model": "m1",
        "app:limit": 3,
        "topic": "cats",
    }
    assert await state(APP, "alice", "a2") == {
        "user:lang": "en",
        "user:name": "Alice",
        "app:model": "m1",
        "app:limit": 3,
    }
    assert await state(APP, "bob", "b1") == {"user:name": "Bob", "app:model": "m1", "app:limit": 3}
    assert await state("other", "alice", "o1") == {}
    assert other.state == {}
    listed = {s.id: s.state for s in await service.list_sessions(app_name=APP, user_id="alice")}
    assert listed["a2"] == await state(APP, "alice", "a2")
    # a new session sees the app and user scopes at once
    a3 = await service.create_session(app_name=APP, user_id="alice", session_id="a3", state={"app:model": "m2"})
    assert a3.state == {"user:lang": "en", "user:name": "Alice", "app:model": "m2", "app:limit": 3}
    assert (await state(APP, "bob", "b1"))["app:model"] == "m2"


async def test_temp_state_is_not_persisted(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s", state={"temp:init": 1, "k": 0})
    assert s.state == {"k": 0}
    not_json = object()  # temp values are never serialized
    event = user_event("x", {"temp:obj": not_json, "temp:n": 5, "k": 1})
    stored = await service.append_event(s, event)
    assert s.state == {"k": 1, "temp:obj": not_json, "temp:n": 5}
    assert stored.actions.state_delta == {"k": 1}
    assert event.actions.state_delta == {"temp:obj": not_json, "temp:n": 5, "k": 1}  # caller's event untouched
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.state == {"k": 1}
    assert got.events[0].actions.state_delta == {"k": 1}


async def test_stale_session(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    copy = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert copy is not None
    for i in range(20):  # the same object never trips the check, however fast the appends
        await service.append_event(s, user_event(f"e{i}", {"n": i}))
    with pytest.raises(StaleSessionError, match=r"'s' .* is stale: .* reload it with get_session\(\)"):
        await service.append_event(copy, user_event("late", {"n": -1}))
    assert copy.events == [] and copy.state == {}
    fresh = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert fresh is not None and fresh.state == {"n": 19}
    await service.append_event(fresh, user_event("after reload"))
    assert len(texts(await service.get_session(app_name=APP, user_id="u", session_id="s"))) == 21


async def test_append_to_missing_session(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.delete_session(app_name=APP, user_id="u", session_id="s")
    with pytest.raises(SessionNotFoundError, match="'s' not found"):
        await service.append_event(s, user_event("x"))
    ghost = Session(app_name=APP, user_id="u")
    with pytest.raises(SessionNotFoundError):
        await service.append_event(ghost, user_event("x"))


# --- atomicity and errors --------------------------------------------------------------------


async def test_unserializable_event_stores_nothing(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s", state={"k": 0})
    await service.append_event(s, user_event("ok"))
    snapshot = s.model_copy(deep=True)
    bad = user_event("bad", {"k": 1, "app:x": 1, "obj": object()})
    with pytest.raises(SessionStoreError, match="not JSON-serializable") as info:
        await service.append_event(s, bad)
    assert info.value.__cause__ is not None
    assert s == snapshot
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert texts(got) == ["ok"] and got.state == {"k": 0}
    with pytest.raises(SessionStoreError, match="not JSON-serializable"):
        await service.create_session(app_name=APP, user_id="u", session_id="s2", state={"x": object()})
    assert await service.get_session(app_name=APP, user_id="u", session_id="s2") is None
    # the session is still usable with the same object
    await service.append_event(s, user_event("ok2", {"k": 2}))
    assert s.state == {"k": 2}


async def test_failure_mid_append_is_atomic(
    service: BaseSessionService, store_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s", state={"k": 0})
    await service.append_event(s, user_event("ok", {"app:a": 0}))
    snapshot = s.model_copy(deep=True)

    if store_kind == "sqlite":
        # fails after the event row was inserted, inside the transaction
        def write_state(*args: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        from codeact.sessions import _sql

        monkeypatch.setattr(_sql, "write_state", write_state)  # the flow SQLite shares with PostgreSQL
    else:

        def deepcopy(value: Any) -> Any:
            raise MemoryError("simulated")

        monkeypatch.setattr(memory_module, "deepcopy", deepcopy)

    with pytest.raises((SessionStoreError, MemoryError)) as info:
        await service.append_event(s, user_event("lost", {"k": 1, "app:a": 1, "user:b": 1}))
    if store_kind == "sqlite":
        assert isinstance(info.value, SessionStoreError)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert "disk I/O error" in str(info.value)
    monkeypatch.undo()

    assert s == snapshot
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert texts(got) == ["ok"]
    assert got.state == {"k": 0, "app:a": 0}
    assert got.last_update_time == s.last_update_time
    await service.append_event(s, user_event("next", {"k": 3}))
    assert texts(await service.get_session(app_name=APP, user_id="u", session_id="s")) == ["ok", "next"]


async def test_sqlite_errors_surface_as_session_store_error(tmp_path: Path) -> None:
    directory = SqliteSessionService(tmp_path)  # a directory, not a file
    with pytest.raises(SessionStoreError, match="unable to open") as info:
        await directory.get_session(app_name=APP, user_id="u", session_id="s")
    assert isinstance(info.value.__cause__, sqlite3.Error)
    directory.close()

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with SqliteSessionService(garbage) as service:
        with pytest.raises(SessionStoreError, match="not a database") as info:
            await service.create_session(app_name=APP, user_id="u")
        assert isinstance(info.value.__cause__, sqlite3.DatabaseError)

    newer = tmp_path / "newer.db"
    async with SqliteSessionService(newer) as service:
        await service.create_session(app_name=APP, user_id="u")
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    conn.close()
    async with SqliteSessionService(newer) as service:
        with pytest.raises(SessionStoreError, match="schema version 99"):
            await service.list_sessions(app_name=APP, user_id="u")

    closed = SqliteSessionService(tmp_path / "closed.db")
    await closed.create_session(app_name=APP, user_id="u")
    closed.close()
    closed.close()
    with pytest.raises(SessionStoreError, match="is closed"):
        await closed.list_sessions(app_name=APP, user_id="u")


# --- persistence --------------------------------------------------------------------------------


def rich_event() -> Event:
    return Event(
        author="agent",
        invocation_id="inv-7",
        content=Content(
            role="model",
            parts=[
                Part(text="thinking", thought=True),
                Part(text="Calling the tool. ünïcödé ✓"),
                Part(function_call=FunctionCall(name="search", args={"q": "cats", "n": 3, "opts": [1, None]}, id="k1")),
                Part(function_response=FunctionResponse(name="search", response={"hits": ["a", "b"]}, id="k1")),
                Part(function_response=FunctionResponse(name="approve", response=None)),
            ],
        ),
        actions=EventActions(
            state_delta={"codeact_pending": {"iteration": 2, "snapshot": "AAEC"}, "app:v": 1.5},
            artifact_delta={"report.txt": 2},
            escalate=True,
            requested_tool_confirmations={
                "k2": ToolConfirmation(tool_name="pay", function_call_id="k2", args={"amount": 5}, hint="ok?")
            },
        ),
        branch="root.agent",
        long_running_tool_ids=["k1"],
        error_code=None,
        interrupted=True,
        turn_complete=True,
    )


def test_event_json_round_trip() -> None:
    event = rich_event()
    again = Event.model_validate_json(event.model_dump_json())
    assert again == event
    assert again.content is not None
    call = again.content.parts[2].function_call
    assert call is not None and call.args == {"q": "cats", "n": 3, "opts": [1, None]}
    response = again.content.parts[3].function_response
    assert response is not None and response.response == {"hits": ["a", "b"]} and response.id == "k1"
    assert again.text == "Calling the tool. ünïcödé ✓"


async def test_event_round_trip_through_service(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")
    event = rich_event()
    await service.append_event(s, event)
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert got.events == [event]
    assert got.state == {"codeact_pending": {"iteration": 2, "snapshot": "AAEC"}, "app:v": 1.5}


async def test_sqlite_reopen_finds_everything(tmp_path: Path) -> None:
    path = tmp_path / "nested.db"
    async with SqliteSessionService(path) as service:
        s = await service.create_session(app_name=APP, user_id="u", session_id="s", state={"user:x": 1, "a": 0})
        events = [user_event(f"e{i}", {"a": i, "app:last": i}) for i in range(30)]
        events.append(rich_event())
        for e in events:
            await service.append_event(s, e)
        await service.create_session(app_name=APP, user_id="u", session_id="t")
        last_update = s.last_update_time
    assert path.is_file()

    async with SqliteSessionService(str(path)) as reopened:
        got = await reopened.get_session(app_name=APP, user_id="u", session_id="s")
        assert got is not None
        assert got.events == events
        assert got.state == {
            "user:x": 1,
            "a": 29,
            "app:last": 29,
            "codeact_pending": {"iteration": 2, "snapshot": "AAEC"},
            "app:v": 1.5,
        }
        assert got.last_update_time == last_update
        assert [x.id for x in await reopened.list_sessions(app_name=APP, user_id="u")] == ["s", "t"]
        await reopened.append_event(got, user_event("after reopen"))  # the loaded object is current
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (sqlite_module.SCHEMA_VERSION,)
    conn.close()


async def test_sqlite_one_journal_record_is_one_fenced_statement(tmp_path: Path) -> None:
    """One journal record (the usual write of an inline call) commits with one fenced INSERT
    and no BEGIN/SELECT/COMMIT round; a stale version writes nothing; while another
    connection holds the write lock the record waits for it and then lands."""
    path = tmp_path / "j.db"
    async with SqliteSessionService(path) as service:
        s = await service.create_session(app_name=APP, user_id="u", session_id="s")
        key = {"app_name": APP, "user_id": "u", "session_id": "s"}
        await service.append_journal(s, "t", [JournalRecord("os", 0, "[0]")], expected_version=0)  # empty slot: 0
        version = await service.save_turn(**key, data={"status": "running"}, snapshot=None, expected_version=0)
        statements: list[str] = []
        await service.append_journal(s, "t", [JournalRecord("intent", 0, '["a", "d"]')], expected_version=version)
        conn = service._inline_conn
        assert conn is not None
        conn.set_trace_callback(statements.append)
        await service.append_journal(s, "t", [JournalRecord("outcome", 0, "1")], expected_version=version)
        await service.append_journal(s, "t", [JournalRecord("intent", 1, '["a", "e"]')], expected_version=version)
        assert [x.split(" (")[0] for x in statements] == [
            "INSERT OR IGNORE INTO journal",
            "INSERT OR REPLACE INTO journal",
        ]
        with pytest.raises(TurnConflictError):
            await service.append_journal(s, "t", [JournalRecord("outcome", 1, "2")], expected_version=version + 1)

        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the database

        async def release() -> None:
            await anyio.sleep(0.05)
            other.execute("COMMIT")

        async with anyio.create_task_group() as tg:
            tg.start_soon(release)
            await service.append_journal(s, "t", [JournalRecord("outcome", 1, "3")], expected_version=version)
        other.close()
        assert await service.read_journal(**key, turn="t") == [
            JournalRecord("os", 0, "[0]"),
            JournalRecord("intent", 0, '["a", "d"]'),
            JournalRecord("outcome", 0, "1"),
            JournalRecord("intent", 1, '["a", "e"]'),
            JournalRecord("outcome", 1, "3"),
        ]


# --- concurrency ----------------------------------------------------------------------------------


async def test_concurrent_appends_same_session(service: BaseSessionService) -> None:
    s = await service.create_session(app_name=APP, user_id="u", session_id="s")

    async def worker(i: int) -> None:
        for j in range(10):
            await service.append_event(s, user_event(f"{i}:{j}", {f"k{i}": j, "app:last": i, "user:n": j}))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(worker, i)

    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert len(got.events) == 80
    assert got.events == s.events
    for i in range(8):
        assert [t for t in texts(got) if t.startswith(f"{i}:")] == [f"{i}:{j}" for j in range(10)]
        assert got.state[f"k{i}"] == 9
    assert got.state == s.state
    assert got.last_update_time == s.last_update_time


async def test_concurrent_appends_many_services(make_service: ServiceFactory) -> None:
    """8 tasks, each with its own service instance (its own sqlite connection) on one file."""
    services = [make_service() for _ in range(8)]
    sessions = [
        await svc.create_session(app_name=APP, user_id="u", session_id=f"s{i}") for i, svc in enumerate(services)
    ]

    async def worker(i: int) -> None:
        for j in range(15):
            await services[i].append_event(sessions[i], user_event(f"{j}", {"n": j, f"app:w{i}": j}))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(worker, i)

    check = make_service()
    for i in range(8):
        got = await check.get_session(app_name=APP, user_id="u", session_id=f"s{i}")
        assert texts(got) == [str(j) for j in range(15)]
        assert got is not None and got.state["n"] == 14
        assert {k: v for k, v in got.state.items() if k.startswith("app:")} == {f"app:w{w}": 14 for w in range(8)}


N = 100  # appends per child process and session

CHILD = """
import sys, time
from pathlib import Path
import anyio
from codeact.sessions import Content, Event, EventActions, SqliteSessionService, StaleSessionError

path, me, go, N = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
ready = go.with_name(f"ready-{me}")

async def main():
    async with SqliteSessionService(path) as service:
        own = await service.get_session(app_name="app", user_id="u", session_id=me)
        shared = await service.get_session(app_name="app", user_id="u", session_id="shared")
        ready.touch()  # start both writers together
        deadline = time.monotonic() + 60
        while not go.exists():
            assert time.monotonic() < deadline
            await anyio.sleep(0.001)
        for j in range(N):
            event = Event(author=me, content=Content.from_text(f"{me}:{j}"),
                          actions=EventActions(state_delta={"n": j, f"app:{me}": j}))
            await service.append_event(own, event)
            while True:  # the shared session is appended to by both processes: reload on stale
                try:
                    await service.append_event(shared, event.model_copy(update={"id": f"{me}-{j}"}))
                    break
                except StaleSessionError:
                    shared = await service.get_session(app_name="app", user_id="u", session_id="shared")

anyio.run(main)
"""


async def test_concurrent_appends_two_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    go = tmp_path / "go"
    async with SqliteSessionService(path) as service:
        for sid in ("p0", "p1", "shared"):
            await service.create_session(app_name=APP, user_id="u", session_id=sid)

    errors = [(tmp_path / f"p{i}.err").open("w") for i in range(2)]
    try:
        procs = [
            await anyio.open_process(
                [sys.executable, "-c", textwrap.dedent(CHILD), str(path), f"p{i}", str(go), str(N)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors[i],
            )
            for i in range(2)
        ]
        with anyio.fail_after(120):
            while not all((tmp_path / f"ready-p{i}").exists() for i in range(2)):
                await anyio.sleep(0.01)
            go.touch()
            codes = [await p.wait() for p in procs]
        for p in procs:
            await p.aclose()
    finally:
        for f in errors:
            f.close()
    assert codes == [0, 0], [(tmp_path / f"p{i}.err").read_text() for i in range(2)]

    async with SqliteSessionService(path) as service:
        for i in range(2):
            own = await service.get_session(app_name=APP, user_id="u", session_id=f"p{i}")
            assert texts(own) == [f"p{i}:{j}" for j in range(N)]
        shared = await service.get_session(app_name=APP, user_id="u", session_id="shared")
        assert shared is not None and len(shared.events) == 2 * N
        for i in range(2):
            assert [t for t in texts(shared) if t.startswith(f"p{i}:")] == [f"p{i}:{j}" for j in range(N)]
        assert {k: v for k, v in shared.state.items() if k.startswith("app:")} == {"app:p0": N - 1, "app:p1": N - 1}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
