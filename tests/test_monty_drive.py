"""Driving real scripts on Monty: tool calls, stdout, suspension, call_tool enforcement,
errors and the value contract (reference §19.4, SPEC §2–3)."""

from __future__ import annotations

import math

import pytest

from codeact import (
    Call,
    CodeRuntimeError,
    Complete,
    MontyRuntime,
    Raised,
    ResourceLimits,
    ResumeError,
    ResumeValue,
    ValueConversionError,
    _monty,
)
from conftest import expect_call, expect_complete, expect_raised, last_line, start

ALREADY_RESUMED = "this PendingCall was already resumed; a PendingCall is single use"

CART = """
cart = call_tool("fetch_cart", {"user_id": "u-42"})
subtotal = 0.0
for item in cart["items"]:
    subtotal += item["price"] * item["qty"]
rate = call_tool("tax_rate", {"region": "CA"})
{"subtotal": subtotal, "total": subtotal * (1 + rate), "lines": len(cart["items"])}
"""


def test_runs_real_python_with_two_tool_calls(monty):
    step = expect_call(start(monty, CART))
    assert step.call.name == "fetch_cart"
    assert step.call.keyword_args == {"user_id": "u-42"}
    cart = {"items": [{"price": 25.0, "qty": 2}, {"price": 54.0, "qty": 1}]}
    step = expect_call(step.call.resume(ResumeValue(cart)))
    assert step.call.name == "tax_rate"
    assert step.call.keyword_args == {"region": "CA"}
    done = expect_complete(step.call.resume(ResumeValue(0.1)))
    assert done.value["subtotal"] == 104.0
    assert done.value["total"] == pytest.approx(114.4)
    assert done.value["lines"] == 2


def test_arguments_are_surfaced_as_exact_keyword_pairs(monty):
    call = expect_call(start(monty, 'call_tool("add", {"a": 1, "b": 2})')).call
    assert call.name == "add"
    assert call.positional_args == ()
    assert call.keyword_args == {"a": 1, "b": 2}
    assert list(call.keyword_args) == ["a", "b"]
    assert isinstance(call.call_id, int)


def test_call_ids_differ_between_calls_of_one_script(monty):
    first = expect_call(start(monty, 'call_tool("a")\ncall_tool("b")')).call
    second = expect_call(first.resume(ResumeValue(None))).call
    assert first.call_id != second.call_id


def test_a_tool_without_arguments_gets_an_empty_dict(monty):
    call = expect_call(start(monty, 'call_tool("ping")')).call
    assert call.name == "ping"
    assert call.keyword_args == {}


def test_captures_stdout_and_surfaces_it_on_the_step(monty):
    done = expect_complete(start(monty, 'print("working on it")\n{"type": "final_result", "value": 1}'))
    assert done.stdout == "working on it\n"
    assert done.value == {"type": "final_result", "value": 1}


def test_stdout_is_attributed_to_the_step_that_printed_it(monty):
    step = expect_call(start(monty, 'print("before")\nx = call_tool("t")\nprint("after", x)\nx'))
    assert step.stdout == "before\n"
    done = expect_complete(step.call.resume(ResumeValue(7)))
    assert done.stdout == "after 7\n"


def test_stdout_survives_a_raise(monty):
    raised = expect_raised(start(monty, 'print("partial")\n1 / 0'))
    assert raised.stdout == "partial\n"
    assert last_line(raised.message).startswith("ZeroDivisionError")


def test_dump_and_resume_round_trips_across_a_fresh_runtime(monty):
    call = expect_call(start(monty, 'x = call_tool("double", {"x": 21})\n{"result": x}')).call
    snapshot = call.dump()
    assert isinstance(snapshot, bytes)
    done = expect_complete(MontyRuntime().resume(snapshot, ResumeValue(42)))
    assert done.value == {"result": 42}


