"""Checkpoints and resuming (reference §11, §19.3, §19.8; SPEC §5): the wire shapes, the
resume paths for every disposition, stale checkpoints, crash consistency, and a resume in a
fresh process from a SQLite file."""

from __future__ import annotations

import base64
import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import anyio
import pytest

from agent_helpers import (
    APP,
    SESSION,
    USER,
    FakeTool,
    checkpoints,
    craft_checkpoint,
    fence,
    final_reply,
    kinds,
    run,
    scripted_agent,
    scripted_snapshot,
    texts,
)
from codeact import (
    PENDING_STATE_KEY,
    CodeActAgent,
    CodeActCheckpoint,
    Content,
    FunctionResponse,
    InMemorySessionService,
    MontyRuntime,
    Part,
    ResumeError,
    ResumeValue,
    RunConfig,
    Runner,
    ScriptedModel,
    SqliteSessionService,
)
from codeact.agent import (
    AwaitingCompletion,
    AwaitingConfirmation,
    PendingResult,
    PendingToolCall,
    Resolved,
    decode_script_output,
    render_final,
    truncate_middle,
)
from codeact.agent._output import Error, FinalResult, Observation, TransferToAgent
from codeact.testing import PlannedCall, PlannedComplete

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent


def final(value: object) -> PlannedComplete:
    return PlannedComplete({"type": "final_result", "value": value})


# --------------------------------------------------------------------- §19.3 wire shapes and round trips

DISPOSITIONS = [
    PendingResult(),
    Resolved(value={"x": [1, 2]}),
    Resolved(value=None),
    Resolved(error="call to 'rm' was denied by a human reviewer", error_type="PermissionError"),
    AwaitingConfirmation(),
    AwaitingCompletion(pending_handle={"status": "pending", "task_id": "t1"}),
    AwaitingCompletion(),
]


def full_checkpoint(disposition) -> CodeActCheckpoint:
    return CodeActCheckpoint(
        agent_name="coder",
        invocation_id="inv",
        iteration=3,
        system_prompt="SYS",
        transcript=[Content.from_text("q"), Content.from_text("```python\nx\n```", "model")],
        turn_stdout="items: 3\n",
        snapshot=bytes(range(256)),
        call=PendingToolCall(call_key="inv:3:1", call_id=1, tool="render_video", args={"id": 7, "é": "ü"}),
        disposition=disposition,
        tool_roster=["fetch", "render_video"],
    )


@pytest.mark.parametrize("disposition", DISPOSITIONS, ids=lambda d: d.kind)
def test_checkpoint_round_trips_through_json(disposition) -> None:
    cp = full_checkpoint(disposition)
    state = json.loads(json.dumps(cp.to_state()))
    back = CodeActCheckpoint.from_state(state)
    assert back == cp
    assert back.snapshot == bytes(range(256))
    assert back.disposition == disposition


def test_checkpoint_wire_shape() -> None:
    state = full_checkpoint(AwaitingCompletion(pending_handle={"task_id": "t1"})).to_state()
    assert base64.b64decode(state["snapshot"]) == bytes(range(256))
    assert state["transcript"] == [
        {"role": "user", "parts": [{"text": "q", "thought": False}]},
        {"role": "model", "parts": [{"text": "```python\nx\n```", "thought": False}]},
    ]
    assert state["call"] == {"call_key": "inv:3:1", "call_id": 1, "tool": "render_video", "args": {"id": 7, "é": "ü"}}
    assert state["disposition"] == {"kind": "awaiting_completion", "pending_handle": {"task_id": "t1"}}
    assert state["tool_roster"] == ["fetch", "render_video"]
    assert state["turn_stdout"] == "items: 3\n"
    assert state["agent_name"] == "coder"
    assert state["iteration"] == 3
    assert PendingResult().model_dump() == {"kind": "pending_result"}
    assert AwaitingConfirmation().model_dump() == {"kind": "awaiting_confirmation"}
    assert Resolved(value=1).model_dump() == {
        "kind": "resolved",
        "value": 1,
        "error": None,
        "error_type": "RuntimeError",
    }


@pytest.mark.parametrize("bad", ["garbage", 42, [], {"iteration": 1}])
def test_from_state_rejects_malformed_data(bad: object) -> None:
    with pytest.raises(ValueError):
        CodeActCheckpoint.from_state(bad)


