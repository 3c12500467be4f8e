"""Toolsets: resolved per invocation (tools depend on state), prefix, filtering, and
conflicts reported clearly."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.toolsets import FunctionToolset, Toolset
from parity_helpers import APP, ask, final, py

pytestmark = pytest.mark.anyio


def ping() -> str:
    """Ping."""
    return "pong"


def secret_op() -> str:
    """Admin only."""
    return "done"


class RoleToolset(Toolset):
    """Admins get secret_op; everybody gets ping."""

    async def get_tools(self, ctx):
        return [ping, secret_op] if ctx.state.get("role") == "admin" else [ping]


async def test_toolset_tools_depend_on_state_and_get_prefix(service) -> None:
    model = ScriptedModel([final(1), final(2)])
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), toolsets=[RoleToolset(prefix="ops")])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await ask(runner, session="admin", state={"role": "admin"})
    await ask(runner, session="guest", state={"role": "guest"})
    admin_prompt, guest_prompt = (r.system_instruction for r in model.requests)
    assert 'call_tool("ops_ping")' in admin_prompt and 'call_tool("ops_secret_op")' in admin_prompt
    assert 'call_tool("ops_ping")' in guest_prompt and "secret_op" not in guest_prompt


async def test_filtered_toolset_tools_run_under_prefixed_names(service) -> None:
    model = ScriptedModel([py('{"type": "final_result", "value": call_tool("x_ping")}')])
    toolset = FunctionToolset([ping, secret_op], prefix="x", tool_filter=["ping"])
    pred = FunctionToolset([secret_op], tool_filter=lambda tool, ctx: False)
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), toolsets=[toolset, pred])
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert events[-1].text == "pong"
    assert "secret_op" not in model.requests[0].system_instruction


async def test_duplicate_tool_names_end_the_run_clearly(service) -> None:
    agent = CodeActAgent(
        name="c",
        model=ScriptedModel([final(1)]),
        runtime=MontyRuntime(),
        tools=[ping],
        toolsets=[FunctionToolset([ping], name="extra")],
    )
    events = await ask(Runner(app_name=APP, agent=agent, session_service=service))
    assert events[-1].error_code == "codeact.toolset"
    assert events[-1].error_message == "duplicate tool name 'ping': conflict between static tools and toolset 'extra'"
