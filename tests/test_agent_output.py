"""The final result's destination and shape: ``output_key``, ``output_schema`` with its
correction retries, and ``output_type``."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent_helpers import fence, final, final_reply, run, scripted_agent, texts
from codeact.testing import PlannedComplete

pytestmark = pytest.mark.anyio


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


@pytest.mark.parametrize(
    "ending",
    [
        '{"type": "observation", "value": {"n": 10 ** 5000}}',
        '{"type": "final_result", "value": [1, 10 ** 5000]}',
        "10 ** 5000",  # not a tagged dict, and too long to preview
    ],
)
async def test_an_int_too_long_for_text_is_fed_back_and_the_run_goes_on(ending: str) -> None:
    from codeact import CodeActAgent, MontyRuntime, ScriptedModel

    model = ScriptedModel([fence(ending), final_reply("second")])
    agent = CodeActAgent(name="a", model=model, runtime=MontyRuntime(), max_iterations=3)
    events, _, _ = await run(agent)
    assert "second" in events[-1].text
    fed_back = model.requests[1].contents[-1].text
    assert "digits" in fed_back and "x.bit_length()" in fed_back


ROWS_SCHEMA = {
    "type": "array",
    "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


async def test_schema_feedback_for_many_errors_stays_within_max_error_chars() -> None:
    """A 2,000-row output with every row wrong: the count and the first few rows by path,
    within ``max_error_chars``, not 2,000 errors (161 KB before)."""
    bad = final([{"n": "x"} for _ in range(2000)])
    agent, _, model = scripted_agent([[bad], [final([{"n": 1}])]], output_schema=ROWS_SCHEMA, max_error_chars=4000)
    await run(agent)
    feedback = next(t for t in texts(model.requests[1].contents) if "required schema" in t)
    assert len(feedback) <= 4000
    assert "2000 errors (the first 5 by path): 0/n: 'x' is not of type 'integer'" in feedback
    assert "4/n:" in feedback and "5/n:" not in feedback and "and 1995 more" in feedback
