"""Fidelity at the boundary (issue 23), each compared with what CPython does: sets and
frozensets both ways and through the journal, import errors that name the module, and
``json.dumps(default=...)``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import pytest

from codeact import MontyRuntime, ResumeValue
from codeact.agent._protocol import args_digest, decode_outcome, encode_outcome, plain_value_problem, value_problem
from conftest import expect_call, expect_complete, expect_raised, start


def cpython_value(script: str) -> object:
    """The value of ``script``'s last expression on CPython."""
    tree = ast.parse(textwrap.dedent(script))
    last = tree.body.pop()
    assert isinstance(last, ast.Expr)
    scope: dict[str, object] = {}
    exec(compile(tree, "<cpython>", "exec"), scope)
    return eval(compile(ast.Expression(last.value), "<cpython>", "eval"), scope)


def same_value(a: object, b: object) -> bool:
    """Equal, with the same container types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(v, b[k]) for k, v in a.items())  # type: ignore[index,union-attr]
    return a == b


# ------------------------------------------------------------------ sets


SET_RESULTS = [
    pytest.param("words = ['a', 'b', 'a', 'c']\nset(words)", id="unique strings"),
    pytest.param("{x % 3 for x in range(10)}", id="set comprehension"),
    pytest.param("set()", id="empty set"),
    pytest.param("frozenset([1, 2, 2])", id="frozenset"),
    pytest.param("{(1, 'a'), (2, 'b')}", id="set of tuples"),
    pytest.param("{frozenset({1}), frozenset()}", id="set of frozensets"),
    pytest.param("{'tags': {'x', 'y'}, 'n': [set(), {1.5}]}", id="sets inside a dict and a list"),
    pytest.param("{frozenset({'k'}): 1, 'plain': {b'x'}}", id="frozenset as a dict key"),
    pytest.param("({None, True, 10**30},)", id="set of scalars in a tuple"),
]


@pytest.mark.parametrize("script", SET_RESULTS)
@pytest.mark.parametrize("isolation", ["in_process", "process"])
def test_a_set_result_comes_back_as_on_cpython(script: str, isolation: str) -> None:
    got = MontyRuntime(isolation=isolation).run(script).value  # type: ignore[arg-type]
    want = cpython_value(script)
    assert same_value(got, want), (got, want)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1, 2, 3}, id="set"),
        pytest.param(frozenset({"a", "b"}), id="frozenset"),
        pytest.param({"s": {(1, 2)}, frozenset({3}): [frozenset()]}, id="nested, frozenset key"),
        pytest.param(set(), id="empty"),
    ],
)
@pytest.mark.parametrize("isolation", ["in_process", "process"])
def test_sets_cross_as_tool_arguments_and_results(value: object, isolation: str) -> None:
    rt = MontyRuntime(isolation=isolation)  # type: ignore[arg-type]
    call = expect_call(
        start(rt, "got = call_tool('echo', {'v': ARG})\n(got, type(got).__name__)".replace("ARG", repr(value)))
    )
    sent = call.call.keyword_args["v"]
    assert same_value(sent, value)
    done = expect_complete(call.call.resume(ResumeValue(sent)))
    assert same_value(done.value, (value, type(value).__name__))


def test_a_set_method_and_membership_work_on_a_resumed_set(monty: MontyRuntime) -> None:
    call = expect_call(start(monty, "s = call_tool('ids')\ns.add(9)\n(sorted(s), 2 in s, s | {0})"))
    done = expect_complete(call.call.resume(ResumeValue({2, 3})))
    assert same_value(done.value, ([2, 3, 9], True, {0, 2, 3, 9}))


def test_a_set_of_an_unconvertible_value_is_named(monty: MontyRuntime) -> None:
    raised = expect_raised(start(monty, "def f(): pass\ncall_tool('t', {'v': {f}})"))
    assert "argument 'v'[0] is a function" in raised.message


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset({"x"}),
        {"$s": [1]},
        {"k": {frozenset({(1, b"b")}): {None}}},
        [set(), frozenset(), ({1.5},)],
    ],
    ids=["set", "frozenset", "a dict that looks like a tag", "frozenset key", "empties"],
)
def test_the_journal_form_of_a_set_round_trips(value: object) -> None:
    assert value_problem(value, "the result") is None
    assert plain_value_problem(value, "the result") is None
    data = json.loads(encode_outcome(ResumeValue(value)))
    back = decode_outcome(data)
    assert isinstance(back, ResumeValue)
    assert same_value(back.value, value)


def test_a_set_argument_digest_does_not_depend_on_the_hash_seed() -> None:
    code = (
        "from codeact.agent._protocol import args_digest, encode_outcome\nfrom codeact import ResumeValue\n"
        "v = {'s': {'alpha', 'beta', 'gamma', 'delta', 'eps'}, 'f': frozenset({('x', 1), ('y', 2)})}\n"
        "print(args_digest(v), encode_outcome(ResumeValue(v)).decode())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }  # fmt: skip
    assert len(outs) == 1, outs
    assert args_digest({"s": {"a", "b"}}) == args_digest({"s": {"b", "a"}})


# ------------------------------------------------------------------ imports


@pytest.mark.parametrize(
    "script, module",
    [
        ("import some_phantom_module", "some_phantom_module"),
        ("from phantom_pkg.sub import thing", "phantom_pkg"),
        ("import json, numpy as np", "numpy"),
    ],
)
def test_a_missing_module_is_named_with_the_modules_on_offer(monty: MontyRuntime, script: str, module: str) -> None:
    message = expect_raised(start(monty, script)).message
    try:
        exec(script, {})
    except ModuleNotFoundError as exc:
        assert f"No module named {module!r}" in str(exc)  # CPython's wording, kept
    assert f"No module named {module!r}" in message
    assert "importable: asyncio, base64" in message and "json" in message


# ------------------------------------------------------------------ the local time zone

ZONE_SCRIPT = """
import datetime
import time
from datetime import timezone

