"""Small gaps of the Monty 1.4 runtime, each closed: sleeps that wait and count against the
time limit, gather's keyword arguments refused before the script runs, outcome classes
checked when built, snapshot bytes of the wrong kind named, and augmented assignments of
undefined names reported at the right place."""

from __future__ import annotations

import textwrap
import time

import pytest

from codeact import MontyRuntime, ResourceLimits, ResumeError, ResumeValue, SnapshotError, ValueConversionError
from codeact.runtime._check import check_script
from conftest import expect_call, expect_complete, expect_raised, last_line, run_child, start

# ------------------------------------------------------------------ sleeps

ASYNC_SLEEP = """
import asyncio
async def main():
    return await asyncio.sleep({s}, result='woke')
asyncio.run(main())
"""


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("import time\ntime.sleep(0.2)\n'woke'", id="time.sleep"),
        pytest.param(ASYNC_SLEEP.format(s=0.2), id="asyncio.sleep in asyncio.run"),
        pytest.param("import asyncio\nawait asyncio.sleep(0.2, result='woke')", id="top-level await"),
    ],
)
def test_a_sleep_really_waits_and_the_script_goes_on(script: str) -> None:
    t0 = time.perf_counter()
    assert expect_complete(start(MontyRuntime(), script)).value == "woke"
    assert 0.2 <= time.perf_counter() - t0 < 2.0


def test_asyncio_sleep_zero_does_not_wait() -> None:
    script = "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return 1\nasyncio.run(f())"
    t0 = time.perf_counter()
    assert expect_complete(start(MontyRuntime(), script)).value == 1
    assert time.perf_counter() - t0 < 0.5


def test_a_sleep_between_gathered_tool_calls_and_the_tools() -> None:
    script = """
    import asyncio
    async def later(x):
        await asyncio.sleep(0.1)
        return await call_tool('double', {'x': x})
    await asyncio.gather(later(1), later(2))
    """
    result = MontyRuntime().run(textwrap.dedent(script), tools={"double": lambda x: 2 * x})
    assert result.value == [2, 4]


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("import time\ntime.sleep(10)\n'late'", id="time.sleep"),
        pytest.param(ASYNC_SLEEP.format(s=10), id="asyncio.sleep"),
        pytest.param("import time\ntry:\n    time.sleep(10)\nexcept BaseException:\n    pass\n'late'", id="caught"),
    ],
)
def test_a_sleep_past_max_duration_ends_the_script_at_once_with_timeout_error(script: str) -> None:
    rt = MontyRuntime(ResourceLimits(max_duration=0.5))
    t0 = time.perf_counter()
    raised = expect_raised(start(rt, script))
    assert time.perf_counter() - t0 < 1.0
    assert last_line(raised.message).startswith("TimeoutError: time limit exceeded")
    assert "a sleep of 10s does not fit in the " in raised.message and " left of 500ms" in raised.message


def test_sleeps_add_up_against_max_duration() -> None:
    rt = MontyRuntime(ResourceLimits(max_duration=0.5))
    t0 = time.perf_counter()
    raised = expect_raised(start(rt, "import time\nfor i in range(20):\n    time.sleep(0.1)\n'late'"))
    assert 0.35 <= time.perf_counter() - t0 < 1.0
    assert last_line(raised.message).startswith("TimeoutError: time limit exceeded")


def test_max_duration_is_per_advance_for_sleeps_too() -> None:
    rt = MontyRuntime(ResourceLimits(max_duration=0.5))
    script = "import time\ntime.sleep(0.3)\ncall_tool('t')\ntime.sleep(0.3)\n'done'"
    call = expect_call(start(rt, script)).call
    assert expect_complete(call.resume(ResumeValue(None))).value == "done"


def test_without_a_time_limit_a_sleep_just_waits() -> None:
    t0 = time.perf_counter()
    assert (
        expect_complete(start(MontyRuntime(ResourceLimits.unlimited()), "import time\ntime.sleep(0.1)\n1")).value == 1
    )
    assert time.perf_counter() - t0 >= 0.1


