"""Shared helpers for the parity tests (tests/test_parity_*.py): real session services
(in memory and a SQLite file), MontyRuntime, and ScriptedModel replies with fenced scripts."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeact import BaseSessionService, Event, InMemorySessionService, RunConfig, Runner, SqliteSessionService

APP = "app"


def py(code: str) -> str:
    """A model reply holding one fenced Python script."""
    return f"Sure.\n```python\n{textwrap.dedent(code).strip()}\n```"


def final(value: Any) -> str:
    return py(f'{{"type": "final_result", "value": {value!r}}}')


@pytest.fixture(params=["memory", "sqlite"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSessionService]:
    """A real session service: in memory, or a SQLite database file."""
    if request.param == "memory":
        yield InMemorySessionService()
        return
    svc = SqliteSessionService(tmp_path / "sessions.db")
    yield svc
    svc.close()


async def ask(
    runner: Runner,
    message: Any = "go",
    *,
    user: str = "u",
    session: str = "s",
    run_config: RunConfig | None = None,
    state: dict[str, Any] | None = None,
) -> list[Event]:
    """One invocation; creates the session (with ``state``) when missing."""
    svc = runner.session_service
    if await svc.get_session(app_name=runner.app_name, user_id=user, session_id=session) is None:
        await svc.create_session(app_name=runner.app_name, user_id=user, session_id=session, state=state)
    return [
        e async for e in runner.run_async(user_id=user, session_id=session, new_message=message, run_config=run_config)
    ]


async def stored_state(runner: Runner, user: str = "u", session: str = "s") -> dict[str, Any]:
    s = await runner.session_service.get_session(app_name=runner.app_name, user_id=user, session_id=session)
    assert s is not None
    return s.state