def test_dump_may_be_called_twice_and_both_resume(monty):
    call = expect_call(start(monty, 'x = call_tool("double", {"x": 21})\nx + 1')).call
    first, second = call.dump(), call.dump()
    assert expect_complete(MontyRuntime().resume(first, ResumeValue(1))).value == 2
    assert expect_complete(MontyRuntime().resume(second, ResumeValue(10))).value == 11
    # ... and the live call is still usable after dumping.
    assert expect_complete(call.resume(ResumeValue(100))).value == 101


def test_tool_error_is_raised_into_the_script_and_catchable(monty):
    script = """
    try:
        call_tool("risky")
        r = "not caught"
    except Exception as e:
        r = "caught: " + str(e)
    r
    """
    call = expect_call(start(monty, script)).call
    assert expect_complete(call.resume(ResumeError("tool failed"))).value == "caught: tool failed"


@pytest.mark.parametrize("exc_type", ["ValueError", "KeyError", "TimeoutError", "PermissionError", "RuntimeError"])
def test_resume_error_surfaces_as_the_named_type(monty, exc_type):
    script = f"""
    try:
        call_tool("risky")
    except {exc_type}:
        r = "caught as {exc_type}"
    r
    """
    call = expect_call(start(monty, script)).call
    assert expect_complete(call.resume(ResumeError("boom", exc_type))).value == f"caught as {exc_type}"


def test_uncaught_resume_error_is_raised_with_its_type_and_message(monty):
    call = expect_call(start(monty, 'call_tool("risky")')).call
    raised = expect_raised(call.resume(ResumeError("no such cart", "ValueError")))
    assert last_line(raised.message) == "ValueError: no such cart"


def test_unknown_resume_error_type_falls_back_to_runtime_error(monty):
    call = expect_call(start(monty, 'call_tool("risky")')).call
    raised = expect_raised(call.resume(ResumeError("boom", "NoSuchError")))
    assert last_line(raised.message) == "RuntimeError: boom"


def test_resume_error_with_a_non_exception_type_is_still_catchable(monty):
    script = """
    try:
        call_tool("risky")
    except Exception as e:
        r = "caught"
    r
    """
    call = expect_call(start(monty, script)).call
    assert expect_complete(call.resume(ResumeError("boom", "KeyboardInterrupt"))).value == "caught"


@pytest.mark.parametrize("name", ["fetch-cart", "class", "call_tool", "with space", "ünïcode"])
def test_any_string_is_a_tool_name(monty, name):
    call = expect_call(start(monty, f'call_tool({name!r}, {{"user_id": "u-7"}})')).call
    assert call.name == name
    assert call.positional_args == ()
    assert call.keyword_args == {"user_id": "u-7"}


def test_call_tool_dispatches_and_resume_value_flows_into_the_result(monty):
    script = 'cart = call_tool("fetch-cart", {"user_id": "u-7"})\n{"items": cart["items"]}'
    call = expect_call(start(monty, script)).call
    assert call.name == "fetch-cart"
    assert expect_complete(call.resume(ResumeValue({"items": 3}))).value == {"items": 3}


@pytest.mark.parametrize("key", ["class", "call_tool", "a-b", "", "def"])
def test_any_string_is_an_argument_name(monty, key):
    call = expect_call(start(monty, f'call_tool("t", {{{key!r}: 1}})')).call
    assert call.keyword_args == {key: 1}


# ------------------------------------------------------------------ refused call forms

