"""The store suite (``codeact.sessions.testing.StoreContract``) on the three bundled stores,
each at both durability levels where it matters: memory, SQLite files (a new service per
handle, like separate processes) and PostgreSQL (a real throwaway server, a fresh database
per test, a new pool per handle)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from codeact.sessions import BaseSessionService, InMemorySessionService, SqliteSessionService
from codeact.sessions.testing import StoreContract, StoreFactory


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def make_store(self) -> StoreFactory:
        store = InMemorySessionService()
        return lambda: store


class TestSqliteStore(StoreContract):
    @pytest.fixture(params=["process", "power"])
    def make_store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
        opened: list[BaseSessionService] = []

        def make() -> BaseSessionService:
            store = SqliteSessionService(tmp_path / "sessions.db", durability=request.param)
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()


class TestPostgresStore(StoreContract):
    @pytest.fixture(params=["process", "power"])
    def make_store(self, request: pytest.FixtureRequest, postgres_url: str) -> Iterator[StoreFactory]:  # noqa: F811
        from codeact.sessions import PostgresSessionService

        opened: list[BaseSessionService] = []

        def make() -> BaseSessionService:
            store = PostgresSessionService(postgres_url, durability=request.param, max_size=2)
            opened.append(store)
            return store

        yield make
        for store in opened:
            store.close()


@pytest.mark.anyio
async def test_list_pending_serves_its_own_app_only() -> None:
    from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel

    runner = Runner(app_name="app", agent=CodeActAgent(name="a", model=ScriptedModel([]), runtime=MontyRuntime()))
    assert await runner.list_pending() == {} == await runner.list_pending("app")
    with pytest.raises(ValueError, match="serves app 'app', not 'other'"):
        await runner.list_pending("other")


def test_durability_is_checked_by_every_store(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        InMemorySessionService(durability="disk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="durability"):
        SqliteSessionService(tmp_path / "x.db", durability="disk")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="means synchronous='FULL'"):
        SqliteSessionService(tmp_path / "x.db", durability="power", synchronous="NORMAL")
    assert SqliteSessionService(tmp_path / "y.db", synchronous="FULL").durability == "power"
    assert SqliteSessionService(tmp_path / "z.db").durability == "process"


@pytest.mark.anyio
async def test_the_base_commit_events_appends_each_event_then_the_records(tmp_path: Path) -> None:
    """A third-party store without its own ``commit_events`` gets the base one: each event
    appended (on a copy of the live session, which already holds them), then the records;
    the same stored result in several commits."""
    from codeact.events import Event, EventActions
    from codeact.sessions import JournalRecord
    from codeact.sessions._service import apply_held

    with SqliteSessionService(tmp_path / "s.db") as store:
        key = {"app_name": "app", "user_id": "u", "session_id": "s"}
        s = await store.create_session(**key)
        v1 = await store.save_turn(**key, data={"turn": "t"}, snapshot=None, expected_version=0)
        events = [Event(author="a", actions=EventActions(state_delta={"seen": 1})), Event(author="a")]
        for event in events:
            apply_held(s, event, {})
        await BaseSessionService.commit_events(
            store, s, "t", [JournalRecord("outcome", 0, "1")], events, expected_version=v1
        )
        fresh = await store.get_session(**key)
        assert fresh is not None and [e.id for e in fresh.events] == [e.id for e in s.events]
        assert fresh.state == {"seen": 1} and fresh.last_update_time == s.last_update_time
        assert [r.seq for r in await store.read_journal(**key, turn="t")] == [0]
