"""The per-call path without a ``ToolContext`` (``Run.execute``): taken only where nothing
could read the context, and left as soon as a tool callback appears. On the real interpreter."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.tools import FunctionTool, ToolContext
from step_workers import run_fresh

pytestmark = pytest.mark.anyio


def echo(v: int) -> int:
    """Returns v.

    Args:
        v: a number.
    """
    return v


def _reply(script: str) -> str:
    return f"```python\n{script}\n```"


async def _run(agent: CodeActAgent) -> tuple[list[Any], Any]:
    runner = Runner(app_name="app", agent=agent, auto_create_session=True)
    events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    session = await runner.session_service.get_session(app_name="app", user_id="u", session_id="s")
    return events, session


async def test_a_subclass_with_its_own_run_gets_its_context() -> None:
    class Remembering(FunctionTool):
        async def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
            value = await super().run(args, tool_context)
            tool_context.state["last"] = value
            return value

    script = 'v = call_tool("echo", {"v": 7})\n{"type": "final_result", "value": v}'
    agent = CodeActAgent(
        name="a", model=ScriptedModel([_reply(script)]), runtime=MontyRuntime(), tools=[Remembering(echo)]
    )
    events, session = await _run(agent)
    assert events[-1].text == "7"
    assert session.state["last"] == 7


async def test_a_tool_callback_set_during_the_run_applies_from_the_next_call() -> None:
    agent: CodeActAgent

    def arm(v: int) -> int:
        """Sets a before_tool callback on the agent.

        Args:
            v: returned.
        """
        agent.before_tool = lambda tool, args, ctx: "replaced" if tool.name == "echo" else None
        return v

    script = (
        'a = call_tool("echo", {"v": 1})\nb = call_tool("arm", {"v": 2})\nc = call_tool("echo", {"v": 3})\n'
        '{"type": "final_result", "value": [a, b, c]}'
    )
    agent = CodeActAgent(name="a", model=ScriptedModel([_reply(script)]), runtime=MontyRuntime(), tools=[echo, arm])
    events, _ = await _run(agent)
    assert json.loads(events[-1].text) == [1, 2, "replaced"]


_WAKE_UNDER_PROCESS_ISOLATION = """
MontyRuntime(isolation="process").wake_workers()
time.sleep(0.2)
print(step_workers())
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads thread names from /proc (Linux)")
def test_waking_workers_under_process_isolation_starts_no_native_pool() -> None:
    assert run_fresh(_WAKE_UNDER_PROCESS_ISOLATION) == ["0"]
