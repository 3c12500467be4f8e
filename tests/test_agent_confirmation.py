"""Long-running tools and tools that need confirmation, on the first run: suspension and
resume from the checkpoint, inline decisions by call key, and runtimes that cannot suspend
(acceptance list §19.8); on ``ScriptedRuntime``."""

from __future__ import annotations

import re

import pytest

from agent_helpers import (
    FakeTool,
    final,
    journal_of,
    observation,
    outcomes_of,
    run,
    run_direct,
    scripted_agent,
    slot_of,
    texts,
)
from codeact import Content, FunctionResponse, Part, ResumeError, ResumeValue, RunConfig, ToolConfirmation
from codeact.testing import PlannedCall

pytestmark = pytest.mark.anyio


async def test_long_running_suspends_then_resumes_from_checkpoint() -> None:
    slow = FakeTool("slow", {"status": "pending", "task_id": "t1"}, is_long_running=True)
    agent, rt, _ = scripted_agent([[PlannedCall("slow", {"job": 1}), final("completed")]], tools=[slow])
    events, _session, service = await run(agent)
    last = events[-1]
    slot = await slot_of(service)
    assert len(events) == 1
    assert slot.data["status"] == "suspended" and slot.snapshot is not None
    (pending,) = slot.data["pending"]
    assert pending["kind"] == "completion"
    assert pending["hint"] == '{"status":"pending","task_id":"t1"}'
    key = pending["call_key"]
    assert last.long_running_tool_ids == [key]
    assert last.content is not None and last.content.role == "model"
    (part,) = last.content.parts
    assert part.function_call is not None
    assert (part.function_call.name, part.function_call.args, part.function_call.id) == ("slow", {"job": 1}, key)
    assert last.is_final_response()
    assert slow.calls == [{"job": 1}]

    reply = Content(role="user", parts=[Part(function_response=FunctionResponse(name="slow", response={"url": "u"}))])
    events2, _session, _ = await run(agent, service=service, message=reply)
    assert outcomes_of(service) == [{"v": {"url": "u"}}]
    assert events2[-1].text == "completed"
    assert await slot_of(service) is None
    assert rt.outcomes == [ResumeValue({"url": "u"})]
    assert len(slow.calls) == 1


async def test_stdout_before_a_suspend_is_persisted_in_the_checkpoint() -> None:
    slow = FakeTool("slow", "handle", is_long_running=True)
    agent, _, model = scripted_agent(
        [[PlannedCall("slow", {}, stdout="working...\n"), observation("after")], [final("ok")]], tools=[slow]
    )
    _events, _, service = await run(agent)
    assert (await slot_of(service)).data["turn_stdout"] == "working...\n"
    reply = Content(role="user", parts=[Part(function_response=FunctionResponse(name="slow", response=1))])
    events2, _, _ = await run(agent, service=service, message=reply)
    assert events2[-1].text == "ok"
    # the resumed turn's feedback carries the stdout printed before the suspend
    assert texts(model.requests[-1].contents)[-2:] == ['Observation:\n"after"', "Output (stdout):\nworking...\n"]
    assert model.requests[-1].system_instruction == model.requests[0].system_instruction


async def test_long_running_tool_runs_inline_without_suspension() -> None:
    slow = FakeTool("slow", {"status": "pending"}, is_long_running=True)
    agent, rt, _ = scripted_agent([[PlannedCall("slow", {}), final("inline")]], tools=[slow], suspension=False)
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ["inline"]
    assert all(not e.long_running_tool_ids for e in events)
    assert rt.outcomes == [ResumeValue({"status": "pending"})]


async def test_long_running_failure_resumes_the_script_with_the_error() -> None:
    slow = FakeTool("slow", fn=lambda a, c: (_ for _ in ()).throw(ValueError("no quota")), is_long_running=True)
    agent, rt, _ = scripted_agent([[PlannedCall("slow", {}), final("handled")]], tools=[slow])
    events, _session, service = await run(agent)
    assert events[-1].text == "handled"
    assert outcomes_of(service) == [{"e": "no quota", "t": "ValueError"}]
    assert rt.outcomes == [ResumeError("no quota", "ValueError")]