def test_os_calls_in_a_loop_do_not_restart_the_time_limit() -> None:
    """Monty restarts its budget at every host round trip, OS calls included; a loop of them
    still ends at max_duration (in a child: before the fix this loop never ends)."""
    child = run_child(
        """
        from codeact import MontyRuntime, ResourceLimits
        rt = MontyRuntime(ResourceLimits(max_duration=0.3), environ={"A": "1"})
        step = rt.start("import os\\nwhile True:\\n    os.getenv('A')", "main.py")
        print(step.message.splitlines()[-1])
        """,
        timeout=30,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.startswith("TimeoutError: time limit exceeded")


LOOPS_THE_HOST_ANSWERS = {
    # each pass pauses the interpreter for the host, which answers it inside the advance
    "a tool call refused in the script": (
        "while True:\n    try:\n        call_tool(1)\n    except TypeError:\n        pass"
    ),
    "a name lookup": "while True:\n    try:\n        undefined_thing\n    except NameError:\n        pass",
}


@pytest.mark.parametrize("where", ["run", "session"])
@pytest.mark.parametrize("loop", sorted(LOOPS_THE_HOST_ANSWERS))
def test_loops_of_stops_the_host_answers_end_at_max_duration(loop: str, where: str) -> None:
    """Monty restarts its budget at every stop the advance answers itself (not only OS
    calls); such a loop still ends with TimeoutError close to max_duration (in a child: it
    used to run forever)."""
    feed = "rt.start_session().feed(SCRIPT)" if where == "session" else 'rt.start(SCRIPT, "main.py")'
    child = run_child(
        f"""
        import time
        from codeact import MontyRuntime, ResourceLimits
        SCRIPT = {LOOPS_THE_HOST_ANSWERS[loop]!r}
        rt = MontyRuntime(ResourceLimits(max_duration=0.3))
        t0 = time.perf_counter()
        step = {feed}
        print(round(time.perf_counter() - t0, 3), step.message.splitlines()[-1])
        """,
        timeout=30,
    )
    assert child.returncode == 0, child.stderr
    took, _, message = child.stdout.strip().partition(" ")
    assert message.startswith("TimeoutError: time limit exceeded"), child.stdout
    assert float(took) < 3.0, f"{loop}: ended after {took} s under max_duration=0.3"


def test_sleeps_under_process_isolation() -> None:
    rt = MontyRuntime(ResourceLimits(max_duration=0.5), isolation="process")
    t0 = time.perf_counter()
    assert expect_complete(start(rt, ASYNC_SLEEP.format(s=0.2))).value == "woke"
    assert time.perf_counter() - t0 >= 0.2
    t0 = time.perf_counter()
    raised = expect_raised(start(rt, "import time\ntime.sleep(10)"))
    assert time.perf_counter() - t0 < 1.0
    assert last_line(raised.message).startswith("TimeoutError")


def test_sleeps_in_a_namespace_session() -> None:
    session = MontyRuntime(ResourceLimits(max_duration=0.5)).start_session()
    t0 = time.perf_counter()
    assert expect_complete(session.feed("import asyncio\nx = await asyncio.sleep(0.2, result=5)\nx")).value == 5
    assert time.perf_counter() - t0 >= 0.2
    raised = expect_raised(session.feed("import time\nx = 6\ntime.sleep(10)"))
    assert last_line(raised.message).startswith("TimeoutError")
    assert expect_complete(session.feed("x")).value == 5  # the failed feed left the namespace as it was


# ------------------------------------------------------------------ gather(..., return_exceptions=True)

SAFE_GATHER = """
import asyncio
async def safe(name, args):
    try:
        return await call_tool(name, args)
    except Exception as e:
        return e
r = await asyncio.gather(safe('ok', {}), safe('boom', {}))
[type(x).__name__ + ': ' + str(x) if isinstance(x, Exception) else x for x in r]
"""


@pytest.mark.parametrize(
    "script",
    [
        "import asyncio\nr = await asyncio.gather(call_tool('a', {}), call_tool('b', {}), return_exceptions=True)",
        "import asyncio as aio\nasync def main():\n"
        "    return await aio.gather(call_tool('a', {}), return_exceptions=True)\naio.run(main())",
        "from asyncio import gather as g\nr = await g(call_tool('a', {}), return_exceptions=False)",
    ],
)
def test_gather_with_keyword_arguments_is_refused_before_anything_runs(script: str) -> None:
    findings = check_script(script).findings
    assert [f.key for f in findings] == ["gather_kwargs"]
    assert "async def safe(name, args)" in findings[0].message
    raised = expect_raised(MontyRuntime().start(script, "main.py"))  # not a Call: no tool ran
    assert raised.message.startswith("SubsetError") and "return_exceptions" in raised.message


def test_a_plain_gather_passes_the_check() -> None:
    script = "import asyncio\nr = await asyncio.gather(call_tool('a', {}), call_tool('b', {}))"
    assert check_script(script).findings == ()


def test_the_suggested_alternative_runs_and_keeps_each_error() -> None:
    def boom() -> None:
        raise ValueError("no luck")

    assert check_script(SAFE_GATHER).findings == ()
    result = MontyRuntime().run(SAFE_GATHER, tools={"ok": lambda: 1, "boom": boom})
    assert result.value == [1, "ValueError: no luck"]


# ------------------------------------------------------------------ ResumeError checks its fields


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((3,), "message must be a str such as"),
        ((b"bytes",), "not bytes"),
        (("m", 5), "exc_type must be a str such as 'ValueError', not int"),
        (("m", ValueError), "not the class ValueError: write exc_type='ValueError'"),
    ],
)
def test_resume_error_refuses_non_string_fields_when_built(args: tuple, needle: str) -> None:
    with pytest.raises(TypeError, match="ResumeError") as info:
        ResumeError(*args)
    assert needle in str(info.value)


