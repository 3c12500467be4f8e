"""AgentTool: an agent called from a script like a tool; its state changes are
forwarded to the caller's session."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.agent import AgentTool
from codeact.tools import ToolContext
from parity_helpers import APP, ask, py

pytestmark = pytest.mark.anyio


def lookup(city: str, tool_context: ToolContext) -> dict:
    """Looks up the weather of a city."""
    tool_context.state["user:last_city"] = city
    return {"city": city, "temp": 21}


async def test_agent_tool_returns_the_answer_and_forwards_state(service) -> None:
    helper_model = ScriptedModel(
        [py('w = call_tool("lookup", {"city": "Oslo"})\n{"type": "final_result", "value": w}')]
    )
    helper = CodeActAgent(
        name="weather",
        description="Weather expert",
        model=helper_model,
        runtime=MontyRuntime(),
        tools=[lookup],
        output_key="forecast",
    )
    main_model = ScriptedModel(
        [py('r = call_tool("weather", {"request": "Oslo?"})\n{"type": "final_result", "value": r["temp"]}')]
    )
    main = CodeActAgent(name="main", model=main_model, runtime=MontyRuntime(), tools=[AgentTool(helper)])
    runner = Runner(app_name=APP, agent=main, session_service=service)
    events = await ask(runner, "weather in Oslo", state={"tone": "dry"})
    assert events[-1].text == "21"
    assert "tone" not in helper_model.requests[0].contents[-1].text
    assert helper_model.requests[0].contents[-1].text == "Oslo?"
    s = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert s.state["forecast"] == {"city": "Oslo", "temp": 21}
    assert s.state["user:last_city"] == "Oslo"
    assert "codeact_pending" not in s.state or s.state["codeact_pending"] is None
    assert 'call_tool("weather", {"request": <str>})' in main_model.requests[0].system_instruction


async def test_agent_tool_failure_is_raised_into_the_script(service) -> None:
    failing = CodeActAgent(
        name="broken",
        model=ScriptedModel([py('{"type": "observation", "value": 1}')]),
        runtime=MontyRuntime(),
        max_iterations=1,
    )
    main_model = ScriptedModel(
        [
            py(
                """
                try:
                    call_tool("broken", {"request": "x"})
                    r = "no error"
                except RuntimeError as e:
                    r = str(e)
                {"type": "final_result", "value": r}
                """
            )
        ]
    )
    main = CodeActAgent(name="main", model=main_model, runtime=MontyRuntime(), tools=[AgentTool(failing)])
    events = await ask(Runner(app_name=APP, agent=main, session_service=service))
    assert "agent 'broken' failed: max iterations (1) exceeded" in events[-1].text


@pytest.mark.parametrize("answer", ["123", "[1, 2]", '{"$t": [1, 2]}', "null"])
async def test_a_str_answer_of_an_agent_tool_stays_a_str(answer: str) -> None:
    """An agent tool whose output_schema is str hands its answer over as the string it is,
    even when the text reads as JSON or as a tagged value."""
    final = py(f'{{"type": "final_result", "value": {answer!r}}}')
    sub = CodeActAgent(name="sub", model=ScriptedModel([final]), runtime=MontyRuntime(), output_schema=str)
    script = py('r = call_tool("sub", {"request": "x"})\n{"type": "final_result", "value": [type(r).__name__, r]}')
    root = CodeActAgent(
        name="root", model=ScriptedModel([script]), runtime=MontyRuntime(), tools=[AgentTool(sub)], output_key="out"
    )
    runner = Runner(app_name=APP, agent=root, auto_create_session=True)
    [e async for e in runner.run_async(user_id="u", session_id="s", new_message="go")]
    session = await runner.session_service.get_session(app_name=APP, user_id="u", session_id="s")
    assert session.state["out"] == ["str", answer]