def test_from_state_rejects_bad_base64() -> None:
    state = full_checkpoint(PendingResult()).to_state()
    state["snapshot"] = "not base64 !!"
    with pytest.raises(ValueError):
        CodeActCheckpoint.from_state(state)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"type": "observation", "value": [1]}, Observation([1])),
        ({"type": "error", "message": "m"}, Error("m")),
        ({"type": "final_result", "value": 7}, FinalResult(7)),
        ({"type": "final_result", "value": None}, FinalResult(None)),
        ({"type": "transfer_to_agent", "agent_name": "billing"}, TransferToAgent("billing")),
        ({"type": "final_result", "value": 1, "extra": "ignored"}, FinalResult(1)),
    ],
)
def test_decode_script_output_variants(value: object, expected: object) -> None:
    assert decode_script_output(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"not": "a variant"},
        None,
        7,
        "final",
        [1],
        (1, 2),
        {"type": "FINAL_RESULT", "value": 1},
        {"type": "final_result"},
        {"type": "observation"},
        {"type": "error", "message": None},
        {"type": "transfer_to_agent", "agent_name": 3},
        {"type": 1, "value": 1},
    ],
)
def test_decode_rejects_non_variants(value: object) -> None:
    out = decode_script_output(value)
    assert isinstance(out, Error)
    assert out.message.startswith("the script must end with an expression")
    assert "got " in out.message


def test_decode_error_names_the_value_compactly() -> None:
    out = decode_script_output({"not": "a variant"})
    assert '{"not":"a variant"}' in out.message


def test_final_result_and_transfer_wire_shapes_decode() -> None:
    assert decode_script_output(json.loads('{"type":"final_result","value":7}')) == FinalResult(7)
    assert decode_script_output(json.loads('{"type":"transfer_to_agent","agent_name":"billing"}')) == TransferToAgent(
        "billing"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        ({"a": 1, "b": [1, 2]}, '{\n  "a": 1,\n  "b": [\n    1,\n    2\n  ]\n}'),
        ([1], "[\n  1\n]"),
        (7, "7"),
        (0.5, "0.5"),
        (True, "true"),
        (None, "null"),
        ({"name": "Zoë"}, '{\n  "name": "Zoë"\n}'),
    ],
)
def test_render_final(value: object, text: str) -> None:
    assert render_final(value) == text


def test_truncate_middle() -> None:
    marker = "\n...[truncated]...\n"
    assert truncate_middle("abc", 3) == "abc"
    assert truncate_middle("", 0) == ""
    assert truncate_middle("abcdefghij", 4) == "ab" + marker + "ij"
    assert truncate_middle("abcdefghij", 5) == "ab" + marker + "ij"
    # counts code points, never splits one
    assert truncate_middle("é" * 10 + "ü" * 10, 10) == "ééééé" + marker + "üüüüü"
    assert truncate_middle("🙂" * 3, 3) == "🙂" * 3
    assert truncate_middle("🙂" * 4, 2) == "🙂" + marker + "🙂"


# --------------------------------------------------------------------- resume paths (ScriptedRuntime)


def echo_checkpoint(disposition, *, roster=("echo",), rest=None, **kw) -> dict:
    snap, _call_id = scripted_snapshot(PlannedCall("echo", {"text": "hi"}), *(rest or [final("recovered")]))
    return craft_checkpoint(
        snapshot=snap, tool="echo", args={"text": "hi"}, disposition=disposition, roster=list(roster), **kw
    )


async def test_recovers_from_resolved_checkpoint_without_rerunning_tool() -> None:
    echo = FakeTool("echo", "fresh")
    agent, rt, model = scripted_agent([], tools=[echo])
    events, session, _ = await run(
        agent, message=None, state={PENDING_STATE_KEY: echo_checkpoint(Resolved(value="stored"))}
    )
    assert [e.text for e in events] == ["recovered"]
    assert echo.calls == []
    assert model.requests == []
    assert rt.outcomes == [ResumeValue("stored")]
    assert session.state[PENDING_STATE_KEY] is None


