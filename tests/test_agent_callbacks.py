"""Agent-level and model-level callbacks (before/after agent, before/after model), the
generation config and model name sent to the model, and the builder's checks."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_helpers import FakeTool, fence, final, final_reply, observation, run, scripted_agent
from codeact import CodeActAgent, GenerateContentConfig, ScriptedModel
from codeact.testing import PlannedCall, ScriptedRuntime

pytestmark = pytest.mark.anyio


async def test_before_agent_callback_short_circuits_the_loop() -> None:
    agent, rt, model = scripted_agent([[final("x")]], before_agent=lambda ctx: "intercepted")
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ["intercepted"]
    assert events[0].author == "coder"
    assert model.requests == []
    assert rt.starts == 0


async def test_before_agent_callback_returning_none_lets_the_loop_run() -> None:
    seen = []

    async def before(ctx):
        seen.append(ctx.agent_name)

    agent, _, _ = scripted_agent([[final("x")]], before_agent=before)
    events, _, _ = await run(agent)
    assert seen == ["coder"]
    assert events[-1].text == "x"


async def test_after_agent_callback_runs_on_completion() -> None:
    agent, _, _ = scripted_agent([[final("answer")]], after_agent=lambda ctx: "after-done")
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ["answer", "after-done"]


async def test_after_agent_callback_skipped_on_suspend_and_on_error() -> None:
    slow = FakeTool("slow", "h", is_long_running=True)
    agent, _, _ = scripted_agent([[PlannedCall("slow", {})]], tools=[slow], after_agent=lambda ctx: "after-done")
    events, _, _ = await run(agent)
    assert all(e.text != "after-done" for e in events)

    agent, _, _ = scripted_agent([[observation(1)]], max_iterations=1, after_agent=lambda ctx: "after-done")
    events, _, _ = await run(agent)
    assert events[-1].error_code == "codeact.max_iterations"
    assert all(e.text != "after-done" for e in events)


# --------------------------------------------------------------------- model-level callbacks and config


async def test_before_model_callback_can_skip_the_model() -> None:
    seen = []

    def before(ctx, request):
        seen.append(request)
        return final_reply("skipped")

    agent, rt, model = scripted_agent([[final("skipped")]], before_model=before)
    events, _, _ = await run(agent)
    assert events[-1].text == "skipped"
    assert model.requests == []
    assert len(seen) == 1 and seen[0].contents[-1].text == "go"
    assert rt.scripts == ['{"type": "final_result", "value": \'skipped\'}']


async def test_after_model_callbacks_form_a_pipeline() -> None:
    seen: list[str] = []

    def first(ctx, response):
        seen.append(response.text)
        return fence("rewritten = 1")

    def second(ctx, response):
        seen.append(response.text)

    agent, rt, _ = scripted_agent([[final("ok")]], after_model=[first, second])
    events, _, _ = await run(agent)
    assert events[-1].text == "ok"
    assert seen == [fence("pass"), fence("rewritten = 1")]
    assert rt.scripts == ["rewritten = 1"]


async def test_after_model_runs_even_when_the_model_was_skipped() -> None:
    seen: list[str] = []
    agent, _rt, model = scripted_agent(
        [[final("ok")]],
        before_model=lambda ctx, req: fence("from_before = 1"),
        after_model=lambda ctx, resp: seen.append(resp.text),
    )
    await run(agent)
    assert model.requests == []
    assert seen == [fence("from_before = 1")]


async def test_generation_config_is_sent_to_the_model() -> None:
    agent, _, model = scripted_agent([[final("ok")]], temperature=0.5, max_output_tokens=64)
    await run(agent)
    config = model.requests[0].config
    assert config is not None
    assert config.temperature == 0.5
    assert config.max_output_tokens == 64

    agent, _, model = scripted_agent(
        [[final("ok")]], generate_content_config=GenerateContentConfig(top_p=0.9, seed=3), temperature=0.1
    )
    await run(agent)
    assert (model.requests[0].config.top_p, model.requests[0].config.seed) == (0.9, 3)
    assert model.requests[0].config.temperature == 0.1


async def test_model_name_is_sent() -> None:
    model = ScriptedModel(lambda r: fence("pass"), name="my-model")
    agent = CodeActAgent(name="coder", model=model, runtime=ScriptedRuntime([[final("ok")]]))
    await run(agent)
    assert model.requests[0].model == "my-model"


def test_builder_requires_model_and_runtime() -> None:
    with pytest.raises(ValidationError, match="model"):
        CodeActAgent(name="a", runtime=ScriptedRuntime([]))  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="runtime"):
        CodeActAgent(name="a", model=ScriptedModel([]))  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="requires a model"):
        CodeActAgent(name="a", model=None, runtime=ScriptedRuntime([]))


def test_input_schema_is_exposed_for_introspection() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    agent = CodeActAgent(name="a", model=ScriptedModel([]), runtime=ScriptedRuntime([]), input_schema=schema)
    assert agent.input_schema == schema
