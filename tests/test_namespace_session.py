"""Namespace sessions on the real interpreter (`MontyRuntime.start_session`, ADR 0003):
every kind of value carries from script to script, through dumps and loads between
scripts and at a paused tool call; a failing script leaves the namespace it started with;
tracebacks name the script; limits cover the session."""

from __future__ import annotations

import gc
import textwrap

import pytest

from codeact import (
    CodeRuntimeError,
    CPythonRuntime,
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
