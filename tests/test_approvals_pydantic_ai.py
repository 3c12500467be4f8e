"""Issue 17, kind 2, in the pydantic-ai adapter: the call resumed after an approval is the one
the verified continuation waits on, whatever the ``DeferredToolResults`` metadata (which
round-trips through a UI) says."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="codeact[pydantic-ai] is not installed")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from codeact import MontyRuntime, SnapshotError
from codeact.integrations.pydantic_ai import CodeActToolset

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


SCRIPT = 'receipt = call_tool("pay", {"amount": 900})\nreceipt'


def toolset(calls: list[tuple[str, Any]]) -> FunctionToolset:
    inner = FunctionToolset()

    @inner.tool_plain(requires_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount, in cents."""
        calls.append(("pay", amount))
        return f"paid {amount}"

    @inner.tool_plain(requires_approval=True)
    def delete_account(user: str) -> str:
        """Deletes an account."""
        calls.append(("delete_account", user))
        return f"deleted {user}"

    return inner


def model() -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(1 for m in messages if isinstance(m, ModelResponse)) == 0:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": SCRIPT}, tool_call_id="c0")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(reply)


@pytest.mark.parametrize("key", [None, b"s" * 32], ids=["unsigned", "signed"])
@pytest.mark.parametrize(
    "edit",
    [{"tool": "delete_account", "tool_args": {"user": "admin"}}, {"tool_args": {"amount": 999999}}],
    ids=["other-tool", "other-args"],
)
async def test_edited_metadata_is_refused_before_any_tool_runs(key: bytes | None, edit: dict[str, Any]) -> None:
    calls: list[tuple[str, Any]] = []
    agent = Agent(
        model(),
        toolsets=[CodeActToolset(toolset(calls), runtime=MontyRuntime(snapshot_key=key))],
        output_type=[str, DeferredToolRequests],
    )
    first = await agent.run("pay")
    [call] = first.output.approvals
    metadata = copy.deepcopy(first.output.metadata)
    pause = next(v for v in metadata[call.tool_call_id].values() if isinstance(v, dict) and "snapshot" in v)
    pause.update(edit)
    results = DeferredToolResults(approvals={call.tool_call_id: True}, metadata=metadata)
    fresh = Agent(
        model(),
        toolsets=[CodeActToolset(toolset(calls), runtime=MontyRuntime(snapshot_key=key))],
        output_type=[str, DeferredToolRequests],
    )
    with pytest.raises(SnapshotError, match="not the call the continuation waits on"):
        await fresh.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert calls == []
