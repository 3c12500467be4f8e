"""``persist_namespace=True``: what one turn's script defines, the next turn's sees, within a
run and across a suspension stored in SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codeact import (
    CodeActAgent,
    CPythonRuntime,
    FunctionTool,
    InMemorySessionService,
    MontyRuntime,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)

pytestmark = pytest.mark.anyio


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


TURN_1 = fence(
    "import json\n"
    "def area(w, h):\n"
    "    return w * h\n"
    "rooms = [[3, 4], [2, 5]]\n"
    "seen = {1, 2}  # a set: not plain data, not carried\n"
    '{"type": "observation", "value": len(rooms)}'
)
TURN_2 = fence(
    'rooms.append([1, 1])\n{"type": "final_result", "value": {"total": sum(area(w, h) for w, h in rooms), '
    '"json": json.dumps(rooms)}}'
)


async def run_agent(agent: CodeActAgent, service: Any, message: str | None, config: RunConfig | None = None) -> list:
    runner = Runner(app_name="app", agent=agent, session_service=service, auto_create_session=True)
    return [e async for e in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=config)]


@pytest.mark.parametrize("runtime", [MontyRuntime, CPythonRuntime], ids=["monty", "cpython"])
async def test_definitions_and_variables_reach_the_next_turn(runtime: Any) -> None:
    agent = CodeActAgent(name="a", model=ScriptedModel([TURN_1, TURN_2]), runtime=runtime(), persist_namespace=True)
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    final = events[-1]
    assert final.error_code is None, final
    assert '"total": 23' in final.text
    assert "[[3, 4], [2, 5], [1, 1]]" in final.text


async def test_without_the_flag_the_next_turn_starts_empty() -> None:
    model = ScriptedModel([TURN_1, TURN_2, fence('{"type": "final_result", "value": "gave up"}')])
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime())
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    assert events[-1].text == "gave up"
    assert "NameError" in model.requests[2].contents[-1].text or any(
        "NameError" in c.text for c in model.requests[2].contents
    )


async def test_a_failing_script_keeps_the_namespace_and_lines_stay_the_models() -> None:
    failing = fence("x = 1\nboom = rooms[10]\n" + '{"type": "observation", "value": 0}')
    failing_last = fence('{"type": "observation", "value": rooms[10]}')
    model = ScriptedModel([TURN_1, failing, failing_last, TURN_2])
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime(), persist_namespace=True)
    events = await run_agent(agent, InMemorySessionService(), "rooms?")
    assert '"total": 23' in events[-1].text
    feedback = "\n".join(c.text for c in model.requests[2].contents)
    assert "IndexError" in feedback
    assert 'File "agent.py", line 2, in <module>' in feedback  # the model's own line, not the prelude's


async def test_the_namespace_survives_a_suspension_in_sqlite(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []

    def send(to: str, body: str) -> str:
        """Sends a message.

        Args:
            to: recipient.
            body: text.
        """
        sent.append({"to": to, "body": body})
        return f"sent #{len(sent)}"

    turn_2 = fence(
        'receipt = call_tool("send", {"to": "ops", "body": json.dumps(rooms)})\n'
        '{"type": "observation", "value": receipt}'
    )
    turn_3 = fence(
        '{"type": "final_result", "value": {"receipt": receipt, "total": sum(area(w, h) for w, h in rooms)}}'
    )

    def build(replies: list[str]) -> CodeActAgent:
        return CodeActAgent(
            name="a",
            model=ScriptedModel(replies),
            runtime=MontyRuntime(),
            tools=[FunctionTool(send, requires_confirmation=True)],
            persist_namespace=True,
        )

    db = tmp_path / "sessions.db"
    with SqliteSessionService(db) as service:
        events = await run_agent(build([TURN_1, turn_2]), service, "send the rooms")
        (key,) = events[-1].actions.requested_tool_confirmations
    assert sent == []
    with SqliteSessionService(db) as service:  # a fresh store and a fresh agent: nothing in memory
        events = await run_agent(build([turn_3]), service, None, RunConfig(tool_confirmation_decisions={key: True}))
    assert sent == [{"to": "ops", "body": "[[3, 4], [2, 5]]"}]
    assert events[-1].error_code is None, events[-1]
    assert '"receipt": "sent #1"' in events[-1].text and '"total": 22' in events[-1].text
