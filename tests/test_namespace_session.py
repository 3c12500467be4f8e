"""Namespace sessions on the real interpreter (`MontyRuntime.start_session`, ADR 0003):
every kind of value carries from script to script, through dumps and loads between
scripts and at a paused tool call; a failing script leaves the namespace it started with;
tracebacks name the script; limits cover the session; ``asyncio.gather`` over tool calls
pauses a feed at a ``Gather`` that settles in any order, dumps and resumes from bytes."""

from __future__ import annotations

import gc
import textwrap

import pytest

from codeact import (
    CodeRuntimeError,
    CPythonRuntime,
    Gather,
    MontyRuntime,
    NamespaceSession,
    ResourceLimits,
    ResumeError,
    ResumeValue,
    SnapshotError,
)
from codeact.runtime.monty import MiB
from conftest import expect_call, expect_complete, expect_raised, last_line

DEFINE_EVERYTHING = """
import json

def counter():
    n = 0
    def bump():
        nonlocal n
        n += 1
        return n
    return bump

class Box:
    def __init__(self, v):
        self.v = v
    def double(self):
        return self.v * 2

def inc(x):
    return x + 1

bump = counter()
bump()
square = lambda x: x * x
it = iter([1, 2, 3])
next(it)
seen = {1, 2}
box = Box(7)
data = {"rows": [1, 2, 3]}
"""

USE_EVERYTHING = """
seen.add(3)
[bump(), square(3), next(it), sorted(seen), box.double(), inc(1), json.dumps(data), isinstance(box, Box)]
"""

EXPECTED = [2, 9, 2, [1, 2, 3], 14, 2, '{"rows": [1, 2, 3]}', True]


def feed(session: NamespaceSession, script: str, **kw):
    return session.feed(textwrap.dedent(script), "main.py", **kw)


def test_every_kind_of_value_carries_to_the_next_script() -> None:
    session = MontyRuntime().start_session()
    assert expect_complete(feed(session, DEFINE_EVERYTHING)).value is None
    assert expect_complete(feed(session, USE_EVERYTHING)).value == EXPECTED
    # and on: the closure's state and the iterator moved on
    assert expect_complete(feed(session, "[bump(), next(it), len(seen)]")).value == [3, 3, 3]


def test_every_kind_of_value_survives_a_dump_and_load_between_scripts() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    expect_complete(feed(session, DEFINE_EVERYTHING))
    data = session.dump()
    assert isinstance(data, bytes) and data[:4] == b"CAMS"
    # a fresh runtime of the same configuration, as after a restart
    restored = MontyRuntime().load_session(data)
    assert expect_complete(feed(restored, USE_EVERYTHING)).value == EXPECTED
    # the original session is unaffected by the copy's progress
    assert expect_complete(feed(session, "bump()")).value == 2


def test_a_paused_tool_call_resumes_in_place_and_the_namespace_goes_on() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "total = 10\ndef add(x):\n    return total + x"))
    step = expect_call(feed(session, 'r = call_tool("lookup", {"key": "a"})\ntotal = add(r)\ntotal'))
    assert step.call.name == "lookup" and step.call.keyword_args == {"key": "a"}
    assert not session.idle
    with pytest.raises(CodeRuntimeError, match="paused at a tool call"):
        session.feed("1", "main.py")
    with pytest.raises(CodeRuntimeError):
        session.dump()
    assert expect_complete(step.call.resume(ResumeValue(5))).value == 15
    assert session.idle
    assert expect_complete(feed(session, "total")).value == 15


def test_a_session_paused_at_a_tool_call_resumes_from_bytes_after_a_restart() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, DEFINE_EVERYTHING))
    step = expect_call(feed(session, 'got = call_tool("fetch", {"n": bump()})\n[got, bump(), next(it)]'))
    assert step.call.keyword_args == {"n": 2}
    snapshot = step.call.dump()
    assert step.call.dump() == snapshot  # dumping leaves the call live, and is repeatable
    del step, session
    gc.collect()
    rt = MontyRuntime()
    with pytest.raises(SnapshotError, match="paused at a tool call"):
        rt.load_session(snapshot)
    restored, result = rt.resume_session(snapshot, ResumeValue("ok"))
    assert expect_complete(result).value == ["ok", 3, 2]
    assert restored.idle
    assert expect_complete(feed(restored, USE_EVERYTHING)).value == [
        4,
        9,
        3,
        [1, 2, 3],
        14,
        2,
        '{"rows": [1, 2, 3]}',
        True,
    ]
    # the same bytes resume again, independently (a retried recovery)
    again, result = rt.resume_session(snapshot, ResumeError("boom", "ValueError"))
    message = expect_raised(result).message
    assert last_line(message) == "ValueError: boom"
    # the failed feed left the namespace it started with: bump was called once by it, undone
    assert expect_complete(feed(again, "bump()")).value == 2