async def test_resolved_error_is_raised_into_the_script_on_recovery() -> None:
    echo = FakeTool("echo")
    agent, rt, _ = scripted_agent([], tools=[echo])
    cp = echo_checkpoint(Resolved(error="ValueError: bad", error_type="ValueError"))
    events, _, _ = await run(agent, message=None, state={PENDING_STATE_KEY: cp})
    assert events[-1].text == "recovered"
    assert rt.outcomes == [ResumeError("ValueError: bad", "ValueError")]
    assert echo.calls == []


async def test_resume_from_pending_result_persists_a_resolved_checkpoint() -> None:
    echo = FakeTool("echo", "rerun")
    agent, rt, _ = scripted_agent([], tools=[echo])
    events, _, _ = await run(agent, message=None, state={PENDING_STATE_KEY: echo_checkpoint(PendingResult())})
    # a claim (write-ahead) before the re-run, then the after checkpoint
    assert kinds(events) == ["pending_result", "resolved"]
    cp = checkpoints(events)[1]
    assert cp.disposition == Resolved(value="rerun")
    assert cp.call.call_key == "old:1:0"
    assert events[-1].text == "recovered"
    assert echo.calls == [{"text": "hi"}]
    assert echo.contexts[0].function_call_id == "old:1:0"
    assert rt.outcomes == [ResumeValue("rerun")]


async def test_escalation_on_resume_ends_the_run_without_resuming() -> None:
    panic = FakeTool("echo", fn=lambda a, c: setattr(c.actions, "escalate", True))
    agent, rt, _ = scripted_agent([], tools=[panic])
    events, session, _ = await run(agent, message=None, state={PENDING_STATE_KEY: echo_checkpoint(PendingResult())})
    assert events[-1].actions.escalate is True
    assert events[-1].actions.state_delta[PENDING_STATE_KEY] is None
    assert kinds(events) == ["pending_result"]  # the claim only; no after checkpoint
    assert rt.outcomes == []
    assert all(e.text != "recovered" for e in events)
    assert session.state[PENDING_STATE_KEY] is None


async def test_resume_restores_transcript_iteration_and_stdout() -> None:
    agent, _rt, model = scripted_agent([[final("two")]], tools=[FakeTool("echo")], max_iterations=3)
    transcript = [Content.from_text("the question"), Content.from_text("old reply", "model")]
    cp = echo_checkpoint(
        Resolved(value=1),
        rest=[PlannedComplete({"type": "observation", "value": "seen"}, "more\n")],
        transcript=transcript,
        turn_stdout="early\n",
        iteration=2,
    )
    events, _, _ = await run(agent, message="ignored while resuming", state={PENDING_STATE_KEY: cp})
    assert events[-1].text == "two"
    assert texts(model.requests[0].contents) == [
        "the question",
        "old reply",
        'Observation:\n"seen"',
        "Output (stdout):\nearly\nmore\n",
    ]
    assert model.requests[0].system_instruction == "SYSTEM"
    # iteration 2 restored: the resumed turn made no model call, the next turn is iteration 3
    assert len(model.requests) == 1


async def test_resumed_iteration_counts_toward_max_iterations() -> None:
    agent, _, model = scripted_agent([[final("late")]], tools=[FakeTool("echo")], max_iterations=2)
    cp = echo_checkpoint(Resolved(value=1), rest=[PlannedComplete({"type": "observation", "value": 1})], iteration=2)
    events, session, _ = await run(agent, message=None, state={PENDING_STATE_KEY: cp})
    assert events[-1].error_code == "codeact.max_iterations"
    assert model.requests == []
    assert session.state[PENDING_STATE_KEY] is None


# confirmation on resume


def gated_agent(**kw):
    delete = FakeTool("delete_file", "deleted")
    agent, rt, model = scripted_agent(
        [[PlannedCall("delete_file", {"path": "/tmp/x"}), final("done")]],
        tools=[delete],
        require_tool_confirmation=["delete_file"],
        **kw,
    )
    return agent, rt, model, delete


async def suspended_on_confirmation():
    agent, rt, _model, delete = gated_agent()
    events, _session, service = await run(agent)
    (cp,) = checkpoints(events)
    assert cp.disposition == AwaitingConfirmation()
    return agent, rt, delete, service, cp