def test_resume_error_keywords_and_defaults_still_work() -> None:
    assert ResumeError("m").exc_type == "RuntimeError"
    assert ResumeError("m", None).exc_type == "RuntimeError"
    assert ResumeError(message="m", exc_type="KeyError") == ResumeError("m", "KeyError")
    with pytest.raises(TypeError):
        ResumeError(message="m", exc_type=1)


def test_resume_value_takes_any_value_and_checks_it_at_resume(monty: MontyRuntime) -> None:
    outcome = ResumeValue(1j)  # built fine
    call = expect_call(start(monty, "call_tool('t')")).call
    with pytest.raises(ValueConversionError, match="value is a complex"):
        call.resume(outcome)


def test_resume_value_gives_the_script_a_set(monty: MontyRuntime) -> None:
    call = expect_call(start(monty, "s = call_tool('t')\n[type(s).__name__, sorted(s)]")).call
    assert expect_complete(call.resume(ResumeValue({3, 1, 2}))).value == ["set", [1, 2, 3]]


# ------------------------------------------------------------------ snapshot bytes of the wrong kind


@pytest.fixture(scope="module")
def blobs() -> dict[str, bytes]:
    rt = MontyRuntime()
    session = rt.start_session()
    session.feed("y = 1")
    idle = session.dump()
    suspended = expect_call(session.feed("z = call_tool('a', {})")).call.dump()
    gather = rt.start("import asyncio\nawait asyncio.gather(call_tool('a', {}), call_tool('b', {}))", "main.py")
    return {
        "run": expect_call(rt.start("call_tool('a', {})", "main.py")).call.dump(),
        "gather": gather.dump(),  # type: ignore[union-attr]
        "idle": idle,
        "suspended": suspended,
    }


RUN_METHODS = {
    "resume": lambda rt, b: rt.resume(b, ResumeValue(1)),
    "resume_gather": lambda rt, b: rt.resume_gather(b, {1: ResumeValue(1)}),
    "inspect": lambda rt, b: rt.inspect(b),
    "inspect_gather": lambda rt, b: rt.inspect_gather(b),
}
SESSION_METHODS = {
    "load_session": lambda rt, b: rt.load_session(b),
    "resume_session": lambda rt, b: rt.resume_session(b, ResumeValue(1)),
    "inspect_session": lambda rt, b: rt.inspect_session(b),
}


