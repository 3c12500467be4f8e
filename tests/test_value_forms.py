"""Issue 46 item 1: no value wedges a session. A script value that plain JSON cannot hold (a
dict with tuple or frozenset keys, a tuple, a set, bytes, NaN, a huge int) is carried
losslessly where a Python value is returned or stored (the final answer, ``output_key``
state, the journal, checkpoints, ``codeact run --json``, the DBOS worker's request and
result), in the tagged form of ``codeact._values.encode_value``, and shown readably
where the model reads text (an observation reads ``{(1, 2): 3}``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import APP, SESSION, USER, fence, journal_of, run
from codeact import CodeActAgent, MontyRuntime, Runner, ScriptedModel, SqliteSessionService, ToolContext, tool
from codeact._values import decode_value, encode_value, readable
from codeact.agent import render_final
from codeact.agent._namespace import Namespace
from codeact.runtime import ResumeValue
from codeact.turns._codec import decode_outcome, encode_outcome

pytestmark = pytest.mark.anyio


def final_script(expr: str) -> str:
    return fence(f'{{"type": "final_result", "value": {expr}}}')


def observation_script(expr: str) -> str:
    return fence(f'{{"type": "observation", "value": {expr}}}')


def monty_agent(*replies: str, **kwargs: Any) -> tuple[CodeActAgent, ScriptedModel]:
    model = ScriptedModel(list(replies))
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), **kwargs)
    return agent, model


def final_text(events: list[Any]) -> str:
    finals = [e for e in events if e.is_final_response()]
    assert finals, [e.text for e in events]
    return str(finals[-1].text)


# ---------------------------------------------------------------------- the codec

ROUND_TRIP = [
    None,
    True,
    0,
    -(10**30),
    10**5000,
    1.5,
    "Zoë",
    "\ud800x",
    b"\x00\xff",
    [],
    (),
    (1,),
    {1, 2},
    frozenset({"a", (1, 2)}),
    {(1, 2): 3},
    {frozenset({1}): [b"x", (None,)]},
    {1: "a", "1": "b", False: 2, None: 3, 2.5: 4},
    {"$t": [1, 2]},
    {"$d": "literal"},
    [{"$b": "not bytes"}, {"$s": []}],
    {"a": {"$t": 1}, "b": (1,)},
    {"nested": [{(1, "a"): {"x": {2, 3}}}]},
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=lambda v: type(v).__name__)
def test_the_tagged_form_round_trips_through_json_text(value: Any) -> None:
    text = json.dumps(encode_value(value))
    back = decode_value(json.loads(text))
    assert back == value and type(back) is type(value)


def test_nan_and_infinities_round_trip() -> None:
    back = decode_value(json.loads(json.dumps(encode_value([math.nan, math.inf, -math.inf]))))
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("value", [{"a": [1, 2.5, None, True, "x"]}, [1, {"b": {}}], "text", 3, None], ids=repr)
def test_plain_json_is_written_as_it_is(value: Any) -> None:
    assert encode_value(value) is value


def test_the_journal_bytes_of_plain_and_tagged_values_are_unchanged() -> None:
    # The bytes earlier builds wrote: old journals still resume.
    assert encode_outcome(ResumeValue({"a": [1, 2]})) == b'{"v":{"a":[1,2]}}'
    assert encode_outcome(ResumeValue({"$t": [1]})) == b'{"v":{"$t":[1]}}'
    assert encode_outcome(ResumeValue((1, b"a"))) == b'{"x":{"$t":[1,{"$b":"YQ=="}]}}'
    assert encode_outcome(ResumeValue({(1, 2): {3}})) == b'{"x":{"$d":[[{"$t":[1,2]},{"$s":[3]}]]}}'
    assert decode_outcome({"x": {"$d": [[{"$t": [1, 2]}, {"$s": [3]}]]}}) == ResumeValue({(1, 2): {3}})


def test_readable_is_python_notation() -> None:
    assert readable({(1, 2): 3}) == "{(1, 2): 3}"
    assert readable({frozenset({2, 1}): {b"a", b"b"}, "k": (1,)}) == "{frozenset({1, 2}): {b'a', b'b'}, 'k': (1,)}"
    assert readable([math.nan, set(), frozenset()]) == "[nan, set(), frozenset()]"
    assert readable(10**5000).startswith("<int of about 5000 digits: 0x")
    deep: Any = 1
    for _ in range(500):
        deep = (deep,)
    assert readable(deep).startswith("((((")


def test_render_final_tags_what_json_cannot_hold() -> None:
    assert json.loads(render_final({(1, 2): 3})) == {"$d": [[{"$t": [1, 2]}, 3]]}
    assert render_final({"a": 1}) == '{\n  "a": 1\n}'
    assert render_final("\ud800") == "\\ud800"


# ---------------------------------------------------------------------- the agent


async def test_a_final_answer_with_tuple_keys_is_returned_losslessly(tmp_path: Path) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    agent, _ = monty_agent(final_script("{(1, 2): 3, frozenset([4]): b'x'}"), output_key="answer")
    events, session, _ = await run(agent, service=service)
    assert decode_value(json.loads(final_text(events))) == {(1, 2): 3, frozenset([4]): b"x"}
    assert session.state["answer"] == {(1, 2): 3, frozenset([4]): b"x"}
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    assert await runner.turn_info(user_id=USER, session_id=SESSION) is None


async def test_an_observation_with_tuple_keys_reads_as_python(tmp_path: Path) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    agent, model = monty_agent(observation_script("{(1, 2): 3}"), final_script("'done'"), final_script("'again'"))
    events, _, _ = await run(agent, service=service)
    assert final_text(events) == "done"
    seen = [p.text for c in model.requests[1].contents for p in c.parts if p.text]
    assert "Observation:\n{(1, 2): 3}" in seen
    # a later message works: nothing was left running
    events, _, _ = await run(agent, service=service, message="more")
    assert final_text(events) == "again"


async def test_a_tool_result_and_argument_with_tuple_keys_are_journaled(tmp_path: Path) -> None:
    seen: list[Any] = []

    @tool
    def pairs(counts: dict) -> dict:  # type: ignore[type-arg]
        """Echoes counts keyed by pairs."""
        seen.append(counts)
        return {(1, 2): counts["n"], ("a",): {1.5, 2.5}}

    service = SqliteSessionService(tmp_path / "s.db")
    agent, _ = monty_agent(
        final_script('call_tool("pairs", {"counts": {"n": (1, 2)}})'), tools=[pairs], output_key="answer"
    )
    _, session, _ = await run(agent, service=service)
    assert session.state["answer"] == {(1, 2): (1, 2), ("a",): {1.5, 2.5}}
    outcomes = [data for kind, _, data in journal_of(service) if kind == "outcome"]
    assert any("x" in o for o in outcomes)


async def test_recover_after_a_tagged_value_works(tmp_path: Path) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    agent, _ = monty_agent(final_script("{(1, 2): 3}"), final_script("'fine'"))
    await run(agent, service=service)
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    from codeact.exceptions import NoPendingCallError

    with pytest.raises(NoPendingCallError):  # nothing is in flight: the turn ended
        async for _ in runner.recover(user_id=USER, session_id=SESSION):
            pass
    events, _, _ = await run(agent, service=service, message="next")
    assert final_text(events) == "fine"


async def test_a_namespace_checkpoint_keeps_tuples_sets_and_non_str_keys() -> None:
    ns = Namespace(["def f(): pass"], {"counts": {(1, 2): 3}, "seen": {1, 2}, "t": (1, b"x")})
    back = Namespace.from_state(json.loads(json.dumps(ns.to_state())))
    assert back == ns
    old = Namespace.from_state({"definitions": [], "variables": {"x": {"$t": [1]}}})
    assert old.variables == {"x": {"$t": [1]}}  # a record from before: read as it was


async def test_persist_namespace_carries_a_counter_dict(tmp_path: Path) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    agent, _ = monty_agent(
        fence('counts = {(1, 2): 3}\n{"type": "observation", "value": len(counts)}'),
        final_script("counts"),
        persist_namespace=True,
    )
    events, _, _ = await run(agent, service=service)
    assert decode_value(json.loads(final_text(events))) == {(1, 2): 3}


# ---------------------------------------------------------------------- codeact run --json


def test_run_json_prints_the_value_tagged(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    script = tmp_path / "s.py"
    script.write_text("{(1, 2): 3, 'b': b'x', 'n': float('nan')}\n")
    result = CliRunner().invoke(app, ["run", str(script), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    value = decode_value(payload["value"])
    assert value[(1, 2)] == 3 and value["b"] == b"x" and math.isnan(value["n"])


# ---------------------------------------------------------------------- pydantic-ai


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # pydantic-ai's Agent runs on asyncio only
async def test_the_pydantic_ai_toolset_returns_a_tuple_keyed_value() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from codeact.integrations.pydantic_ai import CodeActToolset

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": "{(1, 2): 3}"}, tool_call_id="c0")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        assert isinstance(part, ToolReturnPart)
        return ModelResponse(parts=[TextPart(f"done: {part.content}")])

    agent = Agent(FunctionModel(reply), toolsets=[CodeActToolset(FunctionToolset())])
    result = await agent.run("go")
    assert result.output == "done: {'value': '{(1, 2): 3}', 'stdout': ''}"


# ---------------------------------------------------------------------- DBOS request and result


def test_the_dbos_request_and_result_carry_tagged_values() -> None:
    from codeact.integrations.dbos._protocol import TAGGED, PausedCall, RunRequest, RunResult

    request = RunRequest(
        kind="complete", app_name=APP, user_id=USER, session_id=SESSION, run_key="k", value={(1, 2): {b"x"}}
    )
    raw = json.loads(json.dumps(request.model_dump(mode="json")))
    assert RunRequest.model_validate(raw, context=TAGGED).value == {(1, 2): {b"x"}}
    result = RunResult(
        status="paused", paused=[PausedCall(call_key="c", tool="t", args={"p": (1, 2)}, kind="confirmation")]
    )
    raw = json.loads(json.dumps(result.model_dump(mode="json")))
    assert RunResult.model_validate(raw, context=TAGGED).paused[0].args == {"p": (1, 2)}


@pytest.mark.anyio
async def test_nan_and_infinities_in_state_are_stored_as_they_are(make_service: Any) -> None:
    """NaN and the infinities set by a tool, under ``output_key`` and in ``create_session``
    state read back as floats, on every store (they were stored as null)."""

    @tool
    def mark(tool_context: ToolContext) -> str:
        """Sets state x to NaN and y to a list holding infinity and a tuple."""
        tool_context.state["x"] = math.nan
        tool_context.state["y"] = [math.inf, (1, 2)]
        return "ok"

    service = make_service()
    await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state={"init": -math.inf})
    model = ScriptedModel([fence('call_tool("mark", {})\n{"type": "final_result", "value": float("inf")}')])
    agent = CodeActAgent(name="c", model=model, runtime=MontyRuntime(), tools=[mark], output_key="answer")
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go")]
    state = (await make_service().get_session(app_name=APP, user_id=USER, session_id=SESSION)).state
    assert math.isnan(state["x"])
    assert state["y"] == [math.inf, (1, 2)]
    assert state["answer"] == math.inf
    assert state["init"] == -math.inf
    assert decode_value({"$t": "abc"}) == {"$t": "abc"}  # a tag of the wrong shape is a plain dict
    assert decode_value({"$s": "ab"}) == {"$s": "ab"}
