"""Retrying a run after the model failed (issue 12 "Model endpoint"): the user's message is
stored once, and the model sees it once."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_helpers import APP, SESSION, USER, final_reply
from codeact import CodeActAgent, InMemorySessionService, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact.models import ModelError, ModelTimeoutError

pytestmark = pytest.mark.anyio


def _services(tmp_path: Path) -> list:  # type: ignore[type-arg]
    return [InMemorySessionService(), SqliteSessionService(tmp_path / "sessions.db")]


async def _run(runner: Runner, message: str) -> list:  # type: ignore[type-arg]
    return [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message=message)]


async def _user_texts(runner: Runner) -> list[str]:
    session = await runner.session_service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return [e.content.text for e in session.events if e.author == "user" and e.content is not None]


@pytest.mark.parametrize("failures", [[ModelError("down")], [ModelTimeoutError("slow"), ModelError("502")]])
@pytest.mark.parametrize("store", [0, 1], ids=["memory", "sqlite"])
async def test_retrying_after_a_model_error_stores_the_message_once(tmp_path: Path, failures, store: int) -> None:  # type: ignore[no-untyped-def]
    model = ScriptedModel([*failures, final_reply("ok")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    runner = Runner(app_name=APP, agent=agent, session_service=_services(tmp_path)[store], auto_create_session=True)
    for _failure in failures:
        with pytest.raises(ModelError):
            await _run(runner, "What is 6 * 7?")
    events = await _run(runner, "What is 6 * 7?")
    assert events[-1].content is not None and events[-1].content.text == "ok"
    assert await _user_texts(runner) == ["What is 6 * 7?"]
    # the model saw the question once on every attempt
    for request in model.requests:
        assert [c.text for c in request.contents if c.role == "user"] == ["What is 6 * 7?"]


async def test_a_different_message_after_a_model_error_is_stored(tmp_path: Path) -> None:
    model = ScriptedModel([ModelError("down"), final_reply("ok")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    runner = Runner(app_name=APP, agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    with pytest.raises(ModelError):
        await _run(runner, "first")
    await _run(runner, "second")
    assert await _user_texts(runner) == ["first", "second"]


async def test_the_same_message_after_an_answered_turn_is_a_new_message() -> None:
    model = ScriptedModel([final_reply("a"), final_reply("b")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime())
    runner = Runner(app_name=APP, agent=agent, session_service=InMemorySessionService(), auto_create_session=True)
    await _run(runner, "again")
    await _run(runner, "again")
    assert await _user_texts(runner) == ["again", "again"]
