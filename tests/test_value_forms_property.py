"""Property test of issue 46 item 1: no value wedges a session. Values are built inside Monty
from generated source (non-string keys of every plain kind, NaN and infinities, huge ints,
bytes, nesting up to the depth limit, lone surrogates) and pushed, as a script result, an
observation, a final answer with and without ``output_schema``, a tool argument and printed
output, through the ``Runner`` (SQLite file), the pydantic-ai ``CodeActToolset``,
``codeact run --json`` and the DBOS worker's request and result: never a foreign exception,
never a turn left ``running``, and a value that arrives arrives exactly.

Bounded for CI: ``CODEACT_PROPERTY_EXAMPLES`` (default 10) examples per test.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_helpers import APP, SESSION, USER, fence
from codeact import CodeActAgent, FunctionTool, MontyRuntime, Runner, ScriptedModel, SqliteSessionService
from codeact._values import MAX_DEPTH, decode_value, encode_value, readable
from codeact.agent import render_final
from codeact.agent._namespace import _literal

EXAMPLES = int(os.environ.get("CODEACT_PROPERTY_EXAMPLES", "10"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

# ---------------------------------------------------------------------- values


def huge(digits: int) -> int:
    """An int of about ``abs(digits)`` digits, negative for a negative count."""
    return 10 ** abs(digits) * (1 if digits > 0 else -1)


def _not_nan(value: Any) -> bool:
    return not (isinstance(value, float) and math.isnan(value))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([50, -400, 4400, 5000]).map(huge),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "a\udfffb"]),
    st.binary(max_size=6),
)
hashables = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(tuple), st.frozensets(inner.filter(_not_nan), max_size=3)),
    max_leaves=6,
)


shallow = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(hashables.filter(_not_nan), inner, max_size=3),
        st.sets(hashables.filter(_not_nan), max_size=3),
    ),
    max_leaves=10,
)


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """A value nested ``MAX_DEPTH`` - 3 to ``MAX_DEPTH`` + 1 levels (the limit's both sides)."""
    value: Any = draw(scalars)
    for _ in range(draw(st.integers(MAX_DEPTH - 3, MAX_DEPTH + 1))):
        kind = draw(st.sampled_from(["list", "tuple", "dict", "key"]))
        value = {"list": [value], "tuple": (value,), "dict": {"k": value}}.get(kind, {(1,): value})
    return value


values = st.one_of(shallow, shallow, deep())


def source(value: Any) -> str:
    """Monty source that builds ``value``."""
    return _literal(value)


_UNBUILT = object()


def built(literal: str) -> Any:
    """The value Monty builds from ``literal`` (a lone surrogate becomes U+FFFD there: its
    strings are UTF-8), or ``_UNBUILT`` when it cannot cross (too deep, an int too long)."""
    from codeact.runtime import ScriptError

    try:
        return MontyRuntime().run(literal).value
    except ScriptError:
        return _UNBUILT
    except Exception:  # a host error is what this test looks for: let the paths below meet it
        return _UNBUILT


def form(value: Any) -> str:
    """A comparable form of a value (NaN equals NaN; sets in a stable order)."""
    try:
        return json.dumps(encode_value(value))
    except ValueError:  # too deep for the JSON form
        return readable(value)


# ---------------------------------------------------------------------- through the runner


def echo(x: Any) -> Any:
    """Returns x."""
    return x


ECHO = FunctionTool(echo, name="echo")


def scripts(literal: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each way a value reaches the agent: the script, and the agent's extra options."""
    final = '{"type": "final_result", "value": v}'
    return {
        "final": (f"v = {literal}\n{final}", {}),
        "final_schema": (f"v = {literal}\n{final}", {"output_schema": {}, "output_key": "answer"}),
        "observation": (f'v = {literal}\n{{"type": "observation", "value": v}}', {}),
        "argument": (f'v = call_tool("echo", {{"x": {literal}}})\n{final}', {"tools": [ECHO]}),
        "printed": (f'print({literal})\n{{"type": "final_result", "value": "printed"}}', {}),
        "bare": (f"{literal}", {}),
    }


async def state(service: SqliteSessionService) -> dict[str, Any]:
    session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
    assert session is not None
    return session.state


async def through_runner(folder: Path, value: Any) -> None:
    literal = source(value)
    value = built(literal)
    for how, (script, options) in scripts(literal).items():
        model = ScriptedModel([fence(script), fence('{"type": "final_result", "value": "next"}')] * 2)
        agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), max_iterations=3, **options)
        service = SqliteSessionService(folder / f"{how}.db")
        runner = Runner(app_name=APP, agent=agent, session_service=service)
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        events = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="go")]
        info = await runner.turn_info(user_id=USER, session_id=SESSION)
        assert info is None, (how, info)
        finals = [e for e in events if e.is_final_response()]
        assert finals, how
        if how in ("final", "final_schema", "argument") and not finals[-1].error_code:
            text = finals[-1].text or ""
            if value is _UNBUILT:
                pass  # fed back to the model as an error; the turn went on
            elif isinstance(value, str):  # a string answer is its own text
                assert text in (render_final(value), "next"), how
            elif text != "next":  # the value arrived: exactly
                assert form(decode_value(json.loads(text))) == form(value), how
        if how == "final_schema" and value is not _UNBUILT and "answer" in (session_state := await state(service)):
            assert form(session_state["answer"]) in (form(value), form("next")), how
        # a later message works
        later = [e async for e in runner.run_async(user_id=USER, session_id=SESSION, new_message="more")]
        assert any(e.is_final_response() for e in later), how
        assert await runner.turn_info(user_id=USER, session_id=SESSION) is None


