"""CPythonRuntime: trusted scripts on CPython itself, no sandbox, no suspension (SPEC §3)."""

from __future__ import annotations

import pytest

from codeact import CodeRuntimeError, CPythonRuntime, ResumeError, ResumeValue, Tool
from conftest import expect_call, expect_complete, expect_raised, last_line


@pytest.fixture
def cpy() -> CPythonRuntime:
    return CPythonRuntime()


def test_tool_calls_are_resumed_in_place(cpy):
    script = (
        'cart = call_tool("fetch-cart", {"user_id": "u-42"})\n'
        'rate = call_tool("tax_rate", {"region": "CA"})\n'
        "cart * (1 + rate)"
    )
    call = expect_call(cpy.start(script, "agent")).call
    assert (call.name, call.positional_args, call.keyword_args) == ("fetch-cart", (), {"user_id": "u-42"})
    call = expect_call(call.resume(ResumeValue(100.0))).call
    assert (call.name, call.keyword_args) == ("tax_rate", {"region": "CA"})
    assert expect_complete(call.resume(ResumeValue(0.1))).value == pytest.approx(110.0)


def test_call_ids_are_distinct(cpy):
    first = expect_call(cpy.start('call_tool("a")\ncall_tool("b")', "agent")).call
    second = expect_call(first.resume(ResumeValue(None))).call
    assert first.call_id != second.call_id


def test_a_tool_without_arguments(cpy):
    assert expect_call(cpy.start('call_tool("ping")', "agent")).call.keyword_args == {}


def test_stdout_is_captured_per_step(cpy):
    step = expect_call(cpy.start('print("before")\nx = call_tool("t")\nprint("after", x)\nx', "agent"))
    assert step.stdout == "before\n"
    done = expect_complete(step.call.resume(ResumeValue(3)))
    assert (done.value, done.stdout) == (3, "after 3\n")


def test_stdout_does_not_leak_to_the_host(cpy, capsys):
    expect_complete(cpy.start('print("only for the model")\n1', "agent"))
    assert "only for the model" not in capsys.readouterr().out


def test_the_result_is_the_last_expression(cpy):
    assert expect_complete(cpy.start("x = 2\nx * 21", "agent")).value == 42
    assert expect_complete(cpy.start("x = 2", "agent")).value is None


def test_uncaught_error_is_raised_with_a_traceback(cpy):
    raised = expect_raised(cpy.start('print("partial")\ndef f():\n    raise ValueError("bad")\nf()', "agent"))
    assert raised.message.startswith("Traceback (most recent call last):")
    assert 'File "agent", line 4' in raised.message
    assert 'File "agent", line 3, in f' in raised.message
    assert last_line(raised.message) == "ValueError: bad"
    assert raised.stdout == "partial\n"
    assert "cpython.py" not in raised.message  # the runtime's own frames are dropped


@pytest.mark.parametrize("script", ["def (", "x = = 1", "if True\n    pass"])
def test_syntax_error_is_raised_not_an_exception(cpy, script):
    raised = expect_raised(cpy.start(script, "agent"))
    assert "SyntaxError" in last_line(raised.message)
    assert "agent" in raised.message


def test_tool_error_is_catchable_and_typed(cpy):
    script = 'try:\n    call_tool("risky")\nexcept KeyError as e:\n    r = "caught " + str(e)\nr'
    call = expect_call(cpy.start(script, "agent")).call
    assert expect_complete(call.resume(ResumeError("nope", "KeyError"))).value == "caught 'nope'"


@pytest.mark.parametrize("exc_type", ["NoSuchError", "KeyboardInterrupt", "SystemExit", "print"])
def test_a_non_exception_error_type_falls_back_to_runtime_error(cpy, exc_type):
    call = expect_call(cpy.start('call_tool("risky")', "agent")).call
    assert last_line(expect_raised(call.resume(ResumeError("boom", exc_type))).message) == "RuntimeError: boom"


def test_does_not_support_suspension(cpy):
    assert cpy.capabilities().supports_suspension is False
    assert "call_tool" in cpy.capabilities().prompt


def test_dump_raises_code_runtime_error(cpy):
    call = expect_call(cpy.start('x = call_tool("t")\nx', "agent")).call
    with pytest.raises(CodeRuntimeError):
        call.dump()
    assert expect_complete(call.resume(ResumeValue(1))).value == 1


def test_resume_from_bytes_raises_code_runtime_error(cpy):
    with pytest.raises(CodeRuntimeError):
        cpy.resume(b"anything", ResumeValue(1))


def test_pending_call_is_single_use(cpy):
    call = expect_call(cpy.start('call_tool("t")', "agent")).call
    call.resume(ResumeValue(1))
    with pytest.raises(CodeRuntimeError, match="single use"):
        call.resume(ResumeValue(2))


def test_resume_refuses_something_that_is_not_an_outcome(cpy):
    call = expect_call(cpy.start('x = call_tool("t")\nx', "agent")).call
    with pytest.raises(TypeError):
        call.resume(5)  # type: ignore[arg-type]
    assert expect_complete(call.resume(ResumeValue(5))).value == 5


MISUSE = [
    pytest.param("call_tool()", id="no-name"),
    pytest.param("call_tool(5)", id="non-str-name"),
    pytest.param('call_tool("x", user_id="u")', id="keywords"),
    pytest.param('call_tool("x", {}, {})', id="three-positionals"),
    pytest.param('call_tool("x", "u-42")', id="non-dict"),
    pytest.param('call_tool("x", {1: "u"})', id="int-key"),
]


@pytest.mark.parametrize("call", MISUSE)
def test_call_tool_misuse_raises_type_error_into_the_script(cpy, call):
    script = f"try:\n    {call}\n    r = 'accepted'\nexcept TypeError as e:\n    r = 'TypeError: ' + str(e)\nr"
    value = expect_complete(cpy.start(script, "agent")).value
    assert value.startswith("TypeError: call_tool")


@pytest.mark.parametrize("call", MISUSE)
def test_call_tool_misuse_uncaught_is_raised(cpy, call):
    raised = expect_raised(cpy.start(call, "agent"))
    assert "call_tool" in last_line(raised.message)


@pytest.mark.parametrize("call", MISUSE)
def test_call_tool_misuse_is_shown_as_type_error(cpy, call):
    assert last_line(expect_raised(cpy.start(call, "agent")).message).startswith("TypeError: ")


def test_render_tools_uses_the_default_catalog(cpy):
    text = cpy.render_tools([Tool("add", "Add numbers."), Tool("slow", "Slow.", is_long_running=True)])
    assert text.startswith("Available tools:")
    assert "add" in text and "[long-running]" in text
    assert cpy.render_tools([]) == ""


def test_prompt_extra_is_appended():
    assert CPythonRuntime(prompt_extra="Be brief.").capabilities().prompt.endswith("Be brief.")


def test_scripts_see_the_full_language(cpy):
    script = "import collections\nclass E(Exception):\n    pass\nc = collections.Counter('aab')\nc['a']"
    assert expect_complete(cpy.start(script, "agent")).value == 2
