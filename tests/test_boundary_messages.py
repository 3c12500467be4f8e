"""A value that cannot cross the boundary is named by its own type in the message the model
reads: an exception in a ``final_result`` or a tool argument is "an IndexError", "a KeyError",
not "a Exception" (issue 48); on the real interpreter."""

from __future__ import annotations

import pytest

from codeact import Call, MontyRuntime, Raised, ResumeValue, ValueConversionError

CAUGHT = {
    "IndexError": ("[][3]", "an IndexError (IndexError('list index out of range'))"),
    "KeyError": ("{}['sku']", "a KeyError (KeyError('sku'))"),
    "ZeroDivisionError": ("1 / 0", "a ZeroDivisionError (ZeroDivisionError('division by zero'))"),
    "ValueError": ("int('x')", "a ValueError (ValueError(\"invalid literal for int() with base 10: 'x'\"))"),
}


def caught(expression: str, error: str) -> str:
    return f"try:\n    {expression}\nexcept {error} as e:\n    err = e\n"


@pytest.mark.parametrize("error", list(CAUGHT))
def test_an_exception_in_a_final_result_is_named_by_its_type(error: str) -> None:
    expression, named = CAUGHT[error]
    step = MontyRuntime().start(caught(expression, error) + '{"type": "final_result", "value": {"error": err}}')
    assert isinstance(step, Raised)
    assert step.message.startswith("TypeError: the script's last expression must be plain data: ")
    assert f"['value']['error'] is {named}, which cannot cross the boundary" in step.message


def test_an_exception_made_without_an_argument_is_named_by_its_type() -> None:
    step = MontyRuntime().start('{"type": "observation", "value": [RuntimeError()]}')
    assert isinstance(step, Raised)
    assert "['value'][0] is a RuntimeError (RuntimeError()), which cannot cross the boundary" in step.message


@pytest.mark.parametrize("error", list(CAUGHT))
def test_an_exception_passed_to_a_tool_is_named_by_its_type_and_the_tool_does_not_run(error: str) -> None:
    expression, named = CAUGHT[error]
    script = caught(expression, error) + 'call_tool("report", {"problem": err})'
    step = MontyRuntime().start(script)
    assert not isinstance(step, Call)  # the tool is never asked for
    assert isinstance(step, Raised)
    assert f"tool 'report' got a value it cannot take: argument 'problem' is {named}" in step.message


def test_an_exception_a_tool_returns_is_named_by_its_type() -> None:
    step = MontyRuntime().start('r = call_tool("lookup")\n{"type": "observation", "value": r}')
    assert isinstance(step, Call)
    with pytest.raises(ValueConversionError, match="value is a ValueError, which cannot cross the boundary"):
        step.call.resume(ResumeValue(ValueError("no such order")))