REFUSED = [
    pytest.param('fetch_cart(user_id="u-42")', "NameError", ["fetch_cart", "call_tool"], id="bare-call"),
    pytest.param("fetch_cart()", "NameError", ["fetch_cart", "call_tool"], id="bare-call-no-args"),
    pytest.param("call_tool()", "TypeError", ["tool name", "call_tool("], id="no-name"),
    pytest.param("call_tool(5)", "TypeError", ["tool name", "call_tool("], id="non-str-name"),
    pytest.param("call_tool({'user_id': 'u'})", "TypeError", ["tool name"], id="dict-first"),
    pytest.param(
        'call_tool("fetch_cart", user_id="u-42")', "TypeError", ["keyword", 'call_tool("fetch_cart", {'], id="keywords"
    ),
    pytest.param(
        'call_tool("fetch_cart", {}, {})',
        "TypeError",
        ["two arguments", 'call_tool("fetch_cart", {'],
        id="three-positionals",
    ),
    pytest.param(
        'call_tool("fetch_cart", "u-42")', "TypeError", ["dict", "str", 'call_tool("fetch_cart", {'], id="non-dict"
    ),
    pytest.param('call_tool("fetch_cart", ["u-42"])', "TypeError", ["dict", "list"], id="list-arg"),
    pytest.param('call_tool("fetch_cart", {1: "u-42"})', "TypeError", ["must be strings", "int"], id="int-key"),
    pytest.param('call_tool("fetch_cart", {"ids": 1j})', "TypeError", ["complex", "'ids'"], id="complex-value"),
    pytest.param(
        'def f():\n    return 1\ncall_tool("fetch_cart", {"cb": f})', "TypeError", ["'cb'"], id="function-value"
    ),
    pytest.param(
        'call_tool("fetch_cart", {"p": [1, {"q": {3j}}]})',
        "TypeError",
        ["complex", "'p'[1]['q'][0]"],
        id="nested-set-value",
    ),
]


@pytest.mark.parametrize("script, exc_type, words", REFUSED)
def test_refused_call_forms_raise_a_corrective_exception_in_the_script(monty, script, exc_type, words):
    raised = expect_raised(start(monty, script))
    line = last_line(raised.message)
    assert line.startswith(f"{exc_type}: "), raised.message
    for word in words:
        assert word in line, (word, line)
    assert raised.message.startswith("Traceback (most recent call last):")
    assert 'File "agent", line' in raised.message


@pytest.mark.parametrize("script, exc_type, words", REFUSED)
def test_refusals_are_ordinary_exceptions_the_script_can_catch(monty, script, exc_type, words):
    lines = script.splitlines()
    body = "\n".join("    " + line for line in lines[-1:])
    prefix = "\n".join(lines[:-1])
    wrapped = f"{prefix}\ntry:\n{body}\n    r = 'not refused'\nexcept {exc_type} as e:\n    r = 'caught: ' + str(e)\nr"
    done = expect_complete(start(monty, wrapped))
    assert done.value.startswith("caught: ")
    wrapped_broad = wrapped.replace(f"except {exc_type}", "except Exception")
    assert expect_complete(start(monty, wrapped_broad)).value.startswith("caught: ")


def test_a_refusal_does_not_stop_later_valid_calls(monty):
    script = """
    try:
        fetch_cart("u")
    except NameError:
        pass
    call_tool("fetch_cart", {"user_id": "u"})
    """
    call = expect_call(start(monty, script)).call
    assert call.name == "fetch_cart"


def test_a_bare_reference_to_call_tool_is_a_name_error(monty):
    raised = expect_raised(start(monty, "f = call_tool\nf"))
    assert last_line(raised.message).startswith("NameError")


def test_await_call_tool_pauses_at_the_call_and_returns_its_value(monty):
    step = expect_call(start(monty, 'await call_tool("x")'))
    assert expect_complete(step.call.resume(ResumeValue(1))).value == 1


def test_awaiting_a_synchronous_result_is_raised_not_a_host_error(monty):
    raised = expect_raised(start(monty, "r = 1\nawait r"))
    assert last_line(raised.message).startswith("TypeError")


# ------------------------------------------------------------------ script mistakes


@pytest.mark.parametrize("script", ["def (", "x = = 1", "if True\n    pass", "return 1 +", "f(]"])
def test_syntax_error_is_a_raised_step_not_a_host_error(monty, script):
    raised = expect_raised(start(monty, script))
    assert "SyntaxError" in last_line(raised.message)
    assert "agent" in raised.message


