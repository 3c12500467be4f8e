"""``MontyRuntime(tool_style="functions")``: tools as Python functions (SPEC §3, issue 5)."""

from __future__ import annotations

import pytest

from agent_helpers import fence, final_event, run
from codeact import CodeActAgent, Complete, MontyRuntime, Raised, ScriptedModel
from codeact.runtime import Call, ResumeValue, bind_call_args
from codeact.runtime.monty import final_answer_step
from codeact.tools import FunctionTool

pytestmark = pytest.mark.anyio


def add(a: int, b: int, scale: int = 1) -> int:
    """Adds two numbers, then scales the sum."""
    return (a + b) * scale


def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


TOOLS = [FunctionTool(add), FunctionTool(lookup)]


def functions_rt() -> MontyRuntime:
    return MontyRuntime(tool_style="functions")


def agent_with(replies: list[str], tools=TOOLS) -> tuple[CodeActAgent, ScriptedModel]:
    model = ScriptedModel(replies)
    return CodeActAgent(name="coder", model=model, runtime=functions_rt(), tools=list(tools)), model


# ------------------------------------------------------------------ binding


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("add(1, 2)", {"a": 1, "b": 2}),
        ("add(a=1, b=2)", {"a": 1, "b": 2}),
        ("add(1, b=2, scale=3)", {"a": 1, "b": 2, "scale": 3}),
        ("add(1, 2, 3)", {"a": 1, "b": 2, "scale": 3}),
    ],
)
def test_positional_keyword_and_mixed_calls_bind(call: str, args: dict) -> None:
    step = functions_rt().start(call)
    assert isinstance(step, Call)
    bound = bind_call_args(TOOLS[0], step.call.positional_args, step.call.keyword_args)
    assert bound == args


@pytest.mark.parametrize(
    ("call", "value"),
    [("add(1, 2)", 3), ("add(a=1, b=2)", 3), ("add(1, b=2, scale=3)", 9), ("lookup('x')", "X")],
)
async def test_the_agent_runs_bare_calls(call: str, value: object) -> None:
    agent, _ = agent_with([fence(f'r = {call}\n{{"type": "final_result", "value": r}}')])
    events, _session, _ = await run(agent)
    assert final_event(events).text == str(value)


async def test_wrong_arity_is_a_corrective_error_raised_into_the_script() -> None:
    script = 'try:\n    add(1, 2, 3, 4)\nexcept TypeError as e:\n    r = str(e)\n{"type": "final_result", "value": r}'
    agent, _ = agent_with([fence(script)])
    events, _session, _ = await run(agent)
    text = final_event(events).text
    assert "at most 3 positional argument(s) (a, b, scale) but 4 were given" in text


async def test_a_parameter_given_twice_is_a_corrective_error() -> None:
    script = 'try:\n    add(1, a=2)\nexcept TypeError as e:\n    r = str(e)\n{"type": "final_result", "value": r}'
    agent, _ = agent_with([fence(script)])
    events, _session, _ = await run(agent)
    assert "multiple values for argument 'a'" in final_event(events).text


async def test_uncaught_wrong_arity_is_fed_back_to_the_model() -> None:
    agent, model = agent_with([fence("add(1, 2, 3, 4)"), fence('{"type": "final_result", "value": "ok"}')])
    events, _session, _ = await run(agent)
    assert final_event(events).text == "ok"
    fed_back = model.requests[1].contents[-1].text
    assert "TypeError" in fed_back and "positional" in fed_back


# ------------------------------------------------------------------ final_answer


async def test_final_answer_ends_the_script_with_a_final_result() -> None:
    agent, model = agent_with([fence("x = add(2, 3)\nfinal_answer(x)\nprint('never')")])
    events, _session, _ = await run(agent)
    assert final_event(events).text == "5"
    assert len(model.requests) == 1


async def test_final_answer_keyword_form() -> None:
    agent, _ = agent_with([fence("final_answer(answer='done')")])
    events, _session, _ = await run(agent)
    assert final_event(events).text == "done"


async def test_final_answer_with_two_arguments_is_a_corrective_error() -> None:
    script = (
        'try:\n    final_answer(1, 2)\nexcept TypeError as e:\n    r = str(e)\n{"type": "final_result", "value": r}'
    )
    agent, _ = agent_with([fence(script)])
    events, _session, _ = await run(agent)
    assert "final_answer(value)" in final_event(events).text


async def test_a_tool_named_final_answer_wins() -> None:
    def final_answer(answer: str) -> str:
        """A real tool of that name."""
        return "tool:" + answer

    tools = [*TOOLS, FunctionTool(final_answer)]
    agent, _ = agent_with([fence('r = final_answer("x")\n{"type": "final_result", "value": r}')], tools)
    events, _session, _ = await run(agent)
    assert final_event(events).text == "tool:x"


async def test_final_answer_is_not_a_synonym_in_the_call_tool_style() -> None:
    model = ScriptedModel([fence("final_answer(1)"), fence('{"type": "final_result", "value": "ok"}')])
    agent = CodeActAgent(name="coder", model=model, runtime=MontyRuntime(), tools=list(TOOLS))
    events, _session, _ = await run(agent)
    assert final_event(events).text == "ok"
    assert "NameError" in model.requests[1].contents[-1].text


def test_final_answer_step() -> None:
    assert final_answer_step((3,), {}) == Complete({"type": "final_result", "value": 3})
    assert final_answer_step((), {"answer": 3}) == Complete({"type": "final_result", "value": 3})
    assert not isinstance(final_answer_step((), {}), Complete)


def test_call_tool_still_works_in_the_functions_style() -> None:
    step = functions_rt().start('call_tool("fetch-cart", {"id": 1})')
    assert isinstance(step, Call)
    assert step.call.name == "fetch-cart" and step.call.keyword_args == {"id": 1}
    done = step.call.resume(ResumeValue("cart"))
    assert isinstance(done, Complete) and done.value == "cart"


# ------------------------------------------------------------------ rendering


def test_each_tool_renders_as_a_signature_with_its_docstring() -> None:
    text = functions_rt().render_tools(TOOLS)
    assert "def add(a: int, b: int, scale: int = 1) -> int:" in text  # the real default and return type
    assert "Adds two numbers, then scales the sum." in text
    assert "def lookup(key: str) -> str:" in text
    compile(text, "<tools>", "exec")  # valid Python


def test_non_identifier_tool_names_are_offered_through_call_tool() -> None:
    class Odd:
        name = "fetch-cart"
        description = "Fetches a cart."
        parameters = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
        is_long_running = False

    text = functions_rt().render_tools([*TOOLS, Odd()])  # type: ignore[list-item]
    assert 'call_tool("fetch-cart", {"id": <int>})' in text
    assert "def fetch-cart" not in text


def test_the_prompt_names_final_answer_in_the_functions_style_only() -> None:
    assert "final_answer(value)" in functions_rt().capabilities().prompt
    assert "final_answer(value)" not in MontyRuntime().capabilities().prompt


def test_an_unknown_tool_style_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_style"):
        MontyRuntime(tool_style="nope")  # type: ignore[arg-type]


def test_raised_for_unknown_bare_name_lookup() -> None:
    step = functions_rt().start("f = add\nf(1, 2)")
    assert isinstance(step, Raised) and "NameError" in step.message
