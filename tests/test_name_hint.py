"""The tool hint on NameError ("Tools are not Python functions here ...") fires only for
names that look like tool calls: a called name that is neither a Python builtin nor
``final_answer`` (Monty 1.4 asks the host for undefined names; see engine.rs)."""

from __future__ import annotations

import pytest

from codeact import MontyRuntime
from conftest import expect_raised, last_line, start

HINT = "Tools are not Python functions"


@pytest.fixture(scope="module")
def rt() -> MontyRuntime:
    return MontyRuntime(check_scripts=False, rewrite_scripts=False)


@pytest.mark.parametrize("script", ["search_web('cats')", "x = fetch_cart(user_id='u')", "[lookup(1)]"])
def test_a_called_unknown_name_gets_the_hint(rt: MontyRuntime, script: str) -> None:
    raised = expect_raised(start(rt, script))
    assert last_line(raised.message).startswith("NameError") and HINT in raised.message


@pytest.mark.parametrize(
    "script",
    ["final_answer(42)", "dir([])", "breakpoint()", "input('x')", "undefined_variable + 1", "f = call_tool\nf"],
)
def test_builtins_final_answer_and_bare_names_get_a_plain_name_error(rt: MontyRuntime, script: str) -> None:
    raised = expect_raised(start(rt, script))
    assert last_line(raised.message).startswith("NameError"), raised.message
    assert HINT not in raised.message


def test_object_is_monty_s_own_type_error_not_a_tool_hint(rt: MontyRuntime) -> None:
    raised = expect_raised(start(rt, "o = object()"))
    assert last_line(raised.message).startswith("TypeError") and HINT not in raised.message
