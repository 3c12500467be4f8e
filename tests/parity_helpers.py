"""Shared helpers for the parity tests (tests/test_parity_*.py): ScriptedModel replies with
fenced scripts and one-call invocations. The ``service`` fixture (real session services, in
memory and a SQLite file) comes from conftest.py."""

from __future__ import annotations

import textwrap
from typing import Any

from codeact import Event, RunConfig, Runner

APP = "app"


def py(code: str) -> str:
    """A model reply holding one fenced Python script."""
    return f"Sure.\n```python\n{textwrap.dedent(code).strip()}\n```"


def final(value: Any) -> str:
    return py(f'{{"type": "final_result", "value": {value!r}}}')


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
