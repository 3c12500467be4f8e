"""The CodeAct turn loop (reference §6–17, acceptance list §19.1 and §19.8), mostly on
``ScriptedRuntime`` + ``ScriptedModel``; the main paths again on ``MontyRuntime``."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel, ValidationError

from agent_helpers import (
    FakeTool,
    fence,
    final_event,
    final_reply,
    intents_of,
    journal_of,
    outcomes_of,
    run,
    run_direct,
    scripted_agent,
    slot_of,
    texts,
)
from codeact import (
    PENDING_STATE_KEY,
    BaseAgent,
    CodeActAgent,
    Content,
    CPythonRuntime,
    Event,
    FunctionResponse,
    GenerateContentConfig,
    MontyRuntime,
    Part,
    ResumeError,
    ResumeValue,
    RetryBudget,
    RunConfig,
    ScriptedModel,
    ToolConfirmation,
)
from codeact.agent import NO_CODE_FEEDBACK
from codeact.testing import PlannedCall, PlannedComplete, PlannedRaise, ScriptedRuntime

pytestmark = pytest.mark.anyio


def final(value: object) -> PlannedComplete:
    return PlannedComplete({"type": "final_result", "value": value})


def observation(value: object, stdout: str = "") -> PlannedComplete:
    return PlannedComplete({"type": "observation", "value": value}, stdout)


class TextAgent(BaseAgent):
    """A sub-agent that answers with a fixed text."""

    reply: str = "sub-agent reply"

    async def run_async(self, ctx):  # type: ignore[override]
        yield Event(invocation_id=ctx.invocation_id, author=self.name, content=Content.from_text(self.reply, "model"))


# --------------------------------------------------------------------- basic outcomes


async def test_produces_final_result() -> None:
    agent, rt, model = scripted_agent([[final("answer")]])
    events, session, _ = await run(agent)
    assert len(events) == 1
    ev = final_event(events)
    assert ev.author == "coder"
    assert ev.content is not None and ev.content.role == "model"
    assert ev.text == "answer"
    assert ev.is_final_response()
    assert len(model.requests) == 1
    assert rt.starts == 1
    assert session.state.get(PENDING_STATE_KEY) is None


async def test_final_result_renders_non_strings_as_pretty_json() -> None:
    agent, _, _ = scripted_agent([[final({"answer": 42, "ok": True})]])
    events, _, _ = await run(agent)
    assert events[-1].text == '{\n  "answer": 42,\n  "ok": true\n}'


async def test_inline_tool_is_journaled_with_an_intent_and_an_outcome() -> None:
    echo = FakeTool("echo", {"echoed": "hi"})
    agent, rt, _ = scripted_agent([[PlannedCall("echo", {"text": "hi"}), final("done")]], tools=[echo])
    events, session, service = await run(agent)
    # no checkpoint events: the journal holds the call, the event log only the answer
    assert len(events) == 1
    journal = journal_of(service)
    assert [(kind, seq) for kind, seq, _ in journal] == [("intent", 0), ("outcome", 0)]
    assert journal[0][2][0] == "echo" and len(journal[0][2][1]) == 16  # tool and argument digest, no arguments
    assert journal[1][2] == {"v": {"echoed": "hi"}}
    # the call key is <invocation_id>:<iteration>:<position>, and the tool sees it
    key = f"{events[0].invocation_id}:1:0"
    assert echo.contexts[0].function_call_id == key
    assert events[-1].text == "done"
    assert await slot_of(service) is None  # the turn slot is gone once the run ended
    assert PENDING_STATE_KEY not in session.state
    assert echo.calls == [{"text": "hi"}]
    assert rt.outcomes == [ResumeValue({"echoed": "hi"})]


async def test_no_checkpoints_without_suspension() -> None:
    echo = FakeTool("echo", "x")
    agent, rt, _ = scripted_agent([[PlannedCall("echo", {}), final("inline")]], tools=[echo], suspension=False)
    events, _, service = await run(agent)
    assert [e.text for e in events] == ["inline"]
    assert [k for k, _, _ in journal_of(service)] == ["intent", "outcome"]  # journaled all the same
    assert len(echo.calls) == 1
    assert rt.outcomes == [ResumeValue("x")]


async def test_observation_then_final_records_model_turns() -> None:
    agent, _, model = scripted_agent([[observation({"a": 1, "é": "ü"})], [final("ok")]])
    events, _, _ = await run(agent, message="question")
    assert events[-1].text == "ok"
    assert len(model.requests) == 2
    second = model.requests[1].contents
    assert [c.role for c in second] == ["user", "model", "user"]
    assert second[0].text == "question"
    # the transcript records the model's whole reply, prose included
    assert second[1].text == fence("pass")
    # observations are compact JSON, non-ASCII kept, never truncated
    assert second[2].text == 'Observation:\n{"a":1,"é":"ü"}'


async def test_string_observation_is_fed_back_with_json_quotes() -> None:
    agent, _, model = scripted_agent([[observation("hi")], [final("ok")]])
    await run(agent)
    assert model.requests[1].contents[-1].text == 'Observation:\n"hi"'


async def test_observation_is_not_truncated() -> None:
    big = "x" * 500
    agent, _, model = scripted_agent([[observation(big)], [final("ok")]], max_error_chars=20)
    await run(agent)
    assert model.requests[1].contents[-1].text == f'Observation:\n"{big}"'


async def test_error_output_is_fed_back_and_the_loop_goes_on() -> None:
    agent, _, model = scripted_agent([[PlannedComplete({"type": "error", "message": "no data"})], [final("ok")]])
    events, _, _ = await run(agent)
    assert events[-1].text == "ok"
    assert model.requests[1].contents[-1].text == "Error during execution:\nno data"


async def test_transcript_with_stdout_appends_only_when_non_empty() -> None:
    agent, _, model = scripted_agent([[observation(1)], [observation(2, stdout="hello\n")], [final("ok")]])
    await run(agent)
    first_turn = texts(model.requests[1].contents)
    assert first_turn[-1] == "Observation:\n1"
    assert not any("Output (stdout)" in t for t in first_turn)
    second_turn = texts(model.requests[2].contents)
    assert len(second_turn) == len(first_turn) + 3  # model reply, observation, stdout note
    assert second_turn[-2:] == ["Observation:\n2", "Output (stdout):\nhello\n"]
    assert model.requests[2].contents[-1].role == "user"


async def test_stdout_note_collects_the_whole_turn_and_follows_the_observation() -> None:
    echo = FakeTool("echo", 1)
    program = [PlannedCall("echo", {}, stdout="a\n"), PlannedCall("echo", {}, stdout="b\n"), observation(3, "c\n")]
    agent, _, model = scripted_agent([program, [final("ok")]], tools=[echo])
    await run(agent)
    assert texts(model.requests[1].contents)[-2:] == ["Observation:\n3", "Output (stdout):\na\nb\nc\n"]


async def test_stdout_of_a_final_turn_is_discarded() -> None:
    agent, _, _ = scripted_agent([[PlannedComplete({"type": "final_result", "value": "v"}, "noise\n")]])
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ["v"]


# --------------------------------------------------------------------- script errors and malformed results


async def test_raised_feedback_format() -> None:
    tb = 'Traceback (most recent call last):\n  File "agent.py", line 1\nKeyError: itms'
    agent, _, model = scripted_agent([[PlannedRaise(tb, stdout="printed\n")], [final("ok")]])
    events, _, _ = await run(agent)
    assert events[-1].text == "ok"
    assert texts(model.requests[1].contents)[-2:] == ["Error during execution:\n" + tb, "Output (stdout):\nprinted\n"]


async def test_raised_error_and_stdout_are_truncated_in_the_middle() -> None:
    message = "H" * 30 + "M" * 100 + "T" * 30
    out = "h" * 30 + "m" * 100 + "t" * 30
    agent, _, model = scripted_agent(
        [[PlannedRaise(message, stdout=out)], [PlannedComplete({"type": "error", "message": message})], [final(1)]],
        max_error_chars=40,
    )
    await run(agent)
    marker = "\n...[truncated]...\n"
    turn1 = texts(model.requests[1].contents)
    assert turn1[-2] == "Error during execution:\n" + "H" * 20 + marker + "T" * 20
    assert turn1[-1] == "Output (stdout):\n" + "h" * 20 + marker + "t" * 20
    assert texts(model.requests[2].contents)[-1] == "Error during execution:\n" + "H" * 20 + marker + "T" * 20


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"not": "a variant"}, "no 'type' key"),
        (42, "int is not a dict"),
        ([1, 2], "list is not a dict"),
        ("final", "str is not a dict"),
        ({"type": "bogus", "value": 1}, "unknown type 'bogus'"),
        ({"type": "Final_Result", "value": 1}, "unknown type"),
        ({"type": "final_result"}, "needs a 'value' key"),
        ({"type": "error", "message": 3}, "'message' must be a string"),
        ({"type": "transfer_to_agent"}, "needs a 'agent_name' key"),
    ],
)
async def test_malformed_return_value_is_fed_back(value: object, needle: str) -> None:
    agent, _, model = scripted_agent([[PlannedComplete(value)], [final("ok")]])
    events, _, _ = await run(agent)
    assert events[-1].text == "ok"
    feedback = model.requests[1].contents[-1].text
    assert feedback.startswith("Error during execution:\nthe script must end with an expression")
    assert needle in feedback


async def test_null_completion_is_fed_back() -> None:
    agent, _, model = scripted_agent([[PlannedComplete(None)], [final("ok")]])
    events, _, _ = await run(agent)
    assert events[-1].text == "ok"
    feedback = model.requests[1].contents[-1].text
    assert "got null" in feedback
    assert "the last statement is not an expression" in feedback


async def test_reply_without_code_is_fed_back_and_counts_as_an_iteration() -> None:
    model = ScriptedModel(["I think the answer is probably 4.", final_reply("four")])
    rt = ScriptedRuntime([[final("four")]])
    agent = CodeActAgent(name="coder", model=model, runtime=rt)
    events, _, _ = await run(agent)
    assert events[-1].text == "four"
    second = model.requests[1].contents
    assert second[-2].text == "I think the answer is probably 4."
    assert second[-1].text == NO_CODE_FEEDBACK
    assert rt.starts == 1

    model = ScriptedModel(["no code here", "still none"])
    agent = CodeActAgent(name="coder", model=model, runtime=ScriptedRuntime([]), max_iterations=2)
    events, _, _ = await run(agent)
    assert events[-1].error_code == "codeact.max_iterations"


async def test_max_iterations_exceeded_is_an_error() -> None:
    agent, _, model = scripted_agent([[observation(1)], [observation(2)]], max_iterations=1)
    events, _, _ = await run(agent)
    last = events[-1]
    assert last.error_code == "codeact.max_iterations"
    assert last.error_message.startswith("max iterations (1) exceeded without a final result. The transcript is kept")
    assert last.is_final_response()
    assert len(model.requests) == 1


async def test_default_max_iterations_is_twelve() -> None:
    agent, _, model = scripted_agent([[observation(i)] for i in range(13)])
    events, _, _ = await run(agent)
    assert events[-1].error_message.startswith("max iterations (12) exceeded without a final result.")
    assert len(model.requests) == 12


# --------------------------------------------------------------------- tool dispatch


async def test_unknown_tool_raises_lookup_error_into_the_script() -> None:
    echo = FakeTool("echo")
    agent, rt, _ = scripted_agent([[PlannedCall("nope", {}), final("handled")]], tools=[echo])
    events, _, service = await run(agent)
    assert events[-1].text == "handled"
    assert journal_of(service) == []  # nothing ran: nothing to journal
    assert rt.outcomes == [ResumeError("tool 'nope' is not available; available tools: echo", "LookupError")]


@pytest.mark.parametrize(
    ("exc", "type_name"),
    [
        (ValueError("not_found: resource missing"), "ValueError"),
        (KeyError("not_found"), "KeyError"),
        (PermissionError("not_found"), "PermissionError"),
        (type("CustomError", (Exception,), {})("not_found"), "RuntimeError"),
        (type("MyLookup", (LookupError,), {})("not_found"), "LookupError"),
    ],
)
async def test_tool_failure_raises_into_script(exc: Exception, type_name: str) -> None:
    def boom(args, ctx):
        raise exc

    tool = FakeTool("boom", fn=boom)
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("caught")]], tools=[tool])
    events, _, service = await run(agent)
    assert events[-1].text == "caught"
    (outcome,) = rt.outcomes
    assert isinstance(outcome, ResumeError)
    assert outcome.exc_type == type_name
    assert "not_found" in outcome.message
    # the class name leads the text only when the script sees another type (never "ValueError: ValueError:")
    renamed = type(exc).__name__ != type_name
    assert outcome.message.startswith(type(exc).__name__ + ": ") is renamed
    # a KeyError passes its key's text (not its repr), so the script's str(e) is CPython's 'not_found'
    if type_name == "KeyError":
        assert outcome.message == "not_found"
    # the failure is the journaled outcome too
    assert outcomes_of(service) == [{"e": outcome.message, "t": type_name}]


async def test_uncaught_tool_failure_becomes_a_script_error() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("bad input")))
    agent, _, model = scripted_agent([[PlannedCall("boom", {})], [final("ok")]], tools=[tool])
    await run(agent)
    assert model.requests[1].contents[-1].text == "Error during execution:\nValueError: bad input"


async def test_tool_timeout_raises_into_the_script() -> None:
    async def sleepy(args, ctx):
        await anyio.sleep(5)

    sleeper = FakeTool("sleeper", fn=sleepy)
    agent, rt, _ = scripted_agent(
        [[PlannedCall("sleeper", {}), final("recovered")]], tools=[sleeper], tool_timeout=0.02
    )
    with anyio.fail_after(3):
        events, _, _ = await run(agent)
    assert events[-1].text == "recovered"
    assert rt.outcomes == [ResumeError("tool 'sleeper' timed out after 0.02 s", "TimeoutError")]


async def test_tool_call_id_is_visible_to_the_tool() -> None:
    echo = FakeTool("echo")
    agent, _, _ = scripted_agent([[PlannedCall("echo", {}, call_id=42), final("ok")]], tools=[echo])
    await run_direct(agent, invocation_id="inv-7")
    # the key counts calls within the turn, not the interpreter's call ids (SPEC §5)
    assert echo.contexts[0].function_call_id == "inv-7:1:0"
    assert echo.contexts[0].invocation_id == "inv-7"
    assert echo.contexts[0].agent_name == "coder"


async def test_call_keys_differ_across_iterations_with_the_same_call_id() -> None:
    echo = FakeTool("echo")
    agent, _, _ = scripted_agent(
        [[PlannedCall("echo", {}), observation(1)], [PlannedCall("echo", {}), final("ok")]], tools=[echo]
    )
    await run_direct(agent, invocation_id="inv")
    assert [c.function_call_id for c in echo.contexts] == ["inv:1:0", "inv:2:0"]


async def test_retry_budget_recovers_a_flaky_tool() -> None:
    state = {"n": 0}

    def flaky(args, ctx):
        state["n"] += 1
        if state["n"] == 1:
            raise ConnectionError("blip")
        return {"ok": True}

    tool = FakeTool("flaky", fn=flaky)
    agent, rt, _ = scripted_agent(
        [[PlannedCall("flaky", {}), final("ok")]], tools=[tool], default_retry_budget=RetryBudget(max_retries=1)
    )
    await run(agent)
    assert rt.outcomes == [ResumeValue({"ok": True})]
    assert len(tool.calls) == 2


async def test_per_tool_retry_budget_overrides_the_default() -> None:
    tool = FakeTool("flaky", fn=lambda a, c: (_ for _ in ()).throw(ConnectionError("down")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("flaky", {}), final("ok")]],
        tools=[tool],
        default_retry_budget=RetryBudget(max_retries=5),
        tool_retry_budgets={"flaky": RetryBudget(max_retries=2)},
    )
    await run(agent)
    assert len(tool.calls) == 3
    assert isinstance(rt.outcomes[0], ResumeError)
    # Monty has no ConnectionError: the nearest type every runtime has, the real name in the text
    assert rt.outcomes[0] == ResumeError("ConnectionError: down", "OSError")


async def test_on_tool_error_supplies_a_fallback_value() -> None:
    seen: list[str] = []

    def first(tool, args, ctx, message):
        seen.append(message)
        return None

    def second(tool, args, ctx, message):
        return {"fallback": "used"}

    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("not_found")))
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("ok")]], tools=[tool], on_tool_error=[first, second])
    await run(agent)
    assert rt.outcomes == [ResumeValue({"fallback": "used"})]
    assert seen == ["not_found"]


async def test_on_tool_error_chain_stops_on_a_callback_error() -> None:
    called: list[str] = []

    def broken(tool, args, ctx, message):
        called.append("broken")
        raise RuntimeError("callback bug")

    def never(tool, args, ctx, message):
        called.append("never")
        return "unused"

    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("not_found")))
    agent, rt, _ = scripted_agent([[PlannedCall("boom", {}), final("ok")]], tools=[tool], on_tool_error=[broken, never])
    await run(agent)
    assert called == ["broken"]
    assert rt.outcomes == [ResumeError("not_found", "ValueError")]


async def test_circuit_breaker_opens_after_threshold_failures() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("x")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {}), PlannedCall("boom", {}), final("done")]], tools=[tool], circuit_breaker_threshold=1
    )
    events, _, _ = await run(agent)
    assert events[-1].text == "done"
    assert len(tool.calls) == 1
    assert rt.outcomes[-1] == ResumeError("tool 'boom' is temporarily disabled after 1 consecutive failures")


async def test_before_tool_callback_short_circuits_the_tool() -> None:
    tool = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(ValueError("x")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {"a": 1}), final("ok")]], tools=[tool], before_tool=lambda t, args, ctx: "intercepted"
    )
    await run(agent)
    assert tool.calls == []
    assert rt.outcomes == [ResumeValue("intercepted")]


async def test_before_tool_callbacks_first_non_none_wins() -> None:
    order: list[str] = []

    def a(t, args, ctx):
        order.append("a")

    async def b(t, args, ctx):
        order.append("b")
        return {"from": "b", "args": args}

    def c(t, args, ctx):
        order.append("c")
        return "c"

    echo = FakeTool("echo", "real")
    agent, rt, _ = scripted_agent([[PlannedCall("echo", {"x": 1}), final("ok")]], tools=[echo], before_tool=[a, b, c])
    await run(agent)
    assert order == ["a", "b"]
    assert rt.outcomes == [ResumeValue({"from": "b", "args": {"x": 1}})]
    assert echo.calls == []


async def test_after_tool_callback_full_rewrites_the_result() -> None:
    echo = FakeTool("echo", {"original": True})
    agent, rt, _ = scripted_agent(
        [[PlannedCall("echo", {}), final("ok")]],
        tools=[echo],
        after_tool_full=lambda t, args, ctx, value, outcome: {"rewritten": True},
    )
    await run(agent)
    assert rt.outcomes == [ResumeValue({"rewritten": True})]


async def test_after_tool_callback_sees_the_tool_outcome() -> None:
    seen = []
    echo = FakeTool("echo", {"v": 1})
    agent, rt, _ = scripted_agent(
        [[PlannedCall("echo", {"a": 1}), final("ok")]],
        tools=[echo],
        after_tool_full=lambda t, args, ctx, value, outcome: seen.append((value, outcome)),
    )
    await run(agent)
    ((value, outcome),) = seen
    assert value == {"v": 1}
    assert outcome.tool_name == "echo"
    assert outcome.args == {"a": 1}
    assert outcome.success is True
    assert outcome.attempts == 1
    assert outcome.error_message is None
    assert rt.outcomes == [ResumeValue({"v": 1})]


async def test_after_tool_callback_sees_failed_tool_outcome() -> None:
    seen = []
    boom = FakeTool("boom", fn=lambda a, c: (_ for _ in ()).throw(LookupError("not_found: gone")))
    agent, rt, _ = scripted_agent(
        [[PlannedCall("boom", {}), final("ok")]],
        tools=[boom],
        after_tool_full=lambda t, args, ctx, value, outcome: seen.append((value, outcome)),
    )
    await run(agent)
    ((value, outcome),) = seen
    assert outcome.success is False
    assert outcome.attempts == 1
    assert "not_found" in outcome.error_message
    assert value == {"error": outcome.error_message}
    assert isinstance(rt.outcomes[0], ResumeError) and "not_found" in rt.outcomes[0].message


# --------------------------------------------------------------------- tool side effects and terminal signals


async def test_inline_tool_state_delta_is_persisted_on_a_checkpoint() -> None:
    def remember(args, ctx):
        ctx.state["note"] = "kept"
        ctx.actions.artifact_delta["report.txt"] = 1
        return "ok"

    agent, _, _ = scripted_agent(
        [[PlannedCall("remember", {}), final("done")]], tools=[FakeTool("remember", fn=remember)]
    )
    events, session, service = await run(agent)
    # stored on its own event before the outcome is recorded (a recorded call never re-runs)
    after = events[0]
    assert after.actions.state_delta["note"] == "kept"
    assert after.actions.artifact_delta == {"report.txt": 1}
    assert after.content is None
    assert outcomes_of(service) == [{"v": "ok"}]
    assert "note" not in events[1].actions.state_delta  # flushed once
    assert session.state["note"] == "kept"


async def test_non_suspending_tool_state_delta_persists_on_final() -> None:
    def remember(args, ctx):
        ctx.state["note"] = "kept"

    agent, _, _ = scripted_agent(
        [[PlannedCall("remember", {}), final("done")]], tools=[FakeTool("remember", fn=remember)], suspension=False
    )
    events, session, _ = await run(agent)
    assert [e.text for e in events] == ["", "done"]
    assert events[0].actions.state_delta["note"] == "kept"
    assert session.state["note"] == "kept"


async def test_tool_sees_state_written_by_an_earlier_tool_in_the_same_run() -> None:
    def write(args, ctx):
        ctx.state["k"] = "v1"

    def read(args, ctx):
        return ctx.state.get("k")

    agent, rt, _ = scripted_agent(
        [[PlannedCall("write", {}), PlannedCall("read", {}), final("ok")]],
        tools=[FakeTool("write", fn=write), FakeTool("read", fn=read)],
        suspension=False,
    )
    await run(agent)
    assert rt.outcomes[1] == ResumeValue("v1")


@pytest.mark.parametrize("signal", ["escalate", "skip_summarization", "transfer_to_agent"])
async def test_terminal_tool_signal_ends_the_run(signal: str) -> None:
    def press(args, ctx):
        setattr(ctx.actions, signal, "elsewhere" if signal == "transfer_to_agent" else True)
        ctx.state["pressed"] = True

    after_agent_calls: list[int] = []
    agent, rt, _ = scripted_agent(
        [[PlannedCall("panic_button", {}), final("unreached")]],
        tools=[FakeTool("panic_button", fn=press)],
        after_agent=lambda ctx: after_agent_calls.append(1),
    )
    events = await run_direct(agent, state={})
    last = events[-1]
    assert getattr(last.actions, signal) == ("elsewhere" if signal == "transfer_to_agent" else True)
    assert last.content is None
    assert last.actions.state_delta["pressed"] is True
    assert all(e.text != "unreached" for e in events)
    assert rt.outcomes == []  # the script was never resumed
    assert after_agent_calls == []


async def test_escalation_clears_the_turn_slot_in_the_session() -> None:
    tool = FakeTool("panic_button", fn=lambda a, c: setattr(c.actions, "escalate", True))
    agent, _, _ = scripted_agent([[PlannedCall("panic_button", {}), final("unreached")]], tools=[tool])
    events, _session, service = await run(agent)
    assert events[-1].actions.escalate is True
    assert intents_of(service) == ["panic_button"]
    assert await slot_of(service) is None


async def test_escalation_on_long_running_ends_the_run_before_suspending() -> None:
    tool = FakeTool("panic_lr", fn=lambda a, c: setattr(c.actions, "escalate", True), is_long_running=True)
    agent, rt, _ = scripted_agent([[PlannedCall("panic_lr", {}), final("unreached")]], tools=[tool])
    events, _session, service = await run(agent)
    assert events[-1].actions.escalate is True
    assert all(e.long_running_tool_ids == [] for e in events)
    assert await slot_of(service) is None
    assert rt.outcomes == []


# --------------------------------------------------------------------- long-running and confirmation (first run)


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
    assert last.actions.requested_tool_confirmations == {
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


# --------------------------------------------------------------------- agent-level callbacks


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


# --------------------------------------------------------------------- conversation seeding


async def test_default_include_contents_seeds_conversation_history() -> None:
    history = [
        Event(author="user", content=Content.from_text("q1")),
        Event(author="coder", content=Content.from_text("a1", "model")),
    ]
    agent, _, model = scripted_agent([[final("a2")]])
    await run_direct(agent, message="q2", history=history)
    contents = model.requests[0].contents
    assert [(c.role, c.text) for c in contents] == [("user", "q1"), ("model", "a1"), ("user", "q2")]


async def test_include_contents_none_excludes_history() -> None:
    history = [
        Event(author="user", content=Content.from_text("q1")),
        Event(author="coder", content=Content.from_text("a1", "model")),
    ]
    agent, _, model = scripted_agent([[final("a2")]], include_contents="none")
    await run_direct(agent, message="q2", history=history)
    assert texts(model.requests[0].contents) == ["q2"]


async def test_history_through_the_runner_holds_each_message_once() -> None:
    agent, _, model = scripted_agent([[final("a1")], [final("a2")]])
    _, _, service = await run(agent, message="q1")
    await run(agent, service=service, message="q2")
    assert [(c.role, c.text) for c in model.requests[1].contents] == [("user", "q1"), ("model", "a1"), ("user", "q2")]


# --------------------------------------------------------------------- output schema and output key


async def test_output_key_stores_final_result_in_state() -> None:
    agent, _, _ = scripted_agent([[final({"answer": 42})]], output_key="result")
    events, session, _ = await run(agent)
    assert events[-1].actions.state_delta["result"] == {"answer": 42}
    assert session.state["result"] == {"answer": 42}


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


async def test_output_schema_accepts_a_conforming_final_result() -> None:
    agent, _, _ = scripted_agent([[final({"answer": "hi"})]], output_schema=SCHEMA)
    events, _, _ = await run(agent)
    assert len(events) == 1
    assert "hi" in events[0].text


async def test_output_schema_correction_retries_then_succeeds() -> None:
    agent, _, model = scripted_agent(
        [[PlannedComplete({"type": "final_result", "value": {"wrong": 1}}, "dbg\n")], [final({"answer": "hi"})]],
        output_schema=SCHEMA,
    )
    events, _, _ = await run(agent)
    assert events[-1].text == '{\n  "answer": "hi"\n}'
    assert len(model.requests) == 2
    feedback = texts(model.requests[1].contents)
    assert feedback[-2].startswith("Error during execution:\nfinal_result did not match the required schema: ")
    assert feedback[-2].endswith(". Return a conforming final_result.")
    assert "'answer' is a required property" in feedback[-2]
    assert feedback[-1] == "Output (stdout):\ndbg\n"


async def test_output_schema_errors_after_max_retries() -> None:
    bad = final({"wrong": 1})
    agent, _, model = scripted_agent([[bad], [bad]], output_schema=SCHEMA, output_max_retries=1)
    events, _, _ = await run(agent)
    assert events[-1].error_code == "codeact.output_schema"
    assert "schema validation" in events[-1].error_message
    assert len(model.requests) == 2

    agent, _, model = scripted_agent([[bad]], output_schema=SCHEMA, output_max_retries=0)
    events, _, _ = await run(agent)
    assert events[-1].error_code == "codeact.output_schema"
    assert len(model.requests) == 1


class Answer(BaseModel):
    answer: str


async def test_output_type_enforces_a_derived_schema() -> None:
    agent, _, model = scripted_agent([[final({"answer": 5})], [final({"answer": "hi"})]], output_schema=Answer)
    events, _, _ = await run(agent)
    assert events[-1].text == '{\n  "answer": "hi"\n}'
    assert len(model.requests) == 2
    assert "did not match the required schema" in model.requests[1].contents[-1].text


# --------------------------------------------------------------------- transfer


async def test_transfer_to_valid_target_ends_loop_with_transfer_event() -> None:
    billing, support = TextAgent(name="billing", reply="billing here"), TextAgent(name="support")
    agent, _, _ = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "billing"})]], sub_agents=[billing, support]
    )
    events, _, _ = await run(agent)
    transfer = events[0]
    assert transfer.author == "coder"
    assert transfer.actions.transfer_to_agent == "billing"
    assert transfer.content is None
    # the runner hands over to the sub-agent
    assert (events[-1].author, events[-1].text) == ("billing", "billing here")


async def test_unknown_transfer_target_feeds_error_then_model_retries() -> None:
    agent, _, model = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "ghost"})], [final("done")]],
        sub_agents=[TextAgent(name="billing"), TextAgent(name="support")],
    )
    events, _, _ = await run(agent)
    assert all(e.actions.transfer_to_agent is None for e in events)
    assert len(model.requests) == 2
    assert (
        model.requests[1].contents[-1].text
        == "Error during execution:\ncannot transfer to 'ghost'; valid agents: billing, support"
    )
    assert events[-1].text == "done"


async def test_transfer_skips_after_agent_callbacks() -> None:
    agent, _, _ = scripted_agent(
        [[PlannedComplete({"type": "transfer_to_agent", "agent_name": "child"})]],
        sub_agents=[TextAgent(name="child")],
        after_agent=lambda ctx: "after-done",
    )
    events = await run_direct(agent)
    assert [e.actions.transfer_to_agent for e in events] == ["child"]


def transfer_program(*names: str) -> list[list[PlannedComplete]]:
    return [[PlannedComplete({"type": "transfer_to_agent", "agent_name": n})] for n in names]


async def test_run_merges_sub_agents_and_runner_targets() -> None:
    agent, _, model = scripted_agent(transfer_program("peer"), sub_agents=[TextAgent(name="child")])
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert events[-1].actions.transfer_to_agent == "peer"
    assert "child, boss, peer" in model.requests[0].system_instruction


async def test_disallow_transfer_to_parent_filters_only_the_parent() -> None:
    agent, _, model = scripted_agent(transfer_program("boss", "peer"), disallow_transfer_to_parent=True)
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert len(model.requests) == 2
    assert "cannot transfer to 'boss'; valid agents: peer" in model.requests[1].contents[-1].text
    assert events[-1].actions.transfer_to_agent == "peer"


async def test_disallow_transfer_to_peers_filters_peers_but_keeps_parent() -> None:
    agent, _, model = scripted_agent(transfer_program("peer", "boss"), disallow_transfer_to_peers=True)
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert "cannot transfer to 'peer'; valid agents: boss" in model.requests[1].contents[-1].text
    assert events[-1].actions.transfer_to_agent == "boss"


async def test_disallow_flags_do_not_filter_sub_agents() -> None:
    agent, _, model = scripted_agent(
        transfer_program("child"),
        sub_agents=[TextAgent(name="child")],
        disallow_transfer_to_peers=True,
        disallow_transfer_to_parent=True,
    )
    events = await run_direct(agent, run_config=RunConfig(transfer_targets=["boss", "peer"], parent_agent="boss"))
    assert events[-1].actions.transfer_to_agent == "child"
    assert len(model.requests) == 1


# --------------------------------------------------------------------- the same paths on real runtimes


def monty_agent(replies: list[str], tools: list, **kwargs) -> tuple[CodeActAgent, ScriptedModel]:
    model = ScriptedModel(replies)
    return CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=tools, **kwargs), model


async def test_monty_final_result() -> None:
    agent, _model = monty_agent([final_reply({"answer": 42})], [])
    events, _, _ = await run(agent)
    assert [e.text for e in events] == ['{\n  "answer": 42\n}']


async def test_monty_inline_tool_with_journal_and_observation() -> None:
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    agent, model = monty_agent(
        [
            fence('s = call_tool("add", {"a": 40, "b": 2})\nprint("sum", s)\n{"type": "observation", "value": s}'),
            fence('{"type": "final_result", "value": "42"}'),
        ],
        [add],
    )
    events, _, service = await run(agent)
    assert intents_of(service) == ["add"]
    assert outcomes_of(service) == [{"v": 42}]
    assert texts(model.requests[1].contents)[-2:] == ["Observation:\n42", "Output (stdout):\nsum 42\n"]
    assert events[-1].text == "42"


async def test_monty_tool_failure_keeps_its_type_and_is_catchable() -> None:
    def boom() -> None:
        raise ValueError("not_found")

    script = (
        'try:\n    call_tool("boom")\n    r = "no"\nexcept ValueError as e:\n    r = "caught " + str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [boom])
    events, _, _ = await run(agent)
    assert events[-1].text == "caught not_found"


async def test_monty_unknown_tool_raises_lookup_error() -> None:
    script = (
        'try:\n    call_tool("nope", {})\nexcept LookupError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [FakeTool("echo")])
    events, _, _ = await run(agent)
    assert events[-1].text == "tool 'nope' is not available; available tools: echo"


async def test_monty_tool_timeout_raises_timeout_error() -> None:
    async def sleepy(args, ctx):
        await anyio.sleep(5)

    script = (
        'try:\n    call_tool("sleeper", {})\nexcept TimeoutError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    agent, _ = monty_agent([fence(script)], [FakeTool("sleeper", fn=sleepy)], tool_timeout=0.02)
    with anyio.fail_after(3):
        events, _, _ = await run(agent)
    assert events[-1].text == "tool 'sleeper' timed out after 0.02 s"


async def test_monty_denied_call_raises_permission_error() -> None:
    script = (
        'try:\n    call_tool("delete_file", {"path": "/x"})\nexcept PermissionError as e:\n    r = str(e)\n'
        '{"type": "final_result", "value": r}'
    )
    delete = FakeTool("delete_file")
    agent, _ = monty_agent([fence(script)], [delete], require_tool_confirmation=["delete_file"])
    events = await run_direct(
        agent, invocation_id="i", run_config=RunConfig(tool_confirmation_decisions={"i:1:0": "deny"})
    )
    assert events[-1].text == "call to 'delete_file' was denied by a human reviewer"
    assert delete.calls == []


async def test_monty_script_error_is_fed_back_with_a_traceback() -> None:
    agent, model = monty_agent([fence('print("before")\nd = {"items": []}\nd["itms"]'), final_reply("fixed")], [])
    events, _, _ = await run(agent)
    assert events[-1].text == "fixed"
    feedback = texts(model.requests[1].contents)
    assert feedback[-2].startswith("Error during execution:\nTraceback (most recent call last):\n")
    assert "line 3" in feedback[-2]
    assert "KeyError" in feedback[-2] and "itms" in feedback[-2]
    assert feedback[-1] == "Output (stdout):\nbefore\n"


async def test_cpython_runtime_rejects_confirmation_and_runs_long_running_inline() -> None:
    script = (
        "out = {}\n"
        'out["handle"] = call_tool("slow", {})\n'
        "try:\n"
        '    call_tool("delete_file", {})\n'
        "except PermissionError as e:\n"
        '    out["denied"] = str(e)\n'
        '{"type": "final_result", "value": out}'
    )
    slow = FakeTool("slow", {"status": "pending", "task_id": "t1"}, is_long_running=True)
    delete = FakeTool("delete_file")
    model = ScriptedModel([fence(script)])
    agent = CodeActAgent(
        name="coder",
        model=model,
        runtime=CPythonRuntime(),
        tools=[slow, delete],
        require_tool_confirmation=["delete_file"],
    )
    events, _, _ = await run(agent)
    assert len(events) == 1
    import json

    value = json.loads(events[-1].text)
    assert value["handle"] == {"status": "pending", "task_id": "t1"}
    assert "'delete_file' requires confirmation" in value["denied"]
    assert "cannot pause" in value["denied"]
    assert delete.calls == []
    assert len(slow.calls) == 1
