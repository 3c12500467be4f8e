"""``MontyRuntime.run`` / ``arun``: one call drives a script to completion on the real interpreter."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import anyio
import pytest
from pydantic import BaseModel

from codeact.exceptions import ValueConversionError
from codeact.runtime import (
    MontyRuntime,
    ResourceLimits,
    ResumeError,
    RunResult,
    RuntimeCapabilities,
    ScriptError,
    ToolCallLimitError,
)

pytestmark = pytest.mark.anyio


def add(a: int, b: int) -> int:
    return a + b


async def slow_double(x: int) -> int:
    await anyio.sleep(0.001)
    return 2 * x


def test_value_and_stdout_without_tools():
    result = MontyRuntime().run('print("hello")\nprint("world")\n6 * 7')
    assert result == RunResult(42, "hello\nworld\n", 0)


def test_call_tool_style_sync_tools():
    code = 'x = call_tool("add", {"a": 1, "b": 2})\nprint("x =", x)\ncall_tool("add", {"a": x, "b": 10})'
    result = MontyRuntime().run(code, tools={"add": add})
    assert (result.value, result.stdout, result.tool_calls) == (13, "x = 3\n", 2)


def test_functions_style_positional_and_keyword_arguments():
    rt = MontyRuntime(tool_style="functions")
    result = rt.run("[add(1, 2), add(a=5, b=6), add(7, b=1)]", tools={"add": add})
    assert result.value == [3, 11, 8]


def test_async_tool_in_sync_run():
    result = MontyRuntime().run('call_tool("double", {"x": 21})', tools={"double": slow_double})
    assert result.value == 42


async def test_arun_mixes_sync_and_async_tools(anyio_backend):
    code = 'a = call_tool("double", {"x": 4})\nb = call_tool("add", {"a": a, "b": 1})\n[a, b]'
    result = await MontyRuntime().arun(code, tools={"double": slow_double, "add": add})
    assert result.value == [8, 9]


async def test_arun_leaves_the_event_loop_free(anyio_backend):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.005)

    code = "total = 0\nfor i in range(3_000_000):\n    total += i\ntotal"
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        started = time.monotonic()
        result = await MontyRuntime(limits=ResourceLimits(max_duration=30)).arun(code)
        elapsed = time.monotonic() - started
        tg.cancel_scope.cancel()
    assert result.value == sum(range(3_000_000))
    # the loop kept ticking while the interpreter ran (at most one tick lost per 20 ms)
    assert ticks >= elapsed / 0.02


def test_tool_exception_is_catchable_with_its_type(caplog):
    def boom(reason: str) -> None:
        raise ValueError(f"no: {reason}")

    code = 'try:\n    call_tool("boom", {"reason": "x"})\nexcept ValueError as e:\n    r = "caught " + str(e)\nr'
    with caplog.at_level(logging.WARNING, logger="codeact.tools"):
        result = MontyRuntime().run(code, tools={"boom": boom})
    assert result.value == "caught no: x"
    [record] = [r for r in caplog.records if r.name == "codeact.tools"]
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert "'boom'" in record.getMessage()


def test_uncaught_tool_exception_is_a_script_error_caused_by_it():
    class Private(Exception):
        pass

    def secret() -> None:
        raise Private("database at 10.0.0.3 refused")

    with pytest.raises(ScriptError) as info:
        MontyRuntime().run('print("before")\ncall_tool("secret")', tools={"secret": secret})
    err = info.value
    assert isinstance(err.__cause__, Private)
    # the agent loop's mapping: no builtin class every runtime has, so RuntimeError naming the class
    assert "RuntimeError: Private: database at 10.0.0.3 refused" in err.message
    assert err.stdout == "before\n" and err.tool_calls == 1


def test_unknown_tool_raises_name_error_in_script():
    code = 'try:\n    call_tool("nope", {})\nexcept NameError as e:\n    m = str(e)\nm'
    assert MontyRuntime().run(code, tools={"add": add}).value == "unknown tool 'nope' (available: add)"


@pytest.mark.parametrize(
    ("code", "fragment"),
    [("def f(:\n  pass", "SyntaxError"), ("1 / 0", "ZeroDivisionError"), ("raise KeyError('k')", "KeyError")],
)
def test_script_failures_are_script_errors(code, fragment):
    with pytest.raises(ScriptError) as info:
        MontyRuntime().run(code)
    assert fragment in info.value.message


def test_time_limit_is_a_script_error():
    rt = MontyRuntime(limits=ResourceLimits(max_duration=0.05))
    with pytest.raises(ScriptError) as info:
        rt.run("while True:\n    pass")
    assert "time" in info.value.message.lower()


def test_inputs_are_globals_and_line_numbers_stay_the_script_s():
    rt = MontyRuntime()
    result = rt.run("{'n': n * 2, 'names': [s.upper() for s in names]}", inputs={"n": 21, "names": ["a", "b"]})
    assert result.value == {"n": 42, "names": ["A", "B"]}
    with pytest.raises(ScriptError) as info:
        rt.run("x = n\ny = x + 1\nraise ValueError('third line')", inputs={"n": 1})
    assert 'File "main.py", line 3' in info.value.message
    with pytest.raises(ScriptError) as info:
        rt.run("x = n\ndel x", inputs={"n": 1})
    assert "- line 2, column 1" in info.value.message
    # the prelude's reserved call is not counted as a tool call
    assert rt.run("n", inputs={"n": 5}).tool_calls == 0


@pytest.mark.parametrize("name", ["not an identifier", "__codeact_x", "1x"])
def test_bad_input_names_are_refused(name):
    with pytest.raises(ValueError, match="identifiers"):
        MontyRuntime().run("1", inputs={name: 1})


def test_tool_call_limit():
    with pytest.raises(ToolCallLimitError) as info:
        MontyRuntime().run('while True:\n    call_tool("add", {"a": 1, "b": 1})', tools={"add": add}, max_tool_calls=5)
    assert info.value.tool_calls == 5


def test_pydantic_results_cross_as_plain_data():
    class User(BaseModel):
        name: str
        tags: set[str]

    result = MontyRuntime().run(
        'u = call_tool("user")\n[u["name"], u["tags"]]', tools={"user": lambda: User(name="ada", tags={"x"})}
    )
    # model_dump (python mode): the set field stays a set, which crosses as one (SPEC §3 v3)
    assert result.value == ["ada", {"x"}]


def test_unconvertible_tool_result_is_a_host_error():
    with pytest.raises(ValueConversionError):
        MontyRuntime().run('call_tool("obj")', tools={"obj": object})


def test_final_answer_in_functions_style_ends_the_script():
    rt = MontyRuntime(tool_style="functions")
    result = rt.run('print("a")\nfinal_answer(add(1, 1))\nprint("never")', tools={"add": add})
    assert (result.value, result.stdout) == (2, "a\n")


async def test_a_tool_can_pause_the_script_and_it_resumes_elsewhere(anyio_backend):
    from codeact.runtime import ScriptSuspended, SuspendScript
    from codeact.runtime._oneshot import aresume_script

    approved: set[str] = set()

    def pay(amount: int) -> str:
        if "pay" not in approved:
            raise SuspendScript({"ask": f"pay {amount}?"})
        return f"paid {amount}"

    key = b"k" * 32
    code = 'print("start")\nr = call_tool("pay", {"amount": 5})\nprint(r)\n[r, call_tool("add", {"a": 1, "b": 2})]'
    with pytest.raises(ScriptSuspended) as info:
        await MontyRuntime(snapshot_key=key).arun(code, tools={"pay": pay, "add": add})
    pause = info.value
    assert (pause.tool, pause.tool_args, pause.payload, pause.stdout) == (
        "pay",
        {"amount": 5},
        {"ask": "pay 5?"},
        "start\n",
    )
    stored = ScriptSuspended.from_dict(json.loads(json.dumps(pause.to_dict())))
    # paused again: the tool still refuses
    with pytest.raises(ScriptSuspended):
        await aresume_script(MontyRuntime(snapshot_key=key), stored, tools={"pay": pay, "add": add})
    approved.add("pay")
    result = await aresume_script(MontyRuntime(snapshot_key=key), stored, tools={"pay": pay, "add": add})
    assert (result.value, result.stdout, result.tool_calls) == (["paid 5", 3], "start\npaid 5\n", 2)
    # or answered without calling the tool
    with pytest.raises(ScriptError) as failed:
        await aresume_script(
            MontyRuntime(snapshot_key=key), stored, tools={"add": add}, outcome=ResumeError("denied", "PermissionError")
        )
    assert "PermissionError: denied" in failed.value.message and failed.value.stdout == "start\n"


def test_sync_run_pauses_too():
    from codeact.runtime import ScriptSuspended, SuspendScript

    def ask() -> None:
        raise SuspendScript("why")

    with pytest.raises(ScriptSuspended) as info:
        MontyRuntime().run('call_tool("ask")', tools={"ask": ask})
    assert info.value.payload == "why" and isinstance(info.value.snapshot, bytes)


async def test_inline_steps_give_the_same_results(anyio_backend):
    code = 't = 0\nfor i in range(200):\n    t = call_tool("add", {"a": t, "b": i})\nprint(t)\nt'
    rt = MontyRuntime()
    inline = await rt.arun(code, tools={"add": add}, inline_steps=True)
    worker = await rt.arun(code, tools={"add": add})
    assert inline == worker == RunResult(sum(range(200)), f"{sum(range(200))}\n", 200)


def test_tool_connection_error_maps_like_the_agent_loop():
    def fetch() -> None:
        raise ConnectionError("refused")

    code = 'try:\n    call_tool("fetch")\nexcept OSError as e:\n    r = str(e)\nr'
    assert MontyRuntime().run(code, tools={"fetch": fetch}).value == "ConnectionError: refused"


def test_tool_key_error_text_is_cpython_s():
    def lookup() -> None:
        raise KeyError("zz")

    code = 'try:\n    call_tool("lookup")\nexcept KeyError as e:\n    r = [str(e), repr(e)]\nr'
    assert MontyRuntime().run(code, tools={"lookup": lookup}).value == [str(KeyError("zz")), repr(KeyError("zz"))]


@pytest.mark.parametrize(
    "code", ['x = await call_tool("add", {"a": 1, "b": 2})\nx', 'print("hi")\nawait call_tool("add")']
)
def test_awaited_tool_call_is_refused_before_any_tool_runs(code):
    ran: list[int] = []

    def counting_add(a: int = 0, b: int = 0) -> int:
        ran.append(1)
        return a + b

    runtime = NonAwaitingRuntime()
    assert not runtime.capabilities().supports_await
    with pytest.raises(ScriptError) as info:
        runtime.run(code, tools={"add": counting_add})
    assert "not run" in info.value.message and "without `await`" in info.value.message
    assert ran == [] and info.value.tool_calls == 0 and info.value.stdout == ""
    # MontyRuntime awaits tool calls: the same script runs
    assert MontyRuntime().capabilities().supports_await
    assert MontyRuntime().run(code, tools={"add": counting_add}).tool_calls == 1 and ran == [1]


class NonAwaitingRuntime(MontyRuntime):
    """A runtime whose tool calls cannot be awaited (``supports_await=False``)."""

    def capabilities(self) -> RuntimeCapabilities:
        return dataclasses.replace(super().capabilities(), supports_await=False)


async def test_arun_refuses_an_awaited_tool_call_too(anyio_backend):
    ran: list[int] = []

    def counting_add(a: int = 0, b: int = 0) -> int:
        ran.append(1)
        return a + b

    with pytest.raises(ScriptError, match="without `await`"):
        await NonAwaitingRuntime().arun('await call_tool("add", {"a": 1})', tools={"add": counting_add})
    assert ran == []
    assert (await MontyRuntime().arun('await call_tool("add", {"a": 1})', tools={"add": counting_add})).value == 1


@pytest.mark.anyio
async def test_run_with_an_async_tool_inside_an_event_loop_points_to_arun() -> None:
    async def inc(x: int) -> int:
        return x + 1

    runtime = MontyRuntime()
    with pytest.raises(RuntimeError, match=r"await runtime\.arun"):
        runtime.run('call_tool("inc", {"x": 1})', tools={"inc": inc})
    assert (await runtime.arun('call_tool("inc", {"x": 1})', tools={"inc": inc})).value == 2


async def test_arun_script_reports_printed_output_at_each_step_boundary(anyio_backend):
    """``on_output``: what the script printed reaches the host before the tool call after it is
    served, and at the end; also after a pause (``aresume_script``)."""
    from codeact.runtime import ResumeValue, ScriptSuspended, SuspendScript
    from codeact.runtime._oneshot import aresume_script, arun_script

    log: list[tuple[str, ...]] = []

    async def on_output(stdout: str, stderr: str) -> None:
        log.append(("printed", stdout, stderr))

    def tool(x: int) -> int:
        log.append(("tool", str(x)))
        return x

    def gate() -> str:
        raise SuspendScript({"why": "approval"})

    code = (
        'import sys\nprint("a")\nprint("e", file=sys.stderr)\ncall_tool("tool", {"x": 1})\n'
        'call_tool("tool", {"x": 2})\nprint("b")\n"done"'
    )
    result = await arun_script(MontyRuntime(), code, tools={"tool": tool}, on_output=on_output)
    assert (result.value, result.stdout, result.stderr) == ("done", "a\nb\n", "e\n")
    assert log == [("printed", "a\n", "e\n"), ("tool", "1"), ("tool", "2"), ("printed", "b\n", "")]

    log.clear()
    code = 'print("before")\ncall_tool("gate", {})\nprint("after")\n1'
    with pytest.raises(ScriptSuspended) as paused:
        await arun_script(MontyRuntime(), code, tools={"gate": gate}, on_output=on_output)
    assert log == [("printed", "before\n", "")]
    log.clear()
    resumed = await aresume_script(MontyRuntime(), paused.value, outcome=ResumeValue("yes"), on_output=on_output)
    assert (resumed, log) == (RunResult(1, "before\nafter\n", 1), [("printed", "after\n", "")])