@pytest.mark.parametrize("method", RUN_METHODS)
@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("idle", "an idle namespace session (NamespaceSession.dump()), not a paused script: load them with "
         "MontyRuntime.load_session"),
        ("suspended", "a namespace session paused at a tool call (the Call.dump() of a NamespaceSession.feed), "
         "not a paused script: resume them with MontyRuntime.resume_session"),
    ],
)  # fmt: skip
def test_session_bytes_given_to_a_script_method_say_what_they_are(
    blobs: dict[str, bytes], method: str, kind: str, says: str
) -> None:
    with pytest.raises(SnapshotError) as info:
        RUN_METHODS[method](MontyRuntime(), blobs[kind])
    assert f"these bytes are {says}" in str(info.value)


@pytest.mark.parametrize("method", SESSION_METHODS)
@pytest.mark.parametrize("kind", ["run", "gather"])
def test_script_bytes_given_to_a_session_method_say_what_they_are(
    blobs: dict[str, bytes], method: str, kind: str
) -> None:
    with pytest.raises(SnapshotError) as info:
        SESSION_METHODS[method](MontyRuntime(), blobs[kind])
    assert "these bytes are a paused script (the dump of a Call or a Gather), not a namespace session: " in str(
        info.value
    )
    assert "resume_gather" in str(info.value)


@pytest.mark.parametrize(
    ("kind", "method", "says"),
    [
        ("gather", "resume", "resume it with resume_gather"),
        ("run", "resume_gather", "resume it with resume"),
        ("idle", "resume_session", "load it with load_session"),
        ("idle", "inspect_session", "load it with load_session"),
        ("suspended", "load_session", "resume it with resume_session"),
    ],
)
def test_the_other_mismatches_name_the_method_to_use(
    blobs: dict[str, bytes], kind: str, method: str, says: str
) -> None:
    with pytest.raises(SnapshotError, match=says):
        {**RUN_METHODS, **SESSION_METHODS}[method](MontyRuntime(), blobs[kind])


def test_each_kind_still_loads_where_it_belongs(blobs: dict[str, bytes]) -> None:
    rt = MontyRuntime()
    assert expect_complete(rt.resume(blobs["run"], ResumeValue(1))).value == 1
    assert rt.inspect_gather(blobs["gather"])[0][0] == "a"
    assert rt.load_session(blobs["idle"]).idle
    assert rt.inspect_session(blobs["suspended"])[0] == "a"


# ------------------------------------------------------------------ augmented assignment of an undefined name


@pytest.mark.parametrize(
    ("script", "frame", "line", "error"),
    [
        ("counter += 1", 'File "agent", line 1, in <module>', "counter += 1", "NameError: name 'counter' is"),
        ("# count\n\ncounter -= 2", 'File "agent", line 3, in <module>', "counter -= 2", "NameError"),
        ("x = 5\ncounter += 1", 'File "agent", line 2, in <module>', "counter += 1", "NameError"),
        ("def f():\n    n *= 2\nf()", 'File "agent", line 2, in f', "n *= 2", "UnboundLocalError"),
        ("def f():\n    global c\n    y = 2\n    c += 1\nf()", 'File "agent", line 4, in f', "c += 1", "NameError"),
    ],
)  # fmt: skip
def test_an_augmented_assignment_of_an_undefined_name_is_reported_at_its_line(
    monty: MontyRuntime, script: str, frame: str, line: str, error: str
) -> None:
    message = expect_raised(start(monty, script)).message
    assert "\x00" not in message
    lines = message.splitlines()
    at = lines.index(f"  {frame}")
    assert lines[at + 1] == f"    {line}"
    assert lines[at + 2].strip() == "~" * len(line.split()[0])
    assert last_line(message).startswith(error)
    assert "call_tool" not in last_line(message)  # not a called name: no tool hint