def test_a_failing_script_leaves_the_namespace_it_started_with() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "x = 1\nitems = [1]"))
    step = expect_raised(feed(session, "x = 2\ny = 3\nitems.append(2)\n1 / 0"))
    assert last_line(step.message).startswith("ZeroDivisionError")
    assert expect_complete(feed(session, "[x, items]")).value == [1, [1]]
    assert last_line(expect_raised(feed(session, "y")).message).startswith("NameError")
    # a syntax error, and a failure after a tool call, change nothing either
    expect_raised(feed(session, "x = (3"))
    call = expect_call(feed(session, 'x = 4\nitems.append(call_tool("t", {}))\nraise ValueError("late")')).call
    assert last_line(expect_raised(call.resume(ResumeValue(9))).message) == "ValueError: late"
    assert expect_complete(feed(session, "[x, items]")).value == [1, [1]]


def test_a_dropped_paused_feed_returns_the_session_to_the_feeds_start() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "x = 1"))
    step = expect_call(feed(session, 'x = 2\ncall_tool("t", {})'))
    del step
    gc.collect()
    assert session.idle
    assert expect_complete(feed(session, "x")).value == 1


def test_tracebacks_name_the_script_not_the_interpreters_input_numbers() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "def f(d):\n    return 1 / d"))
    message = expect_raised(session.feed("a = 1\nf(0)", "turn2.py")).message
    assert "python-input" not in message
    assert 'File "turn2.py", line 2' in message
    assert 'File "<script 1>", line 2, in f' in message
    assert last_line(message).startswith("ZeroDivisionError")
    # a rolled-back feed does not count: the next script is still the session's second
    message = expect_raised(feed(session, "f(0)")).message
    assert 'File "main.py", line 1' in message and "<script 1>" in message


def test_the_result_must_be_plain_data_and_a_non_plain_result_rolls_back() -> None:
    session = MontyRuntime().start_session()
    step = expect_raised(feed(session, "g = lambda: 1\ng"))
    assert "plain data" in step.message
    assert last_line(expect_raised(feed(session, "g")).message).startswith("NameError")


def test_tool_hints_and_os_journal_work_as_in_a_run() -> None:
    session = MontyRuntime().start_session()
    message = expect_raised(feed(session, "search_web('x')")).message
    assert "Tools are not Python functions here" in message
    step = expect_complete(feed(session, "import time\nt = time.time()\nt"))
    assert step.os_log and step.os_log[0][0]
    # replaying the journal on a copy of the session before the script gives the same value
    replayed = MontyRuntime().start_session()
    again = expect_complete(replayed.feed("import time\nt = time.time()\nt", "main.py", os_replay=step.os_log))
    assert again.value == step.value
    out = expect_complete(feed(session, "print('hi', t == t)\n1"))
    assert out.stdout == "hi True\n"


