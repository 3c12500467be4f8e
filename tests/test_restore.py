"""``MontyRuntime.restore`` / ``restore_session``: any paused bytes open into the one live
continuation of the step they paused at (a call or a gather, of a script or a session's feed)."""

from __future__ import annotations

import pytest

from codeact import MontyRuntime
from codeact.exceptions import CodeRuntimeError, SnapshotError
from codeact.runtime import Call, Complete, Gather, ResumeValue, SessionRestoringRuntime, SuspendingRuntime

GATHER = "import asyncio\na, b = await asyncio.gather(call_tool('a', {'n': 1}), call_tool('b', {}))\na + b"


def test_a_paused_call_restores_live_and_dumps_its_own_bytes() -> None:
    rt = MontyRuntime()
    step = rt.start("x = call_tool('t', {'q': 'w'})\nx * 2")
    assert isinstance(step, Call)
    blob = step.call.dump()
    restored = rt.restore(blob)
    assert isinstance(restored, Call)
    call = restored.call
    assert (call.name, call.keyword_args, call.call_id) == ("t", {"q": "w"}, step.call.call_id)
    assert call.dump() == blob
    done = call.resume(ResumeValue(21))
    assert isinstance(done, Complete) and done.value == 42
    with pytest.raises(CodeRuntimeError, match="already resumed"):
        call.resume(ResumeValue(1))
    with pytest.raises(CodeRuntimeError, match="already resumed"):
        call.dump()


def test_a_paused_gather_restores_with_its_calls() -> None:
    rt = MontyRuntime()
    step = rt.start(GATHER)
    assert isinstance(step, Gather)
    restored = rt.restore(step.dump())
    assert isinstance(restored, Gather)
    assert [(c.name, c.keyword_args) for c in restored.calls] == [("a", {"n": 1}), ("b", {})]
    ids = [c.call_id for c in restored.calls]
    rest = restored.resume({ids[0]: ResumeValue(1)})
    assert isinstance(rest, Gather) and [c.call_id for c in rest.calls] == ids[1:]
    done = rest.resume({ids[1]: ResumeValue(2)})
    assert isinstance(done, Complete) and done.value == 3


def test_session_bytes_restore_with_their_session() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    assert isinstance(session.feed("base = 10"), Complete)
    step = session.feed("y = call_tool('t', {}) + base\ny")
    assert isinstance(step, Call)
    restored_session, restored = rt.restore_session(step.call.dump())
    assert isinstance(restored, Call) and restored.call.name == "t"
    assert not restored_session.idle
    done = restored.call.resume(ResumeValue(5))
    assert isinstance(done, Complete) and done.value == 15
    assert restored_session.idle
    assert isinstance(follow := restored_session.feed("y + 1"), Complete) and follow.value == 16


def test_each_kind_of_bytes_is_refused_by_the_other_opener() -> None:
    rt = MontyRuntime()
    session = rt.start_session()
    paused = session.feed("call_tool('t', {})")
    assert isinstance(paused, Call)
    with pytest.raises(SnapshotError, match="namespace session paused at a tool call"):
        rt.restore(paused.call.dump())
    run = rt.start("call_tool('t', {})")
    assert isinstance(run, Call)
    with pytest.raises(SnapshotError, match="paused script"):
        rt.restore_session(run.call.dump())
    with pytest.raises(SnapshotError):
        rt.restore(b"not a snapshot")


def test_the_runtimes_describe_the_restoring_seam() -> None:
    assert isinstance(MontyRuntime(), SessionRestoringRuntime)
    assert isinstance(MontyRuntime(isolation="process"), SuspendingRuntime)


def test_process_isolation_restores_the_same_steps() -> None:
    rt = MontyRuntime(isolation="process")
    step = rt.start(GATHER)
    assert isinstance(step, Gather)
    blob = step.dump()
    restored = rt.restore(blob)
    assert isinstance(restored, Gather) and restored.dump() == blob
    done = restored.resume({c.call_id: ResumeValue(i) for i, c in enumerate(restored.calls, 1)})
    assert isinstance(done, Complete) and done.value == 3
