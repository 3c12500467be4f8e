"""Issue 47, the pydantic-ai door: an approval whose pause cannot be found is refused (never a
fresh run of the script from its top), the metadata's digest binds the call shown to the call
that runs, and a pause is settled once: per process in memory, across processes with a codeact
store. Real pydantic-ai ``Agent`` and ``FunctionModel``, real Monty, real SQLite file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai", reason="codeact[pydantic-ai] is not installed")

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from codeact import MontyRuntime
from codeact.exceptions import AlreadyResumingError, DecisionMismatchError, NoPendingCallError
from codeact.integrations.pydantic_ai import PAUSE_METADATA_KEY, CodeActToolset
from codeact.sessions import SqliteSessionService

pytestmark = pytest.mark.anyio
KEY = b"k" * 32

PAY = """
cost = call_tool("price", {"item": "cheese"})
print("paying", cost)
receipt = call_tool("pay", {"amount": cost})
receipt
"""

PAY_TWICE = """
out = []
for i in range(2):
    out.append(call_tool("pay", {"amount": 5}))
out
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs on asyncio only


def inner(calls: list[tuple[str, Any]], gate: anyio.Event | None = None) -> FunctionToolset:
    tools = FunctionToolset()

    @tools.tool_plain
    def price(item: str) -> int:
        """The price of an item, in cents."""
        calls.append(("price", item))
        return 900

    @tools.tool_plain(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pays an amount, in cents."""
        calls.append(("pay", amount))
        if gate is not None:
            await gate.wait()
        return f"paid {amount}"

    return tools


def model(code: str) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(1 for m in messages if isinstance(m, ModelResponse)) == 0:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": code}, tool_call_id="call-1")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        assert isinstance(part, ToolReturnPart)
        return ModelResponse(parts=[TextPart(f"done: {part.content}")])

    return FunctionModel(reply)


def agent(calls: list[tuple[str, Any]], code: str = PAY, **options: Any) -> Agent[None, Any]:
    """A new ``Agent`` and toolset, as a request handler builds them for each request."""
    gate = options.pop("gate", None)
    toolset = CodeActToolset(inner(calls, gate), runtime=MontyRuntime(snapshot_key=KEY), **options)
    return Agent(model(code), toolsets=[toolset], output_type=[str, DeferredToolRequests])


async def paused(calls: list[tuple[str, Any]], code: str = PAY, **options: Any) -> tuple[Any, Any]:
    first = await agent(calls, code, **options).run("buy cheese")
    assert isinstance(first.output, DeferredToolRequests)
    return first, first.output


def approve(requests: DeferredToolRequests, *, metadata: bool = True) -> DeferredToolResults:
    [call] = requests.approvals
    return DeferredToolResults(
        approvals={call.tool_call_id: True}, metadata=copy.deepcopy(requests.metadata) if metadata else {}
    )


async def test_an_approval_with_no_pause_to_find_is_refused_not_run_from_the_top() -> None:
    calls: list[tuple[str, Any]] = []
    first, requests = await paused(calls)
    assert calls == [("price", "cheese")]
    # a handler that builds its Agent per request and sends no metadata
    with pytest.raises(NoPendingCallError, match="names no paused script"):
        await agent(calls).run(
            message_history=first.all_messages(), deferred_tool_results=approve(requests, metadata=False)
        )
    assert calls == [("price", "cheese")]  # before: price ran again, then pay, from the script's top


async def test_the_metadata_carries_the_digest_and_a_mismatch_is_refused() -> None:
    calls: list[tuple[str, Any]] = []
    first, requests = await paused(calls)
    [call] = requests.approvals
    meta = requests.metadata[call.tool_call_id]
    assert len(meta["digest"]) == 16 and meta["args"] == {"amount": 900}
    results = approve(requests)
    results.metadata[call.tool_call_id]["digest"] = "0" * 16
    with pytest.raises(DecisionMismatchError, match="stale or edited"):
        await agent(calls).run(message_history=first.all_messages(), deferred_tool_results=results)
    assert calls == [("price", "cheese")]


@pytest.mark.parametrize("edit", [{"args": {"amount": 1}}, {"tool": "price"}], ids=["args", "tool"])
async def test_the_args_a_ui_shows_are_bound_to_what_runs(edit: dict[str, Any]) -> None:
    calls: list[tuple[str, Any]] = []
    toolset_calls = agent(calls)
    first = await toolset_calls.run("buy cheese")
    requests = first.output
    [call] = requests.approvals
    results = approve(requests)
    results.metadata[call.tool_call_id].update(edit)  # the copy a UI showed, edited
    with pytest.raises(DecisionMismatchError, match="is not the paused call"):
        await toolset_calls.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert calls == [("price", "cheese")]
    # the pause stays pending: the true approval still applies
    second = await toolset_calls.run(message_history=first.all_messages(), deferred_tool_results=approve(requests))
    assert second.output.startswith("done: {'value': 'paid 900'") and calls[-1] == ("pay", 900)


async def test_the_same_approval_twice_runs_the_tool_once_in_one_process() -> None:
    calls: list[tuple[str, Any]] = []
    same = agent(calls)
    first = await same.run("buy cheese")
    results = approve(first.output)
    second = await same.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert second.output == "done: {'value': 'paid 900', 'stdout': 'paying 900\\n'}"
    with pytest.raises(NoPendingCallError, match="already resumed"):
        await same.run(message_history=first.all_messages(), deferred_tool_results=approve(first.output))
    assert calls == [("price", "cheese"), ("pay", 900)]  # before: ("pay", 900) twice


async def test_a_pause_is_settled_once_across_processes_with_a_store(tmp_path: Path) -> None:
    calls: list[tuple[str, Any]] = []
    db = tmp_path / "pauses.db"
    with SqliteSessionService(db) as store:
        first, requests = await paused(calls, session_service=store)
    [call] = requests.approvals
    assert PAUSE_METADATA_KEY not in requests.metadata[call.tool_call_id]  # the store holds it
    # another process (its own store connection and toolset), with no metadata at all
    with SqliteSessionService(db) as store:
        second = await agent(calls, session_service=store).run(
            message_history=first.all_messages(), deferred_tool_results=approve(requests, metadata=False)
        )
    assert second.output == "done: {'value': 'paid 900', 'stdout': 'paying 900\\n'}"
    # and a third: the same approval again, with or without the metadata
    for metadata in (True, False):
        with SqliteSessionService(db) as store, pytest.raises(NoPendingCallError, match="already resumed"):
            await agent(calls, session_service=store).run(
                message_history=first.all_messages(), deferred_tool_results=approve(requests, metadata=metadata)
            )
    assert calls == [("price", "cheese"), ("pay", 900)]


async def test_two_approvals_at_once_with_a_store_run_the_tool_once(tmp_path: Path) -> None:
    calls: list[tuple[str, Any]] = []
    db = tmp_path / "pauses.db"
    gate = anyio.Event()
    outcomes: list[Any] = []
    with SqliteSessionService(db) as store:
        first, requests = await paused(calls, session_service=store)

    async def decide() -> None:
        with SqliteSessionService(db) as store:
            try:
                run = await agent(calls, session_service=store, gate=gate).run(
                    message_history=first.all_messages(), deferred_tool_results=approve(requests)
                )
                outcomes.append(run.output)
            except (AlreadyResumingError, NoPendingCallError) as exc:
                outcomes.append(type(exc).__name__)
                gate.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(decide)
        tg.start_soon(decide)
    assert sorted(map(str, outcomes)) == [
        "AlreadyResumingError",
        "done: {'value': 'paid 900', 'stdout': 'paying 900\\n'}",
    ]
    assert calls.count(("pay", 900)) == 1


@pytest.mark.parametrize("store", [False, True], ids=["memory", "store"])
async def test_an_approval_of_a_settled_pause_never_approves_the_next_one(tmp_path: Path, store: bool) -> None:
    """The script pays 5 twice: the second pause is at an equal call. The first approval sent
    again must not approve the second pause."""
    calls: list[tuple[str, Any]] = []
    with SqliteSessionService(tmp_path / "p.db") as service:
        options: dict[str, Any] = {"session_service": service} if store else {}
        same = agent(calls, PAY_TWICE, **options)
        first = await same.run("pay twice")
        once = approve(first.output)
        second = await same.run(message_history=first.all_messages(), deferred_tool_results=once)
        assert isinstance(second.output, DeferredToolRequests) and calls == [("pay", 5)]
        assert second.output.metadata["call-1"]["digest"] != first.output.metadata["call-1"]["digest"]
        with pytest.raises(NoPendingCallError, match="already resumed"):
            await same.run(message_history=first.all_messages(), deferred_tool_results=approve(first.output))
        assert calls == [("pay", 5)]
        third = await same.run(message_history=first.all_messages(), deferred_tool_results=approve(second.output))
        assert third.output == "done: {'value': ['paid 5', 'paid 5'], 'stdout': ''}"
        assert calls == [("pay", 5), ("pay", 5)]


CHILD = """
import json, sys
import anyio
from pydantic_ai import DeferredToolResults
from pydantic_ai.messages import ModelMessagesTypeAdapter
sys.path.insert(0, sys.argv[3])
import test_doors_pydantic_ai as t
from codeact.exceptions import NoPendingCallError
from codeact.sessions import SqliteSessionService

async def main():
    history = ModelMessagesTypeAdapter.validate_json(open(sys.argv[2]).read())
    calls = []
    with SqliteSessionService(sys.argv[1]) as store:
        try:
            run = await t.agent(calls, session_service=store).run(
                message_history=history, deferred_tool_results=DeferredToolResults(approvals={"call-1": True})
            )
            print(json.dumps({"output": run.output, "calls": calls}))
        except NoPendingCallError as exc:
            print(json.dumps({"refused": str(exc), "calls": calls}))

anyio.run(main)
"""


async def test_an_approval_replayed_by_another_os_process_runs_nothing(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    calls: list[tuple[str, Any]] = []
    db = tmp_path / "pauses.db"
    with SqliteSessionService(db) as store:
        first, _ = await paused(calls, session_service=store)
    (tmp_path / "history.json").write_bytes(first.all_messages_json())
    (tmp_path / "child.py").write_text(CHILD)
    tests = str(Path(__file__).resolve().parent)

    def child() -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(tmp_path / "child.py"), str(db), str(tmp_path / "history.json"), tests],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        return dict(json.loads(done.stdout.decode().strip().splitlines()[-1]))

    once = child()  # a handler process: approvals={id: True}, no metadata
    assert once["output"] == "done: {'value': 'paid 900', 'stdout': 'paying 900\\n'}"
    assert once["calls"] == [["pay", 900]]
    twice = child()  # the same request delivered again, to another process
    assert "already resumed" in twice["refused"] and twice["calls"] == []
