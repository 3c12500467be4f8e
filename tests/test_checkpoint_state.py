"""The agent builds checkpoint state by hand (transcript JSON cached per turn); it must be
exactly what the public model produces, and read back by it."""

from __future__ import annotations

import anyio

from codeact import Content, InMemorySessionService, MontyRuntime, Runner, ScriptedModel
from codeact.agent import CodeActAgent, CodeActCheckpoint


def lookup(key: str) -> str:
    """Looks a key up.

    Args:
        key: the key.
    """
    return key.upper()


def test_hand_built_checkpoint_state_equals_the_model_dump() -> None:
    reply = (
        '```python\nprint(\'before\')\na = call_tool("lookup", {"key": "x"})\n'
        'b = call_tool("lookup", {"key": a + "é"})\n{"type": "final_result", "value": b}\n```'
    )
    agent = CodeActAgent(name="a", model=ScriptedModel([reply]), runtime=MontyRuntime(), tools=[lookup])
    runner = Runner(app_name="app", agent=agent, session_service=InMemorySessionService(), auto_create_session=True)

    async def run() -> list:
        return [e async for e in runner.run_async(user_id="u", session_id="s", new_message=Content.from_text("go"))]

    events = anyio.run(run)
    states = [e.actions.state_delta["codeact_pending"] for e in events if e.actions.state_delta.get("codeact_pending")]
    assert len(states) == 4
    (record,) = [e.actions.state_delta["codeact_turn"] for e in events if e.actions.state_delta.get("codeact_turn")]
    skip = {"created_at", "system_prompt", "transcript"}
    for state in states:
        model = CodeActCheckpoint.from_state(state, record)
        assert "You act by writing code" in model.system_prompt
        assert model.transcript[0].text == "go"
        rebuilt = model.to_state()
        assert {k: v for k, v in rebuilt.items() if k not in skip} == {k: v for k, v in state.items() if k not in skip}
        assert model.turn_stdout == "before\n"
    assert events[-1].text == "XÉ"
