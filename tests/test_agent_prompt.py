"""System prompt assembly (reference §4, §19.1 items 12, 20–22, 44): the prompt goes in
``LlmRequest.system_instruction``, never as a user message."""

from __future__ import annotations

import pytest

from agent_helpers import FakeTool, run, run_direct, scripted_agent
from codeact import CodeActAgent, MissingStateError, MontyRuntime, RunConfig, ScriptedModel
from codeact.agent import CODEACT_SYSTEM_PROMPT, inject_state
from codeact.testing import PlannedComplete, ScriptedRuntime

pytestmark = pytest.mark.anyio

CONTRACT = "You act by writing code"


def done() -> list[list[PlannedComplete]]:
    return [[PlannedComplete({"type": "final_result", "value": "ok"})]]


async def system_prompt(**kwargs) -> str:
    run_config = kwargs.pop("_rc", None)
    agent, _, model = scripted_agent(done(), **kwargs)
    await run_direct(agent, run_config=run_config)
    return model.requests[0].system_instruction


async def test_system_prompt_is_the_system_instruction_not_a_user_message() -> None:
    agent, _, model = scripted_agent(done())
    await run(agent, message="hello")
    request = model.requests[0]
    assert request.system_instruction.startswith(CODEACT_SYSTEM_PROMPT)
    assert [(c.role, c.text) for c in request.contents] == [("user", "hello")]


async def test_assemble_orders_sections() -> None:
    agent, _, model = scripted_agent(
        done(),
        global_instruction="GLOBAL IDENTITY",
        instruction="AGENT RULES",
        tools=[FakeTool("echo")],
        sub_agents=[CodeActAgent(name="billing", model=ScriptedModel([]), runtime=ScriptedRuntime([]))],
        output_schema={"type": "string"},
    )
    await run_direct(agent)
    prompt = model.requests[0].system_instruction
    marks = [
        "GLOBAL IDENTITY",
        "AGENT RULES",
        CONTRACT,
        "scripted test runtime",
        "echo",
        "transfer_to_agent",
        "JSON schema",
    ]
    positions = [prompt.index(m) for m in marks]
    assert positions == sorted(positions), positions
    assert "billing" in prompt[prompt.index("transfer_to_agent") :]
    assert prompt.rstrip().endswith('{"type":"string"}')


async def test_agent_instruction_precedes_the_contract() -> None:
    prompt = await system_prompt(instruction="HOUSE RULES")
    assert prompt.index("HOUSE RULES") < prompt.index(CONTRACT)


async def test_instruction_provider() -> None:
    seen = []

    async def provider(ctx):
        seen.append(ctx.agent_name)
        return "DYNAMIC RULES"

    prompt = await system_prompt(instruction=provider)
    assert "DYNAMIC RULES" in prompt
    assert seen == ["coder"]


async def test_global_instruction_precedes_agent_instruction() -> None:
    prompt = await system_prompt(global_instruction="GLOBAL IDENTITY", instruction="AGENT RULES")
    assert prompt.index("GLOBAL IDENTITY") < prompt.index("AGENT RULES") < prompt.index(CONTRACT)


async def test_instruction_injects_session_state() -> None:
    agent, _, model = scripted_agent(done(), instruction="User {name}; tier {tier?}; data {prefs}; {not a key}")
    await run_direct(agent, state={"name": "Ada", "prefs": {"a": 1}})
    assert 'User Ada; tier ; data {"a":1}; {not a key}' in model.requests[0].system_instruction


async def test_missing_state_variable_fails_the_run() -> None:
    agent, _, model = scripted_agent(done(), instruction="Hello {name}")
    with pytest.raises(MissingStateError, match="name"):
        await run_direct(agent, state={})
    assert model.requests == []


def test_inject_state() -> None:
    assert inject_state("{a} {b?} {app:c}", {"a": 1, "app:c": "x"}) == "1  x"
    with pytest.raises(MissingStateError):
        inject_state("{zz}", {})


async def test_transfer_section_revealed_only_when_targets_present() -> None:
    with_targets = await system_prompt(_rc=RunConfig(transfer_targets=["billing"], parent_agent=None))
    assert "transfer_to_agent" in with_targets and "billing" in with_targets
    without = await system_prompt()
    assert "transfer_to_agent" not in without


async def test_runtime_prompt_and_tools_are_included() -> None:
    def fetch_cart(user_id: str) -> dict:
        """Returns the cart of a user."""
        return {}

    model = ScriptedModel(['```python\n{"type": "final_result", "value": 1}\n```'])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[fetch_cart])
    await run(agent)
    prompt = model.requests[0].system_instruction
    assert "Monty" in prompt
    assert 'call_tool("fetch_cart", {"user_id": <str>})' in prompt
    assert "Returns the cart of a user." in prompt


async def test_resumed_run_reuses_the_stored_system_prompt() -> None:
    # the prompt of a resumed run is the one stored in the checkpoint, so a state change
    # between invocations cannot alter the conversation mid-script
    slow = FakeTool("slow", "h", is_long_running=True)
    from codeact.testing import PlannedCall

    agent, _, model = scripted_agent(
        [[PlannedCall("slow", {}), PlannedComplete({"type": "observation", "value": 1})], done()[0]],
        tools=[slow],
        instruction="tier {tier}",
    )
    _events, _session, service = await run(agent, state={"tier": "gold"})
    # the system prompt is stored with the turn record in the session's turn slot
    slot = await service.load_turn(app_name="app", user_id="u", session_id="s")
    from codeact.agent._slot_context import load_context
    from codeact.turns._record import TurnRecord

    stored, _ = await load_context(service, ("app", "u", "s"), TurnRecord.model_validate(slot.data))
    assert "tier gold" in stored
    assert slot.data["system_prompt"] == ""  # format 4: in a blob, stored once per run
    from codeact import Content, FunctionResponse, Part

    msg = Content(role="user", parts=[Part(function_response=FunctionResponse(name="slow", response=1))])
    await run(agent, service=service, message=msg)
    assert "tier gold" in model.requests[-1].system_instruction