def test_uncaught_exception_is_raised_with_a_traceback(monty):
    raised = expect_raised(start(monty, 'def f():\n    raise ValueError("bad input")\nf()'))
    assert raised.message.startswith("Traceback (most recent call last):")
    assert 'File "agent", line 3' in raised.message
    assert 'File "agent", line 2, in f' in raised.message
    assert last_line(raised.message) == "ValueError: bad input"


def test_a_runaway_loop_is_cancelled_by_the_time_limit_as_a_raised_step():
    rt = MontyRuntime(ResourceLimits(max_duration=0.02))
    raised = expect_raised(start(rt, "x = 0\nfor i in range(10**8):\n    x += i\nx"))
    assert "time limit exceeded" in raised.message


def test_the_script_name_appears_in_tracebacks(monty):
    raised = expect_raised(monty.start("1 / 0", "my_script.py"))
    assert 'File "my_script.py", line 1' in raised.message


# ------------------------------------------------------------------ PendingCall is single use


def test_a_second_resume_raises_code_runtime_error(monty):
    call = expect_call(start(monty, 'call_tool("t")')).call
    expect_complete(call.resume(ResumeValue(1)))
    with pytest.raises(CodeRuntimeError) as info:
        call.resume(ResumeValue(2))
    assert str(info.value) == ALREADY_RESUMED


def test_dump_after_resume_raises_code_runtime_error(monty):
    call = expect_call(start(monty, 'call_tool("t")')).call
    call.resume(ResumeValue(1))
    with pytest.raises(CodeRuntimeError) as info:
        call.dump()
    assert str(info.value) == ALREADY_RESUMED


def test_a_call_resumed_with_an_error_is_also_used_up(monty):
    call = expect_call(start(monty, 'call_tool("t")')).call
    expect_raised(call.resume(ResumeError("x")))
    with pytest.raises(CodeRuntimeError, match="single use"):
        call.resume(ResumeValue(1))


def test_resume_refuses_something_that_is_not_an_outcome(monty):
    call = expect_call(start(monty, 'call_tool("t")')).call
    with pytest.raises(TypeError, match="ResumeValue"):
        call.resume(42)  # type: ignore[arg-type]
    assert expect_complete(call.resume(ResumeValue(42))).value == 42


# ------------------------------------------------------------------ the value contract

PLAIN = [
    pytest.param("None", None, id="none"),
    pytest.param("True", True, id="true"),
    pytest.param("False", False, id="false"),
    pytest.param("0", 0, id="zero"),
    pytest.param("-(2**63)", -(2**63), id="i64-min"),
    pytest.param("2**63", 2**63, id="u64-ish"),
    pytest.param("2**200 + 1", 2**200 + 1, id="big-int"),
    pytest.param("-(3**99)", -(3**99), id="big-negative"),
    pytest.param("1.5", 1.5, id="float"),
    pytest.param("float('inf')", math.inf, id="inf"),
    pytest.param("float('-inf')", -math.inf, id="-inf"),
    pytest.param("'héllo\\n'", "héllo\n", id="str"),
    pytest.param("b'\\x00\\xff'", b"\x00\xff", id="bytes"),
    pytest.param("[1, 'a', None]", [1, "a", None], id="list"),
    pytest.param("(1, (2, 3))", (1, (2, 3)), id="tuple"),
    pytest.param("()", (), id="empty-tuple"),
    pytest.param("{'b': 1, 'a': [2.5, {'c': b'x'}]}", {"b": 1, "a": [2.5, {"c": b"x"}]}, id="dict"),
    pytest.param("{1: 'one', (1, 2): 'pair'}", {1: "one", (1, 2): "pair"}, id="non-str-keys"),
]


@pytest.mark.parametrize("expr, expected", PLAIN)
def test_plain_results_cross_exactly(monty, expr, expected):
    value = expect_complete(start(monty, expr)).value
    assert value == expected
    assert type(value) is type(expected)