def test_session_bytes_are_checked_like_snapshots() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    expect_complete(feed(session, "x = [1, 2, 3]"))
    data = session.dump()
    altered = bytearray(data)
    altered[len(altered) // 2] ^= 1
    with pytest.raises(SnapshotError):
        rt.load_session(bytes(altered))
    with pytest.raises(SnapshotError):
        rt.load_session(data[:-5])
    # a run's continuation is not a session, and a session is not a run's continuation
    paused = expect_call(rt.start('call_tool("t", {})', "main.py"))
    with pytest.raises(SnapshotError, match="not a namespace session"):
        rt.load_session(paused.call.dump())
    with pytest.raises(SnapshotError):
        rt.resume(data, ResumeValue(1))
    # signed sessions load only under their key
    key = b"k" * 32
    signed = MontyRuntime(snapshot_key=key).start_session()
    expect_complete(feed(signed, "x = 1"))
    signed_bytes = signed.dump()
    with pytest.raises(SnapshotError):
        MontyRuntime(snapshot_key=b"o" * 32).load_session(signed_bytes)
    with pytest.raises(SnapshotError):
        rt.load_session(signed_bytes)
    assert expect_complete(feed(MontyRuntime(snapshot_key=key).load_session(signed_bytes), "x")).value == 1


def test_max_memory_counts_the_carried_namespace() -> None:
    limits = ResourceLimits(max_memory=24 * MiB, max_duration=10.0)
    # alone, 14 MiB fits
    fresh = MontyRuntime(limits).start_session()
    expect_complete(feed(fresh, "b = 'y' * (14 * 1024 * 1024)\nlen(b)"))
    # beside a carried 14 MiB it does not
    session = MontyRuntime(limits).start_session()
    expect_complete(feed(session, "a = 'x' * (14 * 1024 * 1024)\nlen(a)"))
    assert session.memory_used >= 14 * MiB
    message = expect_raised(feed(session, "b = 'y' * (14 * 1024 * 1024)\nlen(b)")).message
    assert "MemoryError" in message
    # the namespace is intact, and dropping the carried value frees room
    assert expect_complete(feed(session, "a = None\nb = 'y' * (14 * 1024 * 1024)\nlen(b)")).value == 14 * MiB


def test_max_duration_applies_per_script() -> None:
    session = MontyRuntime(ResourceLimits(max_duration=0.3)).start_session()
    expect_complete(feed(session, "n = 0"))
    message = expect_raised(feed(session, "while True:\n    n += 1")).message
    assert "TimeoutError" in message or "time limit" in message
    assert expect_complete(feed(session, "n")).value == 0


def test_capabilities_report_namespace_sessions() -> None:
    assert MontyRuntime().capabilities().supports_namespace_session is True
    process = MontyRuntime(isolation="process")
    assert process.capabilities().supports_namespace_session is False
    with pytest.raises(CodeRuntimeError, match="in_process"):
        process.start_session()
    assert CPythonRuntime().capabilities().supports_namespace_session is False
    assert MontyRuntime(namespace_sessions=False).capabilities().supports_namespace_session is False


# --------------------------------------------------------------------- asyncio.gather in a feed

GATHER_THREE = """
import asyncio
a, b, c = await asyncio.gather(
    call_tool("t", {"n": 1}), call_tool("t", {"n": bump()}), call_tool("t", {"n": 3})
)
total = a + b + c
[a, b, c]
"""


def expect_gather(step: object) -> Gather:
    assert isinstance(step, Gather), step
    return step


def test_a_gather_in_a_feed_settles_out_of_order_in_subsets_and_the_namespace_carries() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, DEFINE_EVERYTHING))
    step = expect_gather(feed(session, GATHER_THREE))
    assert [(c.name, c.keyword_args) for c in step.calls] == [("t", {"n": 1}), ("t", {"n": 2}), ("t", {"n": 3})]
    assert not session.idle
    with pytest.raises(CodeRuntimeError, match="paused"):
        session.feed("1", "main.py")
    first, second, third = (c.call_id for c in step.calls)
    with pytest.raises(CodeRuntimeError, match="resume the Gather"):
        step.calls[0].resume(ResumeValue(1))
    with pytest.raises(ValueError, match="not a call this Gather awaits"):
        step.resume({999: ResumeValue(1)})
    # the last call returns first; the script still waits on the other two
    rest = expect_gather(step.resume({third: ResumeValue(300)}))
    assert [c.call_id for c in rest.calls] == [first, second]
    with pytest.raises(CodeRuntimeError, match="already resumed"):
        step.resume({first: ResumeValue(1)})
    rest = expect_gather(rest.resume({second: ResumeValue(20)}))
    assert expect_complete(rest.resume({first: ResumeValue(1)})).value == [1, 20, 300]
    assert session.idle
    # what the feed assigned carries on, beside what earlier feeds defined
    assert expect_complete(feed(session, "[total, bump(), next(it)]")).value == [321, 3, 2]