@pytest.mark.parametrize("decision", ["approve", True])
async def test_confirmation_resume_with_approve(decision) -> None:
    agent, rt, delete, service, cp = await suspended_on_confirmation()
    rc = RunConfig(tool_confirmation_decisions={cp.call.call_key: decision})
    events, session, _ = await run(agent, service=service, message=None, run_config=rc)
    assert kinds(events) == ["pending_result", "resolved"]
    assert checkpoints(events)[1].disposition == Resolved(value="deleted")
    assert events[-1].text == "done"
    assert delete.calls == [{"path": "/tmp/x"}]
    assert delete.contexts[0].function_call_id == cp.call.call_key
    assert rt.outcomes == [ResumeValue("deleted")]
    assert session.state[PENDING_STATE_KEY] is None


@pytest.mark.parametrize("decision", ["deny", False])
async def test_confirmation_resume_with_deny(decision) -> None:
    agent, rt, delete, service, cp = await suspended_on_confirmation()
    rc = RunConfig(tool_confirmation_decisions={cp.call.call_key: decision})
    events, _session, _ = await run(agent, service=service, message=None, run_config=rc)
    denied = "call to 'delete_file' was denied by a human reviewer"
    assert checkpoints(events)[0].disposition == Resolved(error=denied, error_type="PermissionError")
    assert delete.calls == []
    assert rt.outcomes == [ResumeError(denied, "PermissionError")]
    assert events[-1].text == "done"


@pytest.mark.parametrize(
    "decisions", [{}, {"someone-else:1:0": "approve"}, {"0": "approve"}], ids=["none", "other-key", "bare-call-id"]
)
async def test_confirmation_resume_without_a_matching_decision_resuspends(decisions) -> None:
    agent, rt, delete, service, cp = await suspended_on_confirmation()
    events, session, _ = await run(
        agent, service=service, message="please?", run_config=RunConfig(tool_confirmation_decisions=decisions)
    )
    assert len(events) == 1
    again = checkpoints(events)[0]
    assert again.disposition == AwaitingConfirmation()
    assert again.call == cp.call
    assert again.snapshot == cp.snapshot
    assert again.transcript == cp.transcript
    assert again.iteration == cp.iteration
    assert events[0].interrupted and events[0].turn_complete
    assert list(events[0].actions.requested_tool_confirmations) == [cp.call.call_key]
    assert delete.calls == []
    assert rt.outcomes == []
    assert session.state[PENDING_STATE_KEY]["call"]["call_key"] == cp.call.call_key

    # the original key still works afterwards
    rc = RunConfig(tool_confirmation_decisions={cp.call.call_key: "approve"})
    events, _, _ = await run(agent, service=service, message=None, run_config=rc)
    assert events[-1].text == "done"
    assert len(delete.calls) == 1


# long-running completion on resume


async def suspended_on_long_running():
    slow = FakeTool("render_video", {"status": "pending", "task_id": "t1"}, is_long_running=True)
    agent, rt, _model = scripted_agent([[PlannedCall("render_video", {"v": 1}), final("rendered")]], tools=[slow])
    events, _session, service = await run(agent)
    (cp,) = checkpoints(events)
    return agent, rt, slow, service, cp


def response_message(*responses: FunctionResponse) -> Content:
    return Content(role="user", parts=[Part(function_response=r) for r in responses])


async def test_long_running_completion_matched_by_key() -> None:
    agent, rt, slow, service, cp = await suspended_on_long_running()
    msg = response_message(
        FunctionResponse(name="render_video", id="stale:1:0", response={"url": "wrong"}),
        FunctionResponse(name="render_video", id=cp.call.call_key, response={"url": "right"}),
    )
    events, _session, _ = await run(agent, service=service, message=msg)
    assert checkpoints(events)[0].disposition == Resolved(value={"url": "right"})
    assert rt.outcomes == [ResumeValue({"url": "right"})]
    assert events[-1].text == "rendered"
    assert len(slow.calls) == 1


async def test_long_running_completion_without_key() -> None:
    agent, rt, _slow, service, _cp = await suspended_on_long_running()
    events, _, _ = await run(
        agent, service=service, message=response_message(FunctionResponse(name="render_video", response={"url": "u"}))
    )
    assert rt.outcomes == [ResumeValue({"url": "u"})]
    assert events[-1].text == "rendered"


