"""No tool call CPython would not make: generator expressions that could reach a tool.

Each construct runs under CPython with a recording ``call_tool`` and on ``MontyRuntime``
(the subset check's rewrites on, as the agent runs it), with the same recording tools: the
same calls, in the same order, and the same result; or, for a construct the check refuses,
nothing runs and the message shows the loop to write. ``raw`` (the check off) shows what the
pinned Monty does by itself: every element at once.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest

from codeact import MontyRuntime
from codeact.exceptions import ScriptError
from codeact.runtime import Call, Raised, ResumeValue

ORDERS = [1, 2, 3, 4]


def _tools(calls: list[tuple[str, Any]]) -> dict[str, Any]:
    def check(id: int) -> bool:
        calls.append(("check", id))
        return id >= 2

    def get(id: int) -> dict[str, int]:
        calls.append(("get", id))
        return {"id": id, "total": id * 60}

    def price(id: int) -> int:
        calls.append(("price", id))
        return id * 10

    def audit(id: int) -> None:
        calls.append(("audit", id))

    return {"check": check, "get": get, "price": price, "audit": audit}


def on_cpython(script: str, functions_style: bool = False) -> tuple[list[tuple[str, Any]], Any]:
    """The calls and the result (the last expression) of ``script`` under CPython."""
    calls: list[tuple[str, Any]] = []
    tools = _tools(calls)
    namespace: dict[str, Any] = {"orders": list(ORDERS), "call_tool": lambda name, args=None: tools[name](**args)}
    if functions_style:
        namespace |= tools
    tree = ast.parse(script)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "main.py", "exec"), namespace)
    value = eval(compile(ast.Expression(last.value), "main.py", "eval"), namespace) if last else None
    return calls, value


def on_monty(script: str, functions_style: bool = False, raw: bool = False) -> tuple[list[tuple[str, Any]], Any]:
    calls: list[tuple[str, Any]] = []
    runtime = MontyRuntime(
        tool_style="functions" if functions_style else "call_tool",
        rewrite_scripts=not raw,
        check_scripts=not raw,
    )
    result = runtime.run(script, tools=_tools(calls), inputs={"orders": list(ORDERS)})
    return calls, result.value


CI = 'call_tool("{}", {{"id": {}}})'.format
# construct -> script; each is rewritten into what runs CPython's calls
REWRITTEN = {
    "any": f"any({CI('check', 'o')} for o in orders)",
    "any in an if": f"if any({CI('check', 'o')} for o in orders):\n    r = 'yes'\nr",
    "all with a condition": f"all({CI('check', 'o')} for o in orders if o > 1)",
    "next with a default": f"next((o for o in orders if {CI('get', 'o')}['total'] > 100), None)",
    "next, nothing found": f"next((o for o in orders if {CI('get', 'o')}['total'] > 1000), 'none')",
    "next without a default": f"next(o for o in orders if {CI('check', 'o')})",
    "next over two for clauses": f"next((a, b) for a in orders for b in orders if {CI('check', 'a * b')})",
    "min": f"min({CI('price', 'o')} for o in orders)",
    "max with key": f"max(({CI('get', 'o')} for o in orders), key=lambda r: r['total'] % 7)",
    "max with default, empty": f"max(({CI('price', 'o')} for o in []), default=-1)",
    "sum": f"total = sum({CI('price', 'o')} for o in orders)\ntotal",
    "sum with start": f"sum(({CI('price', 'o')} for o in orders), 5)",
    "sorted": f"sorted(({CI('price', 'o')} for o in orders), reverse=True)",
    "list": f"list({CI('price', 'o')} for o in orders)",
    "tuple": f"tuple({CI('price', 'o')} for o in orders)",
    "set": f"set({CI('price', 'o')} for o in orders)",
    "frozenset": f"frozenset({CI('price', 'o')} for o in orders)",
    "dict": f"dict((o, {CI('price', 'o')}) for o in orders)",
    "str.join": f"', '.join(str({CI('price', 'o')}) for o in orders)",
    "final_result dict": f'{{"type": "final_result", "value": any({CI("check", "o")} for o in orders)}}',
    "through a function": f"def ok(o):\n    return {CI('check', 'o')}\nany(ok(o) for o in orders)",
    "through a lambda": f"ok = lambda o: {CI('check', 'o')}\nany(ok(o) for o in orders)",
    "nested any": f"any(any({CI('check', 'a + b')} for b in orders) for a in orders)",
    "inside a function": f"def first():\n    return next((o for o in orders if {CI('check', 'o')}), None)\nfirst()",
    "loop variable not leaked": f"o = 'kept'\nany({CI('check', 'o')} for o in orders)\no",
    "max with key None": f"max(({CI('price', 'o')} for o in orders), key=None)",
    "a name like the loop's kept": f"_any1 = 'mine'\nr = any({CI('check', 'o')} for o in orders)\n(_any1, r)",
    "star argument": f"max(*({CI('price', 'o')} for o in orders), {CI('price', '0')})",
    "star in a list display": f"[{CI('price', '0')}, *({CI('price', 'o')} for o in orders), {CI('price', '9')}]",
}
REFUSED = {
    "never consumed": f"g = ({CI('audit', 'o')} for o in orders)\n1",
    "zip": f"list(zip(({CI('price', 'o')} for o in orders), ({CI('check', 'o')} for o in orders)))",
    "for over it": f"for p in ({CI('price', 'o')} for o in orders):\n    if p > 10:\n        break\np",
    "unpacking": f"a, b, c, d = ({CI('price', 'o')} for o in orders)\na",
    "after a name that may not exist": f"prnt(any({CI('check', 'o')} for o in orders))",
    "after an attribute": f"orders.add(any({CI('check', 'o')} for o in orders))",
    "after a name in an operation": f"x = totl + sum({CI('price', 'o')} for o in orders)\nx",
    "in a chained comparison": f"r = 2 < 1 < any({CI('check', 'o')} for o in orders)\nr",
    "any inside a comprehension": f"[any({CI('check', 'a + b')} for b in orders) for a in orders]",
    "any after a call": f"print('x'); any({CI('check', 'o')} for o in orders)",
}


@pytest.mark.parametrize("script", REWRITTEN.values(), ids=REWRITTEN.keys())
def test_the_rewrite_makes_cpythons_calls_and_result(script):
    assert on_monty(script) == on_cpython(script)


def test_a_bare_tool_name_in_the_functions_style():
    script = "any(check(o) for o in orders)"
    assert (
        on_monty(script, functions_style=True)
        == on_cpython(script, functions_style=True)
        == ([("check", 1), ("check", 2)], True)
    )


@pytest.mark.parametrize("script", REFUSED.values(), ids=REFUSED.keys())
def test_what_cannot_be_rewritten_is_refused_before_any_call(script):
    calls: list[tuple[str, Any]] = []
    with pytest.raises(ScriptError) as info:
        MontyRuntime().run(script, tools=_tools(calls), inputs={"orders": list(ORDERS)})
    assert calls == []
    message = str(info.value)
    assert "nothing was executed" in message and "Write the loop instead" in message and "for " in message


def test_the_pinned_monty_alone_runs_every_element():
    """The fault: without the check, ``any`` calls the tool for every order."""
    calls, value = on_monty(REWRITTEN["any"], raw=True)
    assert value is True and calls == [("check", 1), ("check", 2), ("check", 3), ("check", 4)]
    assert on_cpython(REWRITTEN["any"])[0] == [("check", 1), ("check", 2)]


def test_a_generator_that_reaches_no_tool_is_left_as_it_is():
    from codeact.runtime._check import check_script

    script = "print(sum(len(str(o)) for o in orders))"
    assert check_script(script).script == script


def test_an_error_after_a_hoisted_loop_names_the_models_line():
    """The rewrite puts a loop in before the statement: a traceback of the rewritten text is
    mapped back to the model's lines (and shows the model's text, not the rewrite's)."""
    from codeact.agent._position import map_traceback

    script = 'orders = [1, 2, 3]\nok = any(call_tool("check", {"id": o}) for o in orders)\nx = 1\ny = missing + x\n'
    runtime = MontyRuntime()
    step = runtime.start(script, "main.py")
    while isinstance(step, Call):
        step = step.call.resume(ResumeValue(False))
    assert isinstance(step, Raised) and "line 4" not in step.message  # the rewrite moved it
    mapped = map_traceback(step.message, runtime.script_as_run(script), script, "main.py")
    assert 'File "main.py", line 4' in mapped and "y = missing + x" in mapped

    inside = 'orders = [1, 2]\nok = any(call_tool("check", {"id": o}) / 0 for o in orders)\n'
    step = runtime.start(inside, "main.py")
    while isinstance(step, Call):
        step = step.call.resume(ResumeValue(1))
    assert isinstance(step, Raised) and "_o_1" in step.message
    mapped = map_traceback(step.message, runtime.script_as_run(inside), inside, "main.py")
    assert 'File "main.py", line 2' in mapped and "_o_1" not in mapped and "~~~" not in mapped
    assert 'ok = any(call_tool("check", {"id": o}) / 0 for o in orders)' in mapped