def test_a_session_paused_at_a_gather_resumes_from_bytes_in_a_fresh_runtime() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, DEFINE_EVERYTHING))
    step = expect_gather(feed(session, GATHER_THREE))
    ids = [c.call_id for c in step.calls]
    snapshot = step.dump()
    assert step.calls[1].dump() == snapshot  # a call's dump is its gather's
    del step, session
    gc.collect()
    rt = MontyRuntime()
    assert rt.inspect_session_gather(snapshot) == tuple(
        ("t", (), {"n": n}, i) for n, i in zip((1, 2, 3), ids, strict=True)
    )
    assert rt.inspect_session(snapshot) == ("t", (), {"n": 1}, ids[0])
    with pytest.raises(SnapshotError, match="resume_session_gather"):
        rt.load_session(snapshot)
    with pytest.raises(SnapshotError, match="resume_session_gather"):
        rt.resume_session(snapshot, ResumeValue(1))
    with pytest.raises(SnapshotError, match="not a namespace session"):
        rt.resume_session_gather(expect_call(rt.start('call_tool("t", {})')).call.dump(), {0: ResumeValue(1)})
    restored, partial = rt.resume_session_gather(snapshot, {ids[0]: ResumeValue(1), ids[2]: ResumeValue(3)})
    partial = expect_gather(partial)
    assert [c.call_id for c in partial.calls] == [ids[1]]
    assert expect_complete(partial.resume({ids[1]: ResumeValue(2)})).value == [1, 2, 3]
    assert restored.idle
    assert expect_complete(feed(restored, "[total, bump(), next(it), box.double()]")).value == [6, 3, 2, 14]
    # the same bytes resume again, independently (a retried recovery); an uncaught error
    # outcome ends the feed, and the namespace is the one it started with
    again, raised = rt.resume_session_gather(snapshot, {i: ResumeError("boom", "ValueError") for i in ids})
    assert last_line(expect_raised(raised).message) == "ValueError: boom"
    assert expect_complete(feed(again, "bump()")).value == 2  # bump() inside the feed was undone
    assert last_line(expect_raised(feed(again, "total")).message).startswith("NameError")


def test_a_gather_bytes_and_a_call_bytes_are_told_apart() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    call = expect_call(feed(session, 'x = call_tool("t", {})\nx'))
    with pytest.raises(SnapshotError, match="resume_session"):
        rt.resume_session_gather(call.call.dump(), {call.call.call_id: ResumeValue(1)})
    assert expect_complete(call.call.resume(ResumeValue(1))).value == 1
    with pytest.raises(SnapshotError, match="load_session"):
        rt.resume_session_gather(session.dump(), {0: ResumeValue(1)})


def test_a_raising_gather_feed_leaves_the_namespace_it_started_with() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "x = 1\nitems = [1]"))
    script = """
    import asyncio
    x = 2
    items.append(2)
    got = await asyncio.gather(call_tool("t", {}), call_tool("u", {}))
    items.append(got)
    raise ValueError("late")
    """
    step = expect_gather(feed(session, script))
    message = expect_raised(step.resume({c.call_id: ResumeValue(7) for c in step.calls})).message
    assert last_line(message) == "ValueError: late"
    assert 'File "main.py", line 7' in message
    assert expect_complete(feed(session, "[x, items]")).value == [1, [1]]
    assert last_line(expect_raised(feed(session, "got")).message).startswith("NameError")


def test_an_error_outcome_is_caught_by_the_script() -> None:
    session = MontyRuntime().start_session()
    script = """
    import asyncio
    try:
        r = await asyncio.gather(call_tool("t", {"n": 1}), call_tool("t", {"n": 2}))
    except PermissionError as e:
        r = "caught: " + str(e)
    r
    """
    step = expect_gather(feed(session, script))
    first, second = (c.call_id for c in step.calls)
    step = expect_gather(step.resume({second: ResumeValue(2)}))
    step = step.resume({first: ResumeError("denied", "PermissionError")})
    assert expect_complete(step).value == "caught: denied"
    assert expect_complete(feed(session, "r")).value == "caught: denied"