def test_in_the_functions_style_an_augmented_assignment_is_not_a_tool_call() -> None:
    rt = MontyRuntime(tool_style="functions")
    message = expect_raised(rt.start("counter += 1", "main.py")).message
    assert last_line(message) == "NameError: name 'counter' is not defined"
    assert 'File "main.py", line 1, in <module>' in message


def test_in_a_namespace_session_too() -> None:
    session = MontyRuntime().start_session()
    assert expect_complete(session.feed("a = 1")).value is None
    message = expect_raised(session.feed("a += 1\ncounter += 1")).message
    assert "\x00" not in message
    assert '  File "main.py", line 2, in <module>\n    counter += 1\n    ~~~~~~~\n' in message
    assert last_line(message) == "NameError: name 'counter' is not defined"


def test_other_tracebacks_are_unchanged(monty: MontyRuntime) -> None:
    message = expect_raised(start(monty, "x = 1\ny = x + undefined_name")).message
    assert message == (
        "Traceback (most recent call last):\n"
        '  File "agent", line 2, in <module>\n'
        "    y = x + undefined_name\n"
        "            ~~~~~~~~~~~~~~\n"
        "NameError: name 'undefined_name' is not defined"
    )


# ---------------------------------------------------------------- tool results and max_memory

BIG = "y" * (12 * 1024 * 1024)  # a 12 MiB tool result, for an 8 MiB limit
SMALL_LIMITS = ResourceLimits(max_memory=8 * 1024 * 1024)


def test_a_tool_result_larger_than_max_memory_is_a_memory_error_at_the_call() -> None:
    rt = MontyRuntime(SMALL_LIMITS)
    script = 'try:\n    r = call_tool("t", {})\nexcept MemoryError as e:\n    r = "caught: " + str(e)\nr'
    value = expect_complete(expect_call(start(rt, script)).call.resume(ResumeValue(BIG))).value
    assert value.startswith("caught: the tool's result needs about"), value
    # a result that fits still arrives whole
    assert expect_complete(expect_call(start(rt, script)).call.resume(ResumeValue("ok" * 1000))).value == "ok" * 1000


def test_in_a_session_a_too_large_result_leaves_later_scripts_working() -> None:
    # Before: the value entered the namespace uncounted; after the next failing script the
    # heap was recounted and every later script, even `1 + 1`, failed with MemoryError.
    session = MontyRuntime(SMALL_LIMITS).start_session()
    raised = expect_raised(expect_call(session.feed('r = call_tool("t", {})\nlen(r)')).call.resume(ResumeValue(BIG)))
    assert last_line(raised.message).startswith("MemoryError: the tool's result needs about")
    expect_raised(session.feed("1 / 0"))
    assert expect_complete(session.feed("1 + 1")).value == 2


def test_gathered_results_must_fit_together() -> None:
    session = MontyRuntime(SMALL_LIMITS).start_session()
    script = textwrap.dedent(
        """
        import asyncio
        async def one(n):
            try:
                return len(await call_tool("t", {"n": n}))
            except MemoryError:
                return "too big"
        await asyncio.gather(one(1), one(2))
        """
    )
    step = session.feed(script)
    half = "z" * (5 * 1024 * 1024)  # each fits alone, not both
    done = step.continuation.resume({c.call_id: ResumeValue(half) for c in step.calls})
    assert sorted(map(str, expect_complete(done).value)) == sorted([str(len(half)), "too big"])


@pytest.mark.parametrize("key", [-1, 2**70])
def test_a_gather_call_id_out_of_range_is_a_value_error(key: int) -> None:
    step = (
        MontyRuntime()
        .start_session()
        .feed("import asyncio\nawait asyncio.gather(call_tool('a', {}), call_tool('b', {}))")
    )
    with pytest.raises(ValueError, match="is not a call this Gather awaits"):
        step.continuation.resume({key: ResumeValue(1)})
    with pytest.raises(TypeError, match="keyed by the calls' call_id"):
        step.continuation.resume({"1": ResumeValue(1)})
    assert expect_complete(step.continuation.resume({c.call_id: ResumeValue(c.call_id) for c in step.calls})).value
