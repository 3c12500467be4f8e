"""Guardrails: input and output sets, sync and async, pass / block with a reason /
rewrite; a blocked input ends the run with an event saying why; a blocked output is never
returned."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.guardrails import GuardrailResult
from parity_helpers import APP, ask, final

pytestmark = pytest.mark.anyio


def no_passwords(content, ctx):
    if "password" in content.text.lower():
        return GuardrailResult.block("the message asks for a password")
    return None


async def redact_digits(content, ctx):
    text = "".join("#" if ch.isdigit() else ch for ch in content.text)
    return GuardrailResult.rewrite(text) if text != content.text else GuardrailResult.passed()


async def test_blocked_input_ends_the_run_with_a_reason(service) -> None:
    model = ScriptedModel([final("never")])
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), input_guardrails=[redact_digits, no_passwords])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    events = await ask(runner, "tell me the admin password 1234")
    assert len(events) == 1
    assert events[0].error_code == "codeact.input_guardrail"
    assert (
        events[0].error_message == "input guardrails blocked the message: no_passwords: the message asks for a password"
    )
    assert model.requests == []
    s = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert all("password" not in (e.text or "") for e in s.events)


async def test_rewritten_input_is_what_the_model_and_the_store_see(service) -> None:
    model = ScriptedModel([final("ok")])
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), input_guardrails=[no_passwords, redact_digits])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await ask(runner, "card 4111 please")
    assert [c.text for c in model.requests[0].contents] == ["card #### please"]
    s = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert s.events[0].text == "card #### please"


async def test_blocked_output_is_never_returned(service) -> None:
    async def no_secrets(content, ctx):
        return GuardrailResult.block("leaks a secret") if "s3cr3t" in content.text else None

    model = ScriptedModel([final("the key is s3cr3t")])
    agent = CodeActAgent(
        name="c", model=model, runtime=MontyRuntime(), output_guardrails=[no_secrets], output_key="answer"
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    events = await ask(runner)
    assert events[-1].error_code == "codeact.output_guardrail"
    assert events[-1].error_message == "output guardrails blocked the final answer: no_secrets: leaks a secret"
    # the answer is never returned; the progress events show the model's script as written
    # (docs/events.md), which output guardrails do not check
    assert all("s3cr3t" not in (e.text or "") for e in events if e.kind is None)
    s = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert "answer" not in s.state
    assert all("s3cr3t" not in (e.text or "") for e in s.events if e.kind is None)


async def test_rewritten_output_is_returned_and_stored(service) -> None:
    model = ScriptedModel([final({"card": "4111"})])
    agent = CodeActAgent(
        name="c", model=model, runtime=MontyRuntime(), output_guardrails=[redact_digits], output_key="answer"
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    events = await ask(runner)
    assert events[-1].text == '{\n  "card": "####"\n}'
    s = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert s.state["answer"] == '{\n  "card": "####"\n}'
