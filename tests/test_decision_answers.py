"""Typed answers (issue 49, item 3), on SQLite and PostgreSQL: a long-running tool's
``result_type`` and a confirmation's ``payload_type`` are the shapes its answers must have;
``complete(value)`` and an approval's payload are validated before the script resumes (a wrong
shape is a ``DecisionValueError`` naming the field, nothing runs, the call stays pending); the
approved tool reads the payload as ``ToolContext.tool_confirmation.payload``; the pending call
shows both JSON schemas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from _postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from codeact import (
    CodeActAgent,
    Content,
    DecisionValueError,
    FunctionResponse,
    FunctionTool,
    LongRunningFunctionTool,
    MontyRuntime,
    Part,
    Runner,
    ScriptedModel,
    SqliteSessionService,
    ToolContext,
)
from codeact.sessions import BaseSessionService

pytestmark = pytest.mark.anyio

APP, USER, SESSION = "app", "u", "s"
RENDER = '```python\nr = call_tool("render", {"scene": "a"})\n{"type": "final_result", "value": r["url"]}\n```'
SHIP = '```python\nr = call_tool("ship", {"order": 7})\n{"type": "final_result", "value": r}\n```'


class Frame(BaseModel):
    url: str
    width: int


class Priority(BaseModel):
    level: int
    note: str = ""


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSessionService]:
    if request.param == "sqlite":
        service: BaseSessionService = SqliteSessionService(tmp_path / "s.db")
    else:
        from codeact.sessions import PostgresSessionService

        service = PostgresSessionService(request.getfixturevalue("postgres_url"), max_size=2)
    yield service
    service.close()


def runner_on(service: BaseSessionService, replies: list[str], seen: list[Any]) -> Runner:
    def render(scene: str) -> dict:
        """Starts a render."""
        seen.append(f"render {scene}")
        return {"status": "started"}

    def ship(order: int, tool_context: ToolContext) -> str:
        """Ships an order."""
        answer = tool_context.tool_confirmation
        seen.append(answer.payload if answer is not None else None)
        return f"shipped {order}"

    tools = [
        LongRunningFunctionTool(render, result_type=Frame),
        FunctionTool(ship, requires_confirmation=True, payload_type=Priority),
    ]
    agent = CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=tools)
    return Runner(app_name=APP, agent=agent, session_service=service, auto_create_session=True)


async def collect(events: Any) -> list[Any]:
    return [e async for e in events]


async def test_a_wrong_shaped_completion_is_refused_before_the_script_resumes(store: BaseSessionService) -> None:
    seen: list[Any] = []
    runner = runner_on(store, [RENDER], seen)
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    (call,) = await runner.pending(user_id=USER, session_id=SESSION)
    assert call.result_schema is not None and set(call.result_schema["properties"]) == {"url", "width"}
    with pytest.raises(DecisionValueError, match="width") as refused:
        await collect(
            runner.complete(user_id=USER, session_id=SESSION, call_key=call.call_key, value={"url": "u", "width": "w"})
        )
    assert refused.value.what == "result" and [f for f, _ in refused.value.errors] == ["width"]
    # the same through a function response (the ADK / raw run_async door)
    response = FunctionResponse(name="render", id=call.call_key, response={"url": "u"})
    with pytest.raises(DecisionValueError, match="width"):
        await collect(
            runner.run_async(
                user_id=USER,
                session_id=SESSION,
                new_message=Content(role="user", parts=[Part(function_response=response)]),
            )
        )
    assert await runner.pending(user_id=USER, session_id=SESSION) == [call]
    info = await runner.turn_info(user_id=USER, session_id=SESSION)
    assert info is not None and info.status == "suspended"  # nothing claimed, nothing stored
    events = await collect(
        runner.complete(user_id=USER, session_id=SESSION, call_key=call.call_key, value={"url": "u1", "width": 640})
    )
    assert events[-1].text == "u1" and seen == ["render a"]


async def test_an_approval_payload_is_typed_and_read_by_the_tool(store: BaseSessionService) -> None:
    seen: list[Any] = []
    runner = runner_on(store, [SHIP], seen)
    await collect(runner.run_async(user_id=USER, session_id=SESSION, new_message="go"))
    (call,) = await runner.pending(user_id=USER, session_id=SESSION)
    assert call.payload_schema is not None and "level" in call.payload_schema["properties"]
    with pytest.raises(DecisionValueError, match="level") as refused:
        await collect(runner.approve(user_id=USER, session_id=SESSION, payload={"level": "high"}))
    assert refused.value.what == "payload" and seen == []
    assert await runner.pending(user_id=USER, session_id=SESSION) == [call]
    events = await collect(runner.approve(user_id=USER, session_id=SESSION, payload={"level": 2}, actor="ann"))
    assert events[-1].text == "shipped 7" and seen == [{"level": 2}]
    (decided,) = await runner.decisions()
    assert (decided.act, decided.payload, decided.actor) == ("approve", {"level": 2}, "ann")
