"""State scopes through the agent: app:, user:, temp: and session keys written by a tool
land in the right sessions only, with both session services."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.tools import ToolContext
from parity_helpers import APP, ask, final, py, stored_state

pytestmark = pytest.mark.anyio


def remember(tool_context: ToolContext) -> dict:
    """Writes one key per scope."""
    tool_context.state["app:motd"] = "hello all"
    tool_context.state["user:tier"] = "gold"
    tool_context.state["temp:scratch"] = 42
    tool_context.state["note"] = "mine"
    return {}


def peek(tool_context: ToolContext) -> dict:
    """Reads the four keys."""
    return {k: tool_context.state.get(k) for k in ("app:motd", "user:tier", "temp:scratch", "note")}


async def test_scoped_state_is_visible_in_the_right_sessions_only(service) -> None:
    model = ScriptedModel(
        [
            py('call_tool("remember")\n{"type": "final_result", "value": call_tool("peek")}'),
            py('{"type": "final_result", "value": call_tool("peek")}'),
            py('{"type": "final_result", "value": call_tool("peek")}'),
            py('{"type": "final_result", "value": call_tool("peek")}'),
        ]
    )
    agent = CodeActAgent(
        name="coder",
        model=model,
        runtime=MontyRuntime(),
        tools=[remember, peek],
        instruction="tier={user:tier?} motd={app:motd?} scratch={temp:scratch?}",
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)

    events = await ask(runner, user="alice", session="s1")
    # within the invocation, temp: is visible to a later call of the same script
    assert '"temp:scratch": 42' in events[-1].text
    assert (await stored_state(runner, "alice", "s1")).get("temp:scratch") is None

    same_session = await ask(runner, user="alice", session="s1")
    assert '"note": "mine"' in same_session[-1].text and '"temp:scratch": null' in same_session[-1].text
    assert "tier=gold motd=hello all scratch=" in model.requests[1].system_instruction

    other_session = await ask(runner, user="alice", session="s2")
    text = other_session[-1].text
    assert '"user:tier": "gold"' in text and '"app:motd": "hello all"' in text and '"note": null' in text

    other_user = await ask(runner, user="bob", session="s3")
    text = other_user[-1].text
    assert '"user:tier": null' in text and '"app:motd": "hello all"' in text and '"note": null' in text

    other_app = Runner(app_name="other-app", agent=agent, session_service=service)
    assert (await stored_state(runner, "bob", "s3")).get("app:motd") == "hello all"
    await service.create_session(app_name="other-app", user_id="alice", session_id="x")
    assert "app:motd" not in await stored_state(other_app, "alice", "x")
    assert "user:tier" not in await stored_state(other_app, "alice", "x")


async def test_missing_required_scoped_key_is_a_clear_error(service) -> None:
    from codeact import MissingStateError

    agent = CodeActAgent(
        name="coder", model=ScriptedModel([final("x")]), runtime=MontyRuntime(), instruction="{user:x}"
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    with pytest.raises(MissingStateError, match="user:x"):
        await ask(runner)