@pytest.mark.parametrize(
    "message",
    [
        response_message(FunctionResponse(name="render_video", id="other:1:0", response={"url": "x"})),
        response_message(FunctionResponse(name="another_tool", response={"url": "x"})),
        Content.from_text("is it done yet?"),
        None,
    ],
    ids=["wrong-key", "keyless-other-tool", "text", "no-message"],
)
async def test_long_running_without_a_matching_completion_resuspends(message) -> None:
    agent, rt, slow, service, cp = await suspended_on_long_running()
    events, session, _ = await run(agent, service=service, message=message)
    assert len(events) == 1
    assert events[0].long_running_tool_ids == [cp.call.call_key]
    again = checkpoints(events)[0]
    assert again.call == cp.call and again.disposition == cp.disposition and again.snapshot == cp.snapshot
    assert rt.outcomes == []
    assert len(slow.calls) == 1  # not started again
    assert session.state[PENDING_STATE_KEY] is not None


async def test_null_completion_payload_resumes_with_an_empty_value() -> None:
    agent, rt, _slow, service, cp = await suspended_on_long_running()
    events, _, _ = await run(
        agent, service=service, message=response_message(FunctionResponse(name="render_video", id=cp.call.call_key))
    )
    assert events[-1].text == "rendered"
    assert len(rt.outcomes) == 1 and isinstance(rt.outcomes[0], ResumeValue)


# --------------------------------------------------------------------- stale checkpoints


async def assert_stale_then_discard(agent, service, model, reason: str) -> None:
    before = (await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)).state[PENDING_STATE_KEY]
    for _ in range(2):  # stays stale (and reported) until discarded
        events, session, _ = await run(agent, service=service, message="hello")
        last = events[-1]
        assert last.error_code == "codeact.stale_checkpoint"
        assert reason in last.error_message
        assert "discard_pending_checkpoint" in last.error_message
        assert last.is_final_response()
        assert session.state[PENDING_STATE_KEY] == before
    assert model.requests == []

    events, session, _ = await run(
        agent, service=service, message="fresh start", run_config=RunConfig(discard_pending_checkpoint=True)
    )
    assert events[-1].text == "fresh"
    assert session.state[PENDING_STATE_KEY] is None
    assert model.requests[0].contents[-1].text == "fresh start"


async def test_roster_mismatch_is_stale_and_kept_until_discarded() -> None:
    echo = FakeTool("echo")
    agent, _rt, model = scripted_agent([[final("fresh")]], tools=[echo, FakeTool("added_later")])
    _, _, service = await run(agent, message=None, state={PENDING_STATE_KEY: echo_checkpoint(PendingResult())})
    await assert_stale_then_discard(agent, service, model, "tool roster changed")
    assert echo.calls == []


@pytest.mark.parametrize("bad", [{"iteration": 1}, "garbage", 7], ids=["missing-fields", "string", "int"])
async def test_malformed_checkpoint_is_stale(bad) -> None:
    agent, _rt, model = scripted_agent([[final("fresh")]], tools=[FakeTool("echo")])
    service = InMemorySessionService()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={PENDING_STATE_KEY: bad})
    await assert_stale_then_discard(agent, service, model, "malformed")


async def test_foreign_snapshot_is_stale() -> None:
    agent, _rt, model = scripted_agent([[final("fresh")]], tools=[FakeTool("echo")])
    cp = craft_checkpoint(snapshot=b"\x00not a snapshot", tool="echo", disposition=Resolved(value=1), roster=["echo"])
    service = InMemorySessionService()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={PENDING_STATE_KEY: cp})
    await assert_stale_then_discard(agent, service, model, "snapshot")


async def test_foreign_snapshot_is_stale_on_monty() -> None:
    model = ScriptedModel([final_reply("fresh")])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=[FakeTool("echo")])
    snap, _ = scripted_snapshot(PlannedCall("echo", {}))  # a ScriptedRuntime snapshot is foreign to Monty
    cp = craft_checkpoint(snapshot=snap, tool="echo", disposition=Resolved(value=1), roster=["echo"])
    service = InMemorySessionService()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={PENDING_STATE_KEY: cp})
    await assert_stale_then_discard(agent, service, model, "snapshot")