def test_nan_crosses_as_nan(monty):
    value = expect_complete(start(monty, "float('nan')")).value
    assert isinstance(value, float) and math.isnan(value)


def test_dict_key_order_is_kept(monty):
    value = expect_complete(start(monty, "{'z': 1, 'a': 2, 'm': 3}")).value
    assert list(value) == ["z", "a", "m"]


@pytest.mark.parametrize("value", [p.values[1] for p in PLAIN])
def test_plain_values_resume_into_the_script_exactly(monty, value):
    call = expect_call(start(monty, 'x = call_tool("t")\nx')).call
    back = expect_complete(call.resume(ResumeValue(value))).value
    assert back == value
    assert type(back) is type(value)


def test_nan_and_inf_resume_into_the_script(monty):
    call = expect_call(start(monty, 'x = call_tool("t")\n[x[0] != x[0], x[1] > 10**308, x[2] < -10**308]')).call
    assert expect_complete(call.resume(ResumeValue([math.nan, math.inf, -math.inf]))).value == [True, True, True]


def test_resumed_values_behave_as_their_types_in_the_script(monty):
    script = """
    v = call_tool("t")
    [type(v["i"]).__name__, v["i"] + 1, type(v["b"]).__name__, v["b"][0], type(v["t"]).__name__, v["l"][-1]]
    """
    call = expect_call(start(monty, script)).call
    value = {"i": 2**100, "b": b"\x07", "t": (1, 2), "l": [1, 2, 3]}
    assert expect_complete(call.resume(ResumeValue(value))).value == ["int", 2**100 + 1, "bytes", 7, "tuple", 3]


@pytest.mark.parametrize(
    "expr, type_word, path",
    [
        pytest.param("1j", "complex", "the result", id="complex"),
        pytest.param("frozenset([1j])", "complex", "the result[0]", id="in-a-frozenset"),
        pytest.param("[1, {'k': {3j}}]", "complex", "the result[1]['k'][0]", id="nested-set"),
    ],
)
def test_non_plain_results_are_raised_naming_type_and_path(monty, expr, type_word, path):
    line = last_line(expect_raised(start(monty, expr)).message)
    assert line.startswith("TypeError")
    assert type_word in line
    assert path in line


@pytest.mark.parametrize(
    "expr, type_word",
    [
        pytest.param("def f():\n    return 1\nf", "function", id="function"),
        pytest.param("class A:\n    pass\nA", "class", id="class"),
        pytest.param("import json\njson", "module", id="module"),
    ],
)
def test_callable_results_are_raised_naming_their_type(monty, expr, type_word):
    line = last_line(expect_raised(start(monty, expr)).message)
    assert line.startswith("TypeError")
    assert type_word in line
    assert "the result" in line


@pytest.mark.parametrize("expr", ["def f():\n    return 1\nf", "class A:\n    pass\nA", "import json\njson"])
def test_callable_results_are_raised_not_a_host_error(monty, expr):
    line = last_line(expect_raised(start(monty, expr)).message)
    assert line.startswith("TypeError") and "the result" in line


class Custom:
    pass


@pytest.mark.parametrize(
    "value, type_word, path",
    [
        pytest.param({1, 2j}, "complex", "value[", id="in-a-set"),
        pytest.param(object(), "object", "value", id="object"),
        pytest.param(Custom(), "Custom", "value", id="custom"),
        pytest.param([1, {"a": 3j}], "complex", "value[1]['a']", id="nested-complex"),
        pytest.param({"k": (1, frozenset({Custom()}))}, "Custom", "value['k'][1][0]", id="in-a-frozenset"),
        pytest.param({"f": len}, "builtin_function_or_method", "value['f']", id="builtin"),
    ],
)
def test_resuming_with_a_non_plain_value_raises_and_the_call_stays_usable(monty, value, type_word, path):
    call = expect_call(start(monty, 'x = call_tool("t")\nx')).call
    with pytest.raises(ValueConversionError) as info:
        call.resume(ResumeValue(value))
    assert type_word in str(info.value)
    assert path in str(info.value)
    assert expect_complete(call.resume(ResumeValue("fine"))).value == "fine"