def test_a_coroutine_an_earlier_feed_defined_gathers_its_calls_also_after_a_dump() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    expect_complete(
        feed(session, 'import asyncio\nasync def fetch(k):\n    v = await call_tool("get", {"k": k})\n    return v * 2')
    )
    for current in (session, rt.load_session(session.dump())):
        step = expect_gather(feed(current, "await asyncio.gather(fetch(1), fetch(2))"))
        assert [c.keyword_args for c in step.calls] == [{"k": 1}, {"k": 2}]
        outcomes = {c.call_id: ResumeValue(c.keyword_args["k"] * 10) for c in step.calls}
        assert expect_complete(step.resume(outcomes)).value == [20, 40]
    # one awaited call alone is an ordinary call
    call = expect_call(feed(session, "await fetch(5)"))
    assert expect_complete(call.call.resume(ResumeValue(1))).value == 2


def test_a_dropped_gather_returns_the_session_to_the_feeds_start() -> None:
    session = MontyRuntime().start_session()
    expect_complete(feed(session, "x = 1"))
    step = feed(session, 'import asyncio\nx = 2\nawait asyncio.gather(call_tool("t", {}), call_tool("u", {}))')
    expect_gather(step)
    del step
    gc.collect()
    assert session.idle
    assert expect_complete(feed(session, "x")).value == 1


def test_a_call_while_a_started_call_waits_dumps_both() -> None:
    """A script that starts an awaited call, then calls a tool synchronously: the paused
    call's bytes carry the started call too, and the gather that follows settles it."""
    session = MontyRuntime().start_session()
    script = """
    import asyncio
    t = call_tool("slow", {"n": 1})
    now = call_tool("fast", {"n": 2})
    later = await asyncio.gather(t, call_tool("slow", {"n": 3}))
    [now, later]
    """
    call = expect_call(feed(session, script)).call
    assert call.name == "fast"
    snapshot = call.dump()
    del call, session
    gc.collect()
    restored, step = MontyRuntime().resume_session(snapshot, ResumeValue("f"))
    step = expect_gather(step)
    assert [c.keyword_args for c in step.calls] == [{"n": 1}, {"n": 3}]
    done = step.resume({c.call_id: ResumeValue(c.keyword_args["n"]) for c in step.calls})
    assert expect_complete(done).value == ["f", [1, 3]]
    assert expect_complete(feed(restored, "now")).value == "f"


def test_a_lower_cap_applies_to_a_session_restored_mid_feed() -> None:
    """Restored at a gather or at one call, a session runs under the restoring runtime's
    limits, tightened (the stricter of those and the stored ones)."""
    held, more = f'held = "y" * (3 * {MiB})', f'more = "z" * (4 * {MiB})'
    roomy, tight = ResourceLimits(max_memory=20 * MiB), ResourceLimits(max_memory=5 * MiB)
    script = f'import asyncio\n{held}\nawait asyncio.gather(call_tool("t", {{}}), call_tool("u", {{}}))\n{more}\n1'
    step = expect_gather(feed(MontyRuntime(roomy).start_session(), script))
    snapshot, outcomes = step.dump(), {c.call_id: ResumeValue(1) for c in step.calls}
    _, small = MontyRuntime(tight).resume_session_gather(snapshot, outcomes)
    assert "MemoryError" in expect_raised(small).message
    _, same = MontyRuntime(roomy).resume_session_gather(snapshot, outcomes)
    assert expect_complete(same).value == 1
    call = expect_call(feed(MontyRuntime(roomy).start_session(), f'{held}\nx = call_tool("t", {{}})\n{more}\nx'))
    snapshot = call.call.dump()
    assert "MemoryError" in expect_raised(MontyRuntime(tight).resume_session(snapshot, ResumeValue(1))[1]).message
    assert expect_complete(MontyRuntime(roomy).resume_session(snapshot, ResumeValue(1))[1]).value == 1


def test_a_gather_in_the_functions_style() -> None:
    session = MontyRuntime(tool_style="functions").start_session()
    expect_complete(feed(session, "import asyncio\nqueries = ['a', 'b']"))
    step = expect_gather(feed(session, "hits = await asyncio.gather(*[search(q) for q in queries])\nhits"))
    assert [(c.name, c.positional_args) for c in step.calls] == [("search", ("a",)), ("search", ("b",))]
    done = step.resume({c.call_id: ResumeValue(c.positional_args[0].upper()) for c in step.calls})
    assert expect_complete(done).value == ["A", "B"]
    assert expect_complete(feed(session, "hits")).value == ["A", "B"]
