"""Printed output while a script runs (``on_output``, ``LiveOutputRuntime``; issue 51 item 3):
on the real interpreter, what a script prints reaches the listener before the step that
carries it returns, also from one advance that calls no tool (a loop that prints and
sleeps), at most 10 deliveries a second, within ``max_stdout``; the steps are the same with
and without a listener; a listener that raises breaks nothing; the agent's call path (native
workers, the thread pool, a continuation's later advances, a restored continuation) keeps it.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

import pytest

from codeact.runtime import (
    Call,
    Complete,
    CPythonRuntime,
    LiveOutputRuntime,
    MontyRuntime,
    ResumeValue,
    RunStep,
)
from codeact.runtime._stepper import await_ticket, run_step


class Listener:
    """Records each call as ``(monotonic seconds, wall-clock seconds, stream, text, thread)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, str, str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, stream: str, text: str) -> None:
        with self._lock:
            self.calls.append((time.monotonic(), time.time(), stream, text, threading.get_ident()))

    def text(self, stream: str = "stdout") -> str:
        return "".join(c[3] for c in self.calls if c[2] == stream)

    def arrivals(self) -> list[float]:
        return [c[0] for c in self.calls]


def _drive(step: RunStep, reply: Any = "ok") -> list[RunStep]:
    """Every step of a run, answering each tool call with ``reply``."""
    steps = [step]
    while isinstance(step, Call):
        step = step.call.resume(ResumeValue(reply))
        steps.append(step)
    return steps


SLEEPY = """
import time
for i in range(3):
    print(i, time.time())
    time.sleep(0.2)
"done"
"""


def test_prints_of_a_sleeping_loop_arrive_while_it_runs_each_within_50_ms() -> None:
    listener = Listener()
    started = time.monotonic()
    step = MontyRuntime().start(SLEEPY, on_output=listener)
    ended = time.monotonic()
    assert isinstance(step, Complete) and step.value == "done"
    assert ended - started >= 0.6
    assert listener.text() == step.stdout
    lines = step.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["0", "1", "2"]
    # One delivery per print (they are 200 ms apart), in order, each while the script ran.
    assert [c[3] for c in listener.calls] == [line + "\n" for line in lines]
    for (_mono, wall, _stream, text, _thread), line in zip(listener.calls, lines, strict=True):
        printed_at = float(line.split()[1])
        assert wall - printed_at < 0.05, f"{text!r} came {wall - printed_at:.3f} s after its print"
    assert listener.arrivals()[-1] < ended - 0.1, "the last print arrived before the script ended"


def test_a_tight_print_loop_gets_at_most_10_deliveries_a_second() -> None:
    script = """
import time
t = time.time()
n = 0
while time.time() - t < 1.2:
    for _ in range(50):
        print("line", n)
        n += 1
    time.sleep(0.001)
n
"""
    listener = Listener()
    started = time.monotonic()
    step = MontyRuntime().start(script, on_output=listener)
    took = time.monotonic() - started
    assert isinstance(step, Complete) and step.value > 1000
    assert listener.text() == step.stdout
    arrivals = listener.arrivals()
    assert arrivals[0] - started < 0.05, "the first print arrives at once"
    # Deliveries start at least 100 ms apart (give or take the listener's own clock read);
    # only the flush as the step returns may come sooner.
    gaps = [b - a for a, b in itertools.pairwise(arrivals[:-1])]
    assert min(gaps) >= 0.095, gaps
    assert len(arrivals) <= took * 10 + 2
    assert len(arrivals) >= 8, "the loop's output streams while it runs"


def test_live_output_stays_within_max_stdout_with_the_marker_once() -> None:
    listener = Listener()
    runtime = MontyRuntime(max_stdout=100)
    step = runtime.start(
        'import sys\nfor i in range(50):\n    print("0123456789")\nprint("late", file=sys.stderr)\n1',
        on_output=listener,
    )
    assert isinstance(step, Complete)
    assert listener.text() == step.stdout
    assert listener.text("stderr") == step.stderr == ""
    assert step.stdout.count("stdout truncated") == 1
    assert step.stdout.startswith("0123456789\n" * 9 + "0")
    assert len(step.stdout.split("\n[stdout truncated")[0]) == 100


def test_a_listener_that_raises_breaks_nothing_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def broken(stream: str, text: str) -> None:
        calls.append(text)
        raise ValueError("listener down")

    with caplog.at_level(logging.WARNING, logger="codeact.runtime"):
        step = MontyRuntime().start(SLEEPY, on_output=broken)
    assert isinstance(step, Complete) and step.value == "done"
    assert len(step.stdout.splitlines()) == 3
    assert "".join(calls) == step.stdout, "it is called for every chunk, failing or not"
    logged = [r for r in caplog.records if r.name == "codeact.runtime"]
    assert len(logged) == 1 and "on_output" in logged[0].getMessage()
    assert logged[0].exc_info is not None and isinstance(logged[0].exc_info[1], ValueError)