def test_resuming_from_bytes_with_a_non_plain_value_raises(monty):
    snapshot = expect_call(start(monty, 'x = call_tool("t")\nx')).call.dump()
    with pytest.raises(ValueConversionError, match="complex"):
        MontyRuntime().resume(snapshot, ResumeValue({1j}))
    assert expect_complete(MontyRuntime().resume(snapshot, ResumeValue(1))).value == 1


def nested(depth: int) -> list:
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


def test_nesting_up_to_the_limit_crosses_both_ways(monty):
    depth = _monty.MAX_VALUE_DEPTH
    done = expect_complete(start(monty, f"x = []\nfor i in range({depth}):\n    x = [x]\nx"))
    assert done.value == nested(depth)
    call = expect_call(start(monty, 'x = call_tool("t")\nx')).call
    assert expect_complete(call.resume(ResumeValue(nested(depth)))).value == nested(depth)


def test_nesting_deeper_than_the_limit_is_raised_from_the_script(monty):
    depth = _monty.MAX_VALUE_DEPTH + 5
    raised = expect_raised(start(monty, f"x = []\nfor i in range({depth}):\n    x = [x]\nx"))
    assert f"deeper than {_monty.MAX_VALUE_DEPTH}" in last_line(raised.message)
    raised = expect_raised(start(monty, f"x = []\nfor i in range({depth}):\n    x = [x]\ncall_tool('t', {{'a': x}})"))
    assert f"deeper than {_monty.MAX_VALUE_DEPTH}" in last_line(raised.message)


def test_nesting_deeper_than_the_limit_is_refused_on_resume(monty):
    call = expect_call(start(monty, 'x = call_tool("t")\nx')).call
    with pytest.raises(ValueConversionError, match=f"deeper than {_monty.MAX_VALUE_DEPTH}"):
        call.resume(ResumeValue(nested(_monty.MAX_VALUE_DEPTH + 5)))
    with pytest.raises(ValueConversionError):
        call.resume(ResumeValue(nested(100_000)))
    assert expect_complete(call.resume(ResumeValue(None))).value is None


def test_a_self_referencing_value_is_refused_cleanly(monty):
    loop: list = []
    loop.append(loop)
    call = expect_call(start(monty, 'x = call_tool("t")\nx')).call
    with pytest.raises(ValueConversionError):
        call.resume(ResumeValue(loop))
    assert isinstance(call.resume(ResumeValue(1)), Complete)


def test_steps_are_the_seam_classes(monty):
    assert type(start(monty, "1")) is Complete
    assert type(start(monty, "1/0")) is Raised
    assert type(start(monty, 'call_tool("x")')) is Call


def test_tool_and_argument_names_stay_right_across_many_distinct_names(monty):
    # The engine reuses the Python str of recently seen names (a small per-thread table
    # that evicts): forty distinct tool names and argument names, cycled twice, must each
    # arrive as written, including non-ASCII ones and names longer than the table keeps.
    names = [f"tool_{i}" for i in range(38)] + ["outil_é", "t" * 100]
    script = (
        "names = " + repr(names) + "\n"
        "out = []\n"
        "for r in range(2):\n"
        "    for i, n in enumerate(names):\n"
        "        out.append(call_tool(n, {'arg_' + n: i, 'same': r}))\n"
        "out\n"
    )
    step = start(monty, script)
    seen = []
    while isinstance(step, Call):
        call = step.call
        assert call.keyword_args == {"arg_" + call.name: len(seen) % len(names), "same": len(seen) // len(names)}
        seen.append(call.name)
        step = call.resume(ResumeValue(len(seen)))
    assert seen == names * 2
    assert expect_complete(step).value == list(range(1, 2 * len(names) + 1))
