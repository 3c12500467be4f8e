"""`await call_tool(...)` and `asyncio.gather` over tool calls on the real interpreter: the
`Gather` step, settling calls together or a subset at a time, errors raised into the
script, snapshots, and which calls stay synchronous (`runtime._awaits`)."""

from __future__ import annotations

import ast
import textwrap

import anyio
import pytest

from codeact import (
    Call,
    CodeRuntimeError,
    Complete,
    Gather,
    MontyRuntime,
    Raised,
    ResumeError,
    ResumeValue,
    SnapshotError,
)
from codeact.runtime._awaits import deferred_offsets
from conftest import expect_call, expect_complete, expect_raised, last_line


def run(rt: MontyRuntime, script: str) -> Call | Gather | Complete | Raised:
    return rt.start(textwrap.dedent(script), "main.py")


def expect_gather(step: object) -> Gather:
    assert isinstance(step, Gather), step
    return step


def answer(step: Gather, fn=lambda c: c.keyword_args["x"] * 10) -> dict[int, ResumeValue]:
    return {c.call_id: ResumeValue(fn(c)) for c in step.calls}


GATHER3 = """
import asyncio
a, b, c = await asyncio.gather(
    call_tool("t", {"x": 1}), call_tool("t", {"x": 2}), call_tool("u", {"x": 3})
)
[a, b, c]
"""


def test_a_gather_of_three_calls_is_one_step_in_call_order(monty: MontyRuntime) -> None:
    step = expect_gather(run(monty, GATHER3))
    assert [c.name for c in step.calls] == ["t", "t", "u"]
    assert [c.keyword_args for c in step.calls] == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert len({c.call_id for c in step.calls}) == 3
    # results land in the script in call order, whatever order they are given in
    outcomes = dict(reversed(list(answer(step).items())))
    assert expect_complete(step.resume(outcomes)).value == [10, 20, 30]


def test_a_call_of_a_gather_is_not_resumed_by_itself(monty: MontyRuntime) -> None:
    step = expect_gather(run(monty, GATHER3))
    with pytest.raises(CodeRuntimeError, match="resume the Gather"):
        step.calls[0].resume(ResumeValue(1))
    with pytest.raises(ValueError, match="not a call this Gather awaits"):
        step.resume({999: ResumeValue(1)})
    with pytest.raises(ValueError, match="at least one"):
        step.resume({})
    expect_complete(step.resume(answer(step)))
    with pytest.raises(CodeRuntimeError, match="already resumed"):
        step.resume(answer(step))


def test_a_failed_call_raises_in_the_script(monty: MontyRuntime) -> None:
    script = """
    import asyncio
    try:
        r = await asyncio.gather(call_tool("t", {"x": 1}), call_tool("t", {"x": 2}))
    except PermissionError as e:
        r = "denied: " + str(e)
    r
    """
    step = expect_gather(run(monty, script))
    first, second = step.calls
    done = step.resume({first.call_id: ResumeValue(1), second.call_id: ResumeError("no", "PermissionError")})
    assert expect_complete(done).value == "denied: no"


def test_return_exceptions_is_reported_as_unsupported(monty: MontyRuntime) -> None:
    # Monty 1.4's gather takes no keyword arguments yet: the script learns it before any call runs.
    script = """
    import asyncio
    await asyncio.gather(call_tool("t", {"x": 1}), return_exceptions=True)
    """
    step = run(monty, script)
    while isinstance(step, Gather):  # the call may be started before gather() refuses the keyword
        step = step.resume(answer(step))
    assert "keyword" in last_line(expect_raised(step).message)


def test_a_subset_can_be_settled_first(monty: MontyRuntime) -> None:
    step = expect_gather(run(monty, GATHER3))
    first, second, third = step.calls
    rest = expect_gather(step.resume({second.call_id: ResumeValue("B")}))
    assert [c.call_id for c in rest.calls] == [first.call_id, third.call_id]
    assert [c.keyword_args for c in rest.calls] == [{"x": 1}, {"x": 3}]
    last = expect_gather(rest.resume({third.call_id: ResumeValue("C")}))
    assert [c.call_id for c in last.calls] == [first.call_id]
    assert expect_complete(last.resume({first.call_id: ResumeValue("A")})).value == ["A", "B", "C"]


def test_dump_and_resume_gather_round_trip(monty: MontyRuntime) -> None:
    step = expect_gather(run(monty, GATHER3))
    blob = step.dump()
    assert step.calls[0].dump() == blob
    assert [c[3] for c in monty.inspect_gather(blob)] == [c.call_id for c in step.calls]
    assert monty.inspect(blob)[:3] == ("t", (), {"x": 1})
    ids = [c.call_id for c in step.calls]
    # a fresh runtime (another process would do the same) resumes from the bytes, a subset first
    other = MontyRuntime()
    rest = expect_gather(other.resume_gather(blob, {ids[0]: ResumeValue("a")}))
    again = expect_gather(MontyRuntime().resume_gather(rest.dump(), {ids[2]: ResumeValue("c")}))
    assert expect_complete(again.resume({ids[1]: ResumeValue("b")})).value == ["a", "b", "c"]
    # the live step is still usable after its dump
    assert expect_complete(step.resume(answer(step))).value == [10, 20, 30]
    with pytest.raises(SnapshotError, match="not at a gather"):
        monty.resume_gather(expect_call(run(monty, 'call_tool("t", {"x": 1})')).call.dump(), {0: ResumeValue(1)})
    with pytest.raises(SnapshotError, match="resume_gather"):
        monty.resume(blob, ResumeValue(1))


