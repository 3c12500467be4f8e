"""Conversation seeding: ``include_contents`` and the history the runner replays to the
model."""

from __future__ import annotations

import pytest

from agent_helpers import final, run, run_direct, scripted_agent, texts
from codeact import Content, Event

pytestmark = pytest.mark.anyio


async def test_default_include_contents_seeds_conversation_history() -> None:
    history = [
        Event(author="user", content=Content.from_text("q1")),
        Event(author="coder", content=Content.from_text("a1", "model")),
    ]
    agent, _, model = scripted_agent([[final("a2")]])
    await run_direct(agent, message="q2", history=history)
    contents = model.requests[0].contents
    assert [(c.role, c.text) for c in contents] == [("user", "q1"), ("model", "a1"), ("user", "q2")]


async def test_include_contents_none_excludes_history() -> None:
    history = [
        Event(author="user", content=Content.from_text("q1")),
        Event(author="coder", content=Content.from_text("a1", "model")),
    ]
    agent, _, model = scripted_agent([[final("a2")]], include_contents="none")
    await run_direct(agent, message="q2", history=history)
    assert texts(model.requests[0].contents) == ["q2"]


async def test_history_through_the_runner_holds_each_message_once() -> None:
    agent, _, model = scripted_agent([[final("a1")], [final("a2")]])
    _, _, service = await run(agent, message="q1")
    await run(agent, service=service, message="q2")
    assert [(c.role, c.text) for c in model.requests[1].contents] == [("user", "q1"), ("model", "a1"), ("user", "q2")]
