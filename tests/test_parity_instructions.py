"""Instructions: strings and providers (sync or async, read-only context), {key}, {key?},
scoped keys and {artifact.name} injection, with a clear error for a missing key."""

from __future__ import annotations

import pytest

from codeact import CodeActAgent, MissingStateError, MontyRuntime, Runner, ScriptedModel
from codeact.services import InMemoryArtifactService
from parity_helpers import APP, ask, final

pytestmark = pytest.mark.anyio


async def test_templates_inject_state_scopes_and_artifacts(service) -> None:
    artifacts = InMemoryArtifactService()
    await artifacts.save_artifact(app_name=APP, user_id="u", session_id="s", filename="policy.txt", artifact="v1")
    await artifacts.save_artifact(
        app_name=APP, user_id="u", session_id="s", filename="policy.txt", artifact="NO REFUNDS"
    )
    model = ScriptedModel([final("ok")])
    agent = CodeActAgent(
        name="coder",
        model=model,
        runtime=MontyRuntime(),
        global_instruction="G {app:brand}",
        instruction="Hi {name}; tier {user:tier}; opt [{missing?}]; policy: {artifact.policy.txt}; {not a key}",
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service, artifact_service=artifacts)
    await ask(runner, state={"name": "Ada", "user:tier": "gold", "app:brand": "ACME"})
    prompt = model.requests[0].system_instruction
    assert "G ACME" in prompt
    assert "Hi Ada; tier gold; opt []; policy: NO REFUNDS; {not a key}" in prompt


async def test_providers_sync_and_async_get_a_read_only_context(service) -> None:
    seen = []

    def global_provider(ctx):
        seen.append(dict(ctx.state))
        with pytest.raises(TypeError):
            ctx.state["x"] = 1  # read only
        return "GLOBAL FROM PROVIDER {name}"

    async def provider(ctx):
        return f"agent {ctx.agent_name} for {ctx.user_id}"

    model = ScriptedModel([final("ok")])
    agent = CodeActAgent(
        name="coder", model=model, runtime=MontyRuntime(), global_instruction=global_provider, instruction=provider
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await ask(runner, state={"name": "Ada"})
    prompt = model.requests[0].system_instruction
    # providers are not template-expanded
    assert "GLOBAL FROM PROVIDER {name}" in prompt and "agent coder for u" in prompt
    assert seen[0]["name"] == "Ada"


@pytest.mark.parametrize(
    ("instruction", "match"),
    [("Hello {name}", "State variable 'name' not found"), ("{artifact.nope.txt}", "Artifact 'nope.txt' not found")],
)
async def test_missing_required_key_or_artifact_is_a_clear_error(service, instruction, match) -> None:
    model = ScriptedModel([final("ok")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), instruction=instruction)
    runner = Runner(app_name=APP, agent=agent, session_service=service, artifact_service=InMemoryArtifactService())
    with pytest.raises(MissingStateError, match=match):
        await ask(runner)
    assert model.requests == []


async def test_artifact_names_that_escape_are_rejected(service) -> None:
    agent = CodeActAgent(
        name="c", model=ScriptedModel([final(1)]), runtime=MontyRuntime(), instruction="{artifact.a..b?}"
    )
    runner = Runner(app_name=APP, agent=agent, session_service=service, artifact_service=InMemoryArtifactService())
    with pytest.raises(MissingStateError, match="invalid artifact name"):
        await ask(runner)