def test_awaiting_calls_one_at_a_time_gives_ordinary_calls(monty: MontyRuntime) -> None:
    script = """
    a = await call_tool("t", {"x": 1})
    b = await call_tool("t", {"x": a})
    try:
        await call_tool("t", {"x": 0})
    except ValueError as e:
        c = str(e)
    [a, b, c]
    """
    step = expect_call(run(monty, script))
    step = expect_call(step.call.resume(ResumeValue(5)))
    assert step.call.keyword_args == {"x": 5}
    step = expect_call(step.call.resume(ResumeValue(6)))
    # the awaited call's continuation dumps and resumes from bytes like any call
    step = monty.resume(step.call.dump(), ResumeError("bad", "ValueError"))
    assert expect_complete(step).value == [5, 6, "bad"]


def test_sync_and_awaited_calls_mix_in_one_script(monty: MontyRuntime) -> None:
    script = """
    import asyncio
    base = call_tool("t", {"x": 1})          # synchronous: the value at once
    async def twice(i):
        return await call_tool("t", {"x": base + i})
    pair = await asyncio.gather(twice(1), twice(2))
    after = call_tool("t", {"x": pair[0] + pair[1]})
    [base, pair, after]
    """
    step = expect_call(run(monty, script))
    step = step.call.resume(ResumeValue(100))
    gather = expect_gather(step)
    assert [c.keyword_args for c in gather.calls] == [{"x": 101}, {"x": 102}]
    step = expect_call(gather.resume(answer(gather, lambda c: c.keyword_args["x"])))
    assert step.call.keyword_args == {"x": 203}
    assert expect_complete(step.call.resume(ResumeValue(7))).value == [100, [101, 102], 7]


@pytest.mark.parametrize(
    "script",
    [
        """
        import asyncio
        tasks = [call_tool("t", {"x": i}) for i in range(1, 4)]
        await asyncio.gather(*tasks)
        """,
        """
        import asyncio
        tasks = []
        for i in range(1, 4):
            tasks.append(call_tool("t", {"x": i}))
        list(await asyncio.gather(*tasks))
        """,
        """
        import asyncio
        jobs = {i: call_tool("t", {"x": i}) for i in range(1, 4)}
        await asyncio.gather(*jobs.values())
        """,
        """
        import asyncio
        await asyncio.gather(*(call_tool("t", {"x": i}) for i in range(1, 4)))
        """,
        """
        first = call_tool("t", {"x": 1})
        rest = [call_tool("t", {"x": 2}), call_tool("t", {"x": 3})]
        out = [await first]
        for t in rest:
            out.append(await t)
        out
        """,
    ],
    ids=["list-comprehension", "append", "dict-values", "generator", "await-names"],
)
def test_tasks_built_first_and_awaited_later(monty: MontyRuntime, script: str) -> None:
    step = expect_gather(run(monty, script))
    assert [c.keyword_args["x"] for c in step.calls] == [1, 2, 3]
    assert list(expect_complete(step.resume(answer(step))).value) == [10, 20, 30]


def test_non_ascii_text_before_the_call(monty: MontyRuntime) -> None:
    # non-ASCII text on an earlier line and before the calls on their own line: the offsets
    # found by CPython's ast are Monty's call positions (else the calls would run synchronously)
    script = (
        'import asyncio\nlabel = "naïve café ✓ 日本"\n'
        'k = "日本"; r = await asyncio.gather(call_tool("t", {"x": 1}), call_tool("t", {"x": 2}))  # ✓\n'
        "[label, r]\n"
    )
    step = expect_gather(monty.start(script))
    assert expect_complete(step.resume(answer(step))).value == ["naïve café ✓ 日本", [10, 20]]


def test_the_offsets_are_the_interpreters_call_positions() -> None:
    script = 'x = "é✓"; y = await call_tool("a", {})\nasync def f():\n    return await call_tool("b", {"q": "日本"})\n'
    tree = ast.parse(script)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    data = script.encode()
    offsets = deferred_offsets(script)
    assert len(offsets) == 2
    assert all(data[o:].startswith(b"call_tool(") for o in offsets)
    assert {ast.get_source_segment(script, c)[:9] for c in calls} == {"call_tool"}
    # CRLF line ends count as one line break, as CPython's tokenizer reads them
    crlf = script.replace("\n", "\r\n")
    assert all(crlf.encode()[o:].startswith(b"call_tool(") for o in deferred_offsets(crlf))