summer = datetime.datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)
winter = datetime.datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
[
    summer.astimezone().strftime('%Y-%m-%d %H:%M %Z %z'),
    winter.astimezone().strftime('%Y-%m-%d %H:%M %Z %z'),
    datetime.datetime(2026, 7, 1, 8, 0).timestamp(),
    datetime.datetime(2026, 1, 15, 8, 0).timestamp(),
    time.strftime('%H:%M %Z', time.localtime(1782907200)),
]
"""


def zone_outputs(tz: str, runtime_args: str = "") -> tuple[str, str]:
    """(Monty's, CPython's) value of ``ZONE_SCRIPT`` in a child whose ``TZ`` is ``tz``."""
    code = f"""
        import ast, json, sys
        from codeact import MontyRuntime
        script = {ZONE_SCRIPT!r}
        step = MontyRuntime({runtime_args}).start(script, "zone.py")
        assert type(step).__name__ == "Complete", step
        tree = ast.parse(script)
        last = tree.body.pop()
        scope = {{}}
        exec(compile(tree, "c", "exec"), scope)
        print(json.dumps([step.value, eval(compile(ast.Expression(last.value), "c", "eval"), scope)]))
    """
    env = {k: v for k, v in __import__("os").environ.items() if k != "TZ"}
    env["TZ"] = tz
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert child.returncode == 0, child.stderr
    monty, cpython = json.loads(child.stdout)
    return monty, cpython


@pytest.mark.parametrize("tz", ["America/New_York", "Europe/London", "Australia/Sydney", "Asia/Kolkata", "UTC"])
def test_the_local_zone_is_the_hosts_named_zone_with_its_daylight_saving(tz: str) -> None:
    monty, cpython = zone_outputs(tz)
    assert monty == cpython


def test_new_york_in_summer_is_edt_not_a_fixed_offset() -> None:
    monty, _ = zone_outputs("America/New_York")
    assert monty[0] == "2026-07-01 08:00 EDT -0400"
    assert monty[1] == "2026-01-15 07:00 EST -0500"


def test_a_configured_zone_wins_over_the_hosts() -> None:
    monty, _ = zone_outputs("America/New_York", "timezone='Europe/Paris'")
    paris, _ = zone_outputs("Europe/Paris")
    assert monty == paris and monty[0] == "2026-07-01 14:00 CEST +0200"
    utc, _ = zone_outputs("America/New_York", "timezone='UTC'")
    assert utc[0] == "2026-07-01 12:00 UTC +0000"


def test_an_unknown_zone_is_refused_when_the_runtime_is_built() -> None:
    with pytest.raises(ValueError, match="unknown timezone 'Mars/Olympus'"):
        MontyRuntime(timezone="Mars/Olympus")
    with pytest.raises(ValueError, match="timezone"):
        MontyRuntime(timezone="../../etc/passwd")


def test_the_zone_holds_under_process_isolation() -> None:
    monty, cpython = zone_outputs("America/New_York", "isolation='process'")
    assert monty == cpython
