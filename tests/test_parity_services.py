"""Services: artifacts (in memory and on disk, versions), memory (keyword search) and
secrets (never shown to the model), reachable from ToolContext exactly as from the callback
context."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel
from codeact.services import FileArtifactService, InMemoryArtifactService, InMemoryMemoryService
from codeact.tools import ToolContext
from parity_helpers import APP, ask, final, py

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "files"])
def artifacts(request: pytest.FixtureRequest, tmp_path: Path):
    return InMemoryArtifactService() if request.param == "memory" else FileArtifactService(tmp_path / "artifacts")


async def test_artifacts_have_versions_and_scopes(artifacts) -> None:
    key = {"app_name": APP, "user_id": "u", "session_id": "s"}
    assert await artifacts.save_artifact(**key, filename="r.txt", artifact="one") == 0
    assert await artifacts.save_artifact(**key, filename="r.txt", artifact=b"\x00two") == 1
    assert await artifacts.save_artifact(**key, filename="user:profile", artifact="p") == 0
    assert (await artifacts.load_artifact(**key, filename="r.txt")).data == b"\x00two"
    assert (await artifacts.load_artifact(**key, filename="r.txt", version=0)).text == "one"
    assert await artifacts.list_versions(**key, filename="r.txt") == [0, 1]
    other = {**key, "session_id": "s2"}
    assert await artifacts.list_artifact_keys(**other) == ["user:profile"]
    assert await artifacts.list_artifact_keys(**key) == ["r.txt", "user:profile"]
    with pytest.raises(ValueError, match="invalid artifact name"):
        await artifacts.save_artifact(**key, filename="../x", artifact="x")
    await artifacts.delete_artifact(**key, filename="r.txt")
    assert await artifacts.load_artifact(**key, filename="r.txt") is None


async def test_tools_and_callbacks_reach_the_same_services(service, artifacts) -> None:
    memory = InMemoryMemoryService()
    seen: dict[str, object] = {}

    async def report(text: str, tool_context: ToolContext) -> dict:
        """Saves a report and recalls memories."""
        version = await tool_context.save_artifact("report.txt", text)
        hits = await tool_context.search_memory("favourite colour")
        key = tool_context.get_secret("api_key")
        return {"version": version, "memories": [h.text for h in hits], "key": key}

    async def after_agent(ctx):
        if ctx.session.id != "new":
            return
        seen["artifact"] = (await ctx.load_artifact("report.txt")).text
        seen["keys"] = await ctx.list_artifacts()
        seen["memory"] = [m.text for m in await ctx.search_memory("colour")]
        seen["secret"] = ctx.get_secret("api_key")

    model = ScriptedModel(
        [
            final("noted"),
            py('r = call_tool("report", {"text": "all good"})\nprint(r["key"])\n{"type": "observation", "value": r}'),
            final("done"),
        ]
    )
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), tools=[report], after_agent=after_agent)
    runner = Runner(
        app_name=APP,
        agent=agent,
        session_service=service,
        artifact_service=artifacts,
        memory_service=memory,
        secrets={"api_key": "sk-SECRET-123"},
    )
    await ask(runner, "my favourite colour is teal", session="old")
    await memory.add_session_to_memory(await service.get_session(app_name=APP, user_id="u", session_id="old"))

    events = await ask(runner, "make the report", session="new")
    feedback = "\n".join(c.text for c in model.requests[-1].contents)
    assert "my favourite colour is teal" in feedback and '"version":0' in feedback
    assert "sk-SECRET-123" not in feedback and "[REDACTED]" in feedback
    assert all("sk-SECRET" not in r.system_instruction for r in model.requests)
    assert "sk-SECRET" not in repr(runner.secrets)
    assert seen == {
        "artifact": "all good",
        "keys": ["report.txt"],
        "memory": ["my favourite colour is teal"],
        "secret": "sk-SECRET-123",
    }
    assert any(e.actions.artifact_delta == {"report.txt": 0} for e in events)