MIXED = """
import sys
print("before")
a = call_tool("t", {})
print("err", a, file=sys.stderr)
for i in range(3):
    print("loop", i)
b = call_tool("t", {})
print("after", b)
{"a": a}
"""


def _fields(steps: list[RunStep]) -> list[tuple[str, str, str]]:
    return [(type(s).__name__, s.stdout, s.stderr) for s in steps]


def test_steps_are_the_same_with_and_without_a_listener_and_the_listener_gets_all_of_it() -> None:
    runtime = MontyRuntime()
    plain = _drive(runtime.start(MIXED))
    listener = Listener()
    live = _drive(runtime.start(MIXED, on_output=listener))
    assert _fields(live) == _fields(plain)
    assert isinstance(live[-1], Complete) and live[-1].value == {"a": "ok"}
    assert listener.text() == "".join(s.stdout for s in plain)
    assert listener.text("stderr") == "".join(s.stderr for s in plain) == "err ok\n"
    # In print order across the streams.
    assert [c[2] for c in listener.calls] == ["stdout", "stderr", "stdout"]


def test_output_before_a_tool_call_is_delivered_before_the_call_step_returns() -> None:
    listener = Listener()
    step = MontyRuntime().start('print("fetching")\ncall_tool("t", {})', on_output=listener)
    assert isinstance(step, Call)
    assert listener.text() == "fetching\n"


def test_output_held_back_at_a_pause_follows_within_100_ms_while_the_tool_runs() -> None:
    listener = Listener()
    step = MontyRuntime().start('print("a")\ncall_tool("t", {})\nprint("b")\ncall_tool("t", {})\n1', on_output=listener)
    assert isinstance(step, Call) and listener.text() == "a\n"
    step = step.call.resume(ResumeValue(None))
    assert isinstance(step, Call) and step.stdout == "b\n"
    # "b" came less than 100 ms after "a": not due at the pause, delivered by the delivery thread.
    deadline = time.monotonic() + 1.0
    while listener.text() != "a\nb\n" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.text() == "a\nb\n"
    gap = listener.arrivals()[1] - listener.arrivals()[0]
    assert 0.099 <= gap < 0.2
    last = step.call.resume(ResumeValue(None))
    assert isinstance(last, Complete) and len(listener.calls) == 2


@pytest.mark.anyio
async def test_the_agents_call_path_native_workers_and_a_continuations_later_advances() -> None:
    runtime = MontyRuntime()
    listener = Listener()
    script = 'import time\nprint("one")\ntime.sleep(0.15)\nx = call_tool("t", {})\nprint("two", x)\ntime.sleep(0.15)\nx'
    step = await run_step(runtime.start, script, "main.py", on_output=listener)
    assert isinstance(step, Call)
    assert listener.text() == "one\n"
    got = step.call.resume_within(ResumeValue(7), 0.001)
    step = got if isinstance(got, Complete) else await await_ticket(got, waited=True)
    assert isinstance(step, Complete) and step.value == 7
    assert listener.text() == "one\ntwo 7\n"
    assert all(c[4] != threading.get_ident() for c in listener.calls[:1]), "the first came off the caller's thread"


@pytest.mark.anyio
async def test_a_namespace_session_feed_on_the_thread_pool_streams_too() -> None:
    runtime = MontyRuntime()
    session = runtime.start_session()
    listener = Listener()
    step = await run_step(session.feed, SLEEPY, "main.py", on_output=listener)
    assert isinstance(step, Complete) and step.value == "done"
    assert listener.text() == step.stdout and len(listener.calls) == 3


def test_a_restored_continuation_takes_a_listener_for_its_later_advances() -> None:
    runtime = MontyRuntime()
    step = runtime.start('print("before")\ncall_tool("t", {})\nprint("after")\n1')
    assert isinstance(step, Call)
    listener = Listener()
    restored = runtime.restore(step.call.dump(), on_output=listener)
    assert isinstance(restored, Call)
    done = restored.call.resume(ResumeValue(None))
    assert isinstance(done, Complete) and done.stdout == "after\n"
    assert listener.text() == "after\n"


def test_capabilities_and_a_listener_that_cannot_be_called() -> None:
    runtime = MontyRuntime()
    assert runtime.capabilities().live_output
    assert isinstance(runtime, LiveOutputRuntime)
    assert not CPythonRuntime().capabilities().live_output
    with pytest.raises(TypeError, match="on_output must be callable"):
        runtime.start("1", on_output="not callable")  # type: ignore[arg-type]


def test_a_print_followed_by_silent_computing_arrives_at_once() -> None:
    listener = Listener()
    started = time.monotonic()
    step = MontyRuntime().start(
        'print("working")\nx = 0\nfor i in range(3_000_000):\n    x += i\nx', on_output=listener
    )
    ended = time.monotonic()
    assert isinstance(step, Complete) and step.stdout == "working\n"
    assert ended - started > 0.2, "the loop takes a while"
    assert listener.text() == "working\n"
    assert listener.arrivals()[0] - started < 0.05
