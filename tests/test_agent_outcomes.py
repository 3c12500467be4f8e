"""The CodeAct turn loop's basic outcomes (reference §6–17, acceptance list §19.1): final
results and observations, what is fed back to the model (stdout, script errors, malformed
results, replies without code) and the iteration limit; on ``ScriptedRuntime`` +
``ScriptedModel``."""

from __future__ import annotations

import pytest

from agent_helpers import (
    FakeTool,
    fence,
    final,
    final_event,
    final_reply,
    journal_of,
    observation,
    run,
    scripted_agent,
    slot_of,
    texts,
)
from codeact import PENDING_STATE_KEY, CodeActAgent, ResumeValue, ScriptedModel
from codeact.agent import NO_CODE_FEEDBACK
from codeact.testing import PlannedCall, PlannedComplete, PlannedRaise, ScriptedRuntime

pytestmark = pytest.mark.anyio


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