def test_calls_not_awaited_stay_synchronous() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        a = call_tool("a", {"v": call_tool("inner", {})})
        b = [call_tool("b", {}) for _ in range(2)]
        r = await asyncio.gather(call_tool("c", {"v": call_tool("d", {})}), g(lambda: call_tool("e", {})))
        """
    )
    data = script.encode()
    found = {data[o:].split(b'"')[1].decode() for o in deferred_offsets(script) if data[o:].startswith(b"call_tool")}
    assert "c" in found
    assert not found & {"a", "inner", "b", "d", "e"}
    assert deferred_offsets('call_tool("a", {})') == ()


def test_functions_style_tools_are_awaited_by_name() -> None:
    rt = MontyRuntime(tool_style="functions")
    step = expect_gather(rt.start("import asyncio\nr = await asyncio.gather(search(q='a'), search(q='b'))\nr\n"))
    assert [c.name for c in step.calls] == ["search", "search"]
    assert [c.keyword_args for c in step.calls] == [{"q": "a"}, {"q": "b"}]
    done = step.resume({c.call_id: ResumeValue(c.keyword_args["q"].upper()) for c in step.calls})
    assert expect_complete(done).value == ["A", "B"]


def test_the_time_limit_holds_across_gather_steps() -> None:
    from codeact import ResourceLimits

    rt = MontyRuntime(limits=ResourceLimits(max_duration=0.5))
    script = """
    import asyncio
    r = await asyncio.gather(call_tool("t", {"x": 1}), call_tool("t", {"x": 2}))
    while True:
        pass
    """
    step = expect_gather(run(rt, script))
    assert "TimeoutError" in last_line(expect_raised(step.resume(answer(step))).message)


def test_the_os_journal_spans_gather_steps() -> None:
    rt = MontyRuntime()
    script = """
    import asyncio, random
    first = random.random()
    r = await asyncio.gather(call_tool("t", {"x": 1}), call_tool("t", {"x": 2}))
    [first, random.random(), r]
    """
    step = expect_gather(run(rt, script))
    log = list(step.os_log)
    done = expect_complete(step.resume(answer(step)))
    log += list(done.os_log)
    # replaying the journal gives the same script state, gather included
    again = expect_gather(rt.start(textwrap.dedent(script), "main.py", os_replay=log))
    assert expect_complete(again.resume(answer(again), os_replay=log[len(step.os_log) :])).value == done.value


def test_process_isolation_forwards_gather() -> None:
    rt = MontyRuntime(isolation="process")
    assert rt.capabilities().supports_await
    step = expect_gather(run(rt, GATHER3))
    assert [c.keyword_args for c in step.calls] == [{"x": 1}, {"x": 2}, {"x": 3}]
    rest = expect_gather(step.resume({step.calls[0].call_id: ResumeValue("a")}))
    blob = rest.dump()
    done = rt.resume_gather(blob, {c.call_id: ResumeValue("z") for c in rest.calls})
    assert expect_complete(done).value == ["a", "z", "z"]


# ------------------------------------------------------------------ one call: run / arun


@pytest.mark.anyio
@pytest.mark.parametrize("isolation", ["in_process", "process"])
async def test_arun_runs_the_calls_of_a_gather_concurrently(anyio_backend: str, isolation: str) -> None:
    # each tool waits for the other to start: only a concurrent run finishes
    started = {"a": anyio.Event(), "b": anyio.Event()}

    async def tool(name: str, other: str) -> str:
        started[name].set()
        await started[other].wait()
        return name

    tools = {"a": lambda: tool("a", "b"), "b": lambda: tool("b", "a")}
    script = 'import asyncio\nawait asyncio.gather(call_tool("a"), call_tool("b"))'
    with anyio.fail_after(10):
        result = await MontyRuntime(isolation=isolation).arun(script, tools=tools)  # type: ignore[arg-type]
    assert list(result.value) == ["a", "b"]
    assert result.tool_calls == 2


def test_run_runs_sync_tools_of_a_gather_on_threads() -> None:
    import threading

    barrier = threading.Barrier(3, timeout=10)  # only three tools running at once get past it

    def tool(i: int) -> int:
        barrier.wait()
        return i * i

    script = "import asyncio\nawait asyncio.gather(*[call_tool('sq', {'i': i}) for i in range(3)])"
    result = MontyRuntime().run(script, tools={"sq": tool})
    assert list(result.value) == [0, 1, 4]


def test_run_raises_a_tool_error_in_the_gathering_script() -> None:
    def boom() -> None:
        raise KeyError("gone")

    script = (
        "import asyncio\ntry:\n    await asyncio.gather(call_tool('ok'), call_tool('boom'))\n"
        "except Exception as e:\n    r = type(e).__name__\nr"
    )
    assert MontyRuntime().run(script, tools={"ok": lambda: 1, "boom": boom}).value == "KeyError"
