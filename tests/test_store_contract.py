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