async def test_runner_discard_pending_checkpoint() -> None:
    agent, _rt, _model = scripted_agent([[final("fresh")]], tools=[FakeTool("echo"), FakeTool("new")])
    _, _, service = await run(agent, message=None, state={PENDING_STATE_KEY: echo_checkpoint(PendingResult())})
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is True
    assert await runner.discard_pending_checkpoint(user_id=USER, session_id=SESSION) is False
    events, _session, _ = await run(agent, service=service, message="hi")
    assert events[-1].text == "fresh"


# --------------------------------------------------------------------- crash consistency


class Crash(BaseException):
    """Simulates the process dying: nothing catches it."""


class CrashingService(InMemorySessionService):
    """Crashes right after durably storing the first checkpoint of a given kind."""

    def __init__(self) -> None:
        super().__init__()
        self.crash_after: str | None = None

    async def append_event(self, session, event):
        stored = await super().append_event(session, event)
        pending = event.actions.state_delta.get(PENDING_STATE_KEY)
        if self.crash_after and isinstance(pending, dict) and pending["disposition"]["kind"] == self.crash_after:
            self.crash_after = None
            raise Crash
        return stored


async def crash_run(agent, service) -> None:
    """One run that must die with ``Crash``. The abandoned agent generators are collected
    here, with the (trio) ResourceWarning about them silenced: a real crash ends the
    process instead. (That the runner leaves them unclosed is tested in test_runner.py.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            await run(agent, service=service)
        except Crash:
            pass
        else:
            pytest.fail("the run did not crash")
        for _ in range(10):  # trio finalizes abandoned generators one level per tick
            gc.collect()
            await anyio.sleep(0.001)


def counting_agent():
    fetch = FakeTool("fetch", {"items": 3})
    agent, rt, _model = scripted_agent(
        [[PlannedCall("fetch", {}), PlannedCall("fetch", {}), final("done")]], tools=[fetch]
    )
    return agent, rt, fetch


async def test_crash_after_write_ahead_reruns_the_tool_once() -> None:
    agent, _rt, fetch = counting_agent()
    service = CrashingService()
    service.crash_after = "pending_result"
    await crash_run(agent, service)
    assert fetch.calls == []  # crashed before the tool ran
    events, session, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "done"
    assert len(fetch.calls) == 2  # the recovered call once, then the second call
    assert session.state[PENDING_STATE_KEY] is None


async def test_crash_while_the_tool_ran_reruns_it_at_least_once() -> None:
    runs: list[int] = []

    def fetch_fn(args, ctx):
        runs.append(1)
        if len(runs) == 1:
            raise Crash
        return "ok"

    fetch = FakeTool("fetch", fn=fetch_fn)
    agent, rt, _ = scripted_agent([[PlannedCall("fetch", {}), final("done")]], tools=[fetch])
    service = InMemorySessionService()
    await crash_run(agent, service)
    events, _, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "done"
    assert len(runs) == 2
    assert rt.outcomes == [ResumeValue("ok")]


async def test_crash_after_the_after_checkpoint_never_reruns_the_tool() -> None:
    agent, rt, fetch = counting_agent()
    service = CrashingService()
    service.crash_after = "resolved"
    await crash_run(agent, service)
    assert len(fetch.calls) == 1
    events, _session, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "done"
    assert len(fetch.calls) == 2  # only the second call ran; the first was recovered from the checkpoint
    assert rt.outcomes == [ResumeValue({"items": 3}), ResumeValue({"items": 3})]
    assert rt.starts == 1


async def test_monty_crash_after_the_after_checkpoint_resumes_from_sqlite(tmp_path: Path) -> None:
    count = {"n": 0}

    def fetch() -> int:
        count["n"] += 1
        return 41

    script = 'x = call_tool("fetch")\n{"type": "final_result", "value": x + 1}'

    class CrashingSqlite(SqliteSessionService):
        crash = True

        async def append_event(self, session, event):
            stored = await super().append_event(session, event)
            pending = event.actions.state_delta.get(PENDING_STATE_KEY)
            if self.crash and isinstance(pending, dict) and pending["disposition"]["kind"] == "resolved":
                self.crash = False
                raise Crash
            return stored

    db = tmp_path / "s.db"
    with CrashingSqlite(db) as service:
        agent = CodeActAgent(name="coder", model=ScriptedModel([fence(script)]), runtime=MontyRuntime(), tools=[fetch])
        await crash_run(agent, service)
    with SqliteSessionService(db) as service:
        agent = CodeActAgent(name="coder", model=ScriptedModel([]), runtime=MontyRuntime(), tools=[fetch])
        events, _session, _ = await run(agent, service=service, message=None)
    assert events[-1].text == "42"
    assert count["n"] == 1


# --------------------------------------------------------------------- suspend here, resume in a fresh process

CHILD = '''
import json, os, sys
import anyio
from codeact import CodeActAgent, MontyRuntime, RunConfig, Runner, ScriptedModel, SqliteSessionService, tool

def log(line):
    with open(os.environ["TOOL_LOG"], "a") as f:
        f.write(line + "\\n")

def fetch_cart(user_id: str) -> dict:
    """The cart."""
    log(f"fetch_cart {os.getpid()}")
    return {"items": [10, 20, 30]}

@tool(requires_confirmation=True)
def delete_cart(user_id: str) -> str:
    """Deletes the cart."""
    log(f"delete_cart {os.getpid()}")
    return "deleted"

def build(replies):
    tools = [fetch_cart, delete_cart]
    return CodeActAgent(name="coder", model=ScriptedModel(replies), runtime=MontyRuntime(), tools=tools)

async def main(mode):
    with SqliteSessionService(os.environ["DB"]) as service:
        if mode == "resume":
            key = sys.argv[2]
            model_reply = "```python\\n{'type': 'final_result', 'value': 'cleared ' + str(3)}\\n```"
            agent = build([model_reply])
            runner = Runner(app_name="app", agent=agent, session_service=service)
            events = [e async for e in runner.run_async(user_id="u", session_id="s", new_message=None,
                      run_config=RunConfig(tool_confirmation_decisions={key: "approve"}))]
            prompt = [c.text for c in agent.model.requests[0].contents[-2:]] if agent.model.requests else None
            kinds = [(e.actions.state_delta.get("codeact_pending") or {}).get("disposition", {}).get("kind")
                     for e in events]
            print(json.dumps({"texts": [e.text for e in events], "errors": [e.error_code for e in events],
                              "kinds": kinds, "prompt": prompt}))

if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
'''

FIRST_SCRIPT = """
cart = call_tool("fetch_cart", {"user_id": "u-42"})
n = len(cart["items"])
print("items:", n)
status = call_tool("delete_cart", {"user_id": "u-42"})
{"type": "observation", "value": {"n": n, "status": status}}
"""


async def test_suspend_then_resume_in_a_fresh_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    db, log = tmp_path / "sessions.db", tmp_path / "tools.log"
    child = tmp_path / "child_app.py"
    child.write_text(textwrap.dedent(CHILD))
    monkeypatch.setenv("TOOL_LOG", str(log))
    monkeypatch.setenv("DB", str(db))
    env = dict(os.environ)
    # first process: this one, with the very same agent definition as the child
    spec = importlib.util.spec_from_file_location("child_app", child)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.build([fence(FIRST_SCRIPT)])
    with SqliteSessionService(db) as service:
        events, session, _ = await run(agent, service=service, message="clear my cart")
    (key,) = list(events[-1].actions.requested_tool_confirmations)
    assert kinds(events) == ["pending_result", "resolved", "awaiting_confirmation"]
    assert log.read_text().splitlines() == [f"fetch_cart {os.getpid()}"]

    proc = subprocess.run(
        [sys.executable, str(child), "resume", key], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == [None, None, None]
    assert out["kinds"] == ["pending_result", "resolved", None]
    assert out["texts"][-1] == "cleared 3"
    assert out["prompt"] == ['Observation:\n{"n":3,"status":"deleted"}', "Output (stdout):\nitems: 3\n"]
    lines = log.read_text().splitlines()
    assert lines[0] == f"fetch_cart {os.getpid()}"
    assert len(lines) == 2 and lines[1].startswith("delete_cart ") and lines[1] != f"delete_cart {os.getpid()}"
    with SqliteSessionService(db) as service:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session.state[PENDING_STATE_KEY] is None