async def test_confirmation_suspend_marks_the_turn_interrupted() -> None:
    delete = FakeTool("delete_file", "deleted")
    agent, _, _ = scripted_agent(
        [[PlannedCall("delete_file", {"path": "/tmp/x"}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
    )
    events, _session, service = await run(agent)
    assert len(events) == 1
    last = events[-1]
    slot = await slot_of(service)
    (pending,) = slot.data["pending"]
    key = pending["call_key"]
    assert pending["kind"] == "confirmation"
    assert last.interrupted and last.turn_complete
    asked = last.actions.requested_tool_confirmations
    assert re.fullmatch("[0-9a-f]{16}", asked[key].digest)  # names the call (PendingCallInfo.digest)
    assert {k: c.model_copy(update={"digest": ""}) for k, c in asked.items()} == {
        key: ToolConfirmation(tool_name="delete_file", function_call_id=key, args={"path": "/tmp/x"})
    }
    assert "Tool confirmation required for 'delete_file'" in last.text
    assert key in last.text
    # a confirmation request asks the caller for a decision: not a final response (as in ADK)
    assert not last.is_final_response()
    assert delete.calls == []
    assert journal_of(service) == []  # nothing ran, nothing journaled


async def test_tool_flag_requires_confirmation() -> None:
    gated = FakeTool("gated", requires_confirmation=True)
    agent, _, _ = scripted_agent([[PlannedCall("gated", {}), final("done")]], tools=[gated])
    events, _, _ = await run(agent)
    assert list(events[-1].actions.requested_tool_confirmations) == [f"{events[-1].invocation_id}:1:0"]
    assert gated.calls == []


async def test_require_confirmation_for_all() -> None:
    echo = FakeTool("echo")
    agent, _, _ = scripted_agent(
        [[PlannedCall("echo", {}), final("done")]], tools=[echo], require_tool_confirmation_for_all=True
    )
    events, _, _ = await run(agent)
    assert [c.tool_name for c in events[-1].actions.requested_tool_confirmations.values()] == ["echo"]
    assert echo.calls == []


@pytest.mark.parametrize("decision", ["approve", True])
async def test_confirmation_approved_inline_by_call_key(decision: object) -> None:
    delete = FakeTool("delete_file", "deleted")
    agent, rt, _ = scripted_agent(
        [[PlannedCall("delete_file", {"path": "/x"}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
    )
    events = await run_direct(
        agent, invocation_id="inv", run_config=RunConfig(tool_confirmation_decisions={"inv:1:0": decision})
    )
    assert events[-1].text == "done"
    assert delete.calls == [{"path": "/x"}]
    assert rt.outcomes == [ResumeValue("deleted")]


@pytest.mark.parametrize("decision", ["deny", False])
async def test_confirmation_denied_inline_raises_permission_error(decision: object) -> None:
    delete = FakeTool("delete_file", "deleted")
    agent, rt, _ = scripted_agent(
        [[PlannedCall("delete_file", {}), final("done")]], tools=[delete], require_tool_confirmation=["delete_file"]
    )
    events = await run_direct(
        agent, invocation_id="inv", run_config=RunConfig(tool_confirmation_decisions={"inv:1:0": decision})
    )
    assert events[-1].text == "done"
    assert delete.calls == []
    assert rt.outcomes == [ResumeError("call to 'delete_file' was denied by a human reviewer", "PermissionError")]


async def test_decision_for_another_call_key_does_not_approve_this_call() -> None:
    delete = FakeTool("delete_file")
    agent, _, _ = scripted_agent(
        [[PlannedCall("delete_file", {}), final("done")]], tools=[delete], require_tool_confirmation=["delete_file"]
    )
    # call id 0 of another invocation / iteration: must not match
    decisions = {"other:1:0": "approve", "inv:2:0": "approve", "0": "approve"}
    events = await run_direct(agent, invocation_id="inv", run_config=RunConfig(tool_confirmation_decisions=decisions))
    assert list(events[-1].actions.requested_tool_confirmations) == ["inv:1:0"]
    assert delete.calls == []


async def test_non_suspending_runtime_rejects_a_confirmation() -> None:
    delete = FakeTool("delete_file")
    agent, rt, _ = scripted_agent(
        [[PlannedCall("delete_file", {}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
        suspension=False,
    )
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ["done"]
    assert delete.calls == []
    (outcome,) = rt.outcomes
    assert isinstance(outcome, ResumeError)
    assert outcome.exc_type == "PermissionError"
    assert "'delete_file' requires confirmation" in outcome.message
    assert "cannot pause" in outcome.message


async def test_non_suspending_runtime_runs_an_approved_call() -> None:
    delete = FakeTool("delete_file", "gone")
    agent, rt, _ = scripted_agent(
        [[PlannedCall("delete_file", {}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
        suspension=False,
    )
    events = await run_direct(
        agent, invocation_id="i", run_config=RunConfig(tool_confirmation_decisions={"i:1:0": True})
    )
    assert [e.text for e in events] == ["done"]
    assert rt.outcomes == [ResumeValue("gone")]