@SETTINGS
@given(values)
def test_values_never_wedge_the_runner(value: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(through_runner, Path(folder), value)


# ---------------------------------------------------------------------- pydantic-ai


async def through_toolset(code: str) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import FunctionToolset

    from codeact.integrations.pydantic_ai import CodeActToolset

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": code}, tool_call_id="c0")])
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        part = last.parts[-1]
        assert isinstance(part, ToolReturnPart | RetryPromptPart)
        return ModelResponse(parts=[TextPart(f"done: {str(part.content)[:50]}")])

    inner = FunctionToolset()
    inner.add_function(echo, name="echo")
    result = await Agent(FunctionModel(reply), toolsets=[CodeActToolset(inner)]).run("go")
    return str(result.output)


@SETTINGS
@given(values)
def test_values_never_break_the_pydantic_ai_toolset(value: Any) -> None:
    literal = source(value)
    for code in (literal, f"print({literal})", f'call_tool("echo", {{"x": {literal}}})'):
        assert anyio.run(through_toolset, code).startswith("done: ")


# ---------------------------------------------------------------------- codeact run --json


@SETTINGS
@given(values)
def test_values_never_break_run_json(value: Any) -> None:
    from typer.testing import CliRunner

    from codeact.cli import app

    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "s.py"
        for code in (source(value), f"print({source(value)})"):
            script.write_text(code + "\n", encoding="utf-8")
            result = CliRunner().invoke(app, ["run", str(script), "--json"])
            assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
            assert result.exit_code in (0, 1), result.output
            payload = json.loads(result.stdout)
            if payload["ok"] and code == source(value):
                assert form(decode_value(payload["value"])) == form(built(code))


# ---------------------------------------------------------------------- the DBOS worker


@SETTINGS
@given(shallow)
@example(math.inf)  # found by the property in CI: a request's JSON wrote it as null
@example({"k": [math.nan, -math.inf]})
def test_values_cross_the_dbos_request_and_result(value: Any) -> None:
    from codeact.integrations.dbos._protocol import TAGGED, PausedCall, RunRequest, RunResult

    try:
        encode_value(value)
    except ValueError:
        return  # too deep for the JSON form: refused before it is enqueued
    request = RunRequest(kind="complete", app_name=APP, user_id=USER, session_id=SESSION, run_key="k", value=value)
    raw = json.loads(json.dumps(request.model_dump(mode="json")))
    assert form(RunRequest.model_validate(raw, context=TAGGED).value) == form(value)
    result = RunResult(
        status="paused", paused=[PausedCall(call_key="c", tool="t", args={"x": value}, kind="completion")]
    )
    raw = json.loads(json.dumps(result.model_dump(mode="json")))
    assert form(RunResult.model_validate(raw, context=TAGGED).paused[0].args["x"]) == form(value)
