"""The OS journal (INTERFACES.md): every nondeterministic answer the native side gives a
script (clock reads, the random seed, entropy) is logged in the step's ``os_log`` and can
be replayed in order through ``os_replay``; a replay the script no longer follows raises
``ReplayDivergenceError``."""

from __future__ import annotations

import os
import warnings

import pytest

from codeact import MontyRuntime, ReplayDivergenceError, ResumeValue
from codeact.exceptions import CodeRuntimeError
from conftest import expect_call, expect_complete, start

SCRIPT = """\
import random, time
from datetime import datetime, date
a = time.time()
b = datetime.now().isoformat()
r = call_tool("tick", {})
c = random.random()
d = date.today().isoformat()
[a, b, r, c, d]
"""


def _run(rt: MontyRuntime, replay: list[tuple[str, object]]) -> tuple[list[object], list[tuple[str, object]]]:
    step = rt.start(SCRIPT, os_replay=replay)
    log = list(step.os_log)
    call = expect_call(step).call
    done = expect_complete(call.resume(ResumeValue(7), os_replay=replay[len(log) :]))
    log += list(done.os_log)
    return done.value, log


def test_clock_reads_and_the_seed_are_logged_in_order() -> None:
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    value, log = _run(rt, [])
    kinds = [k for k, _ in log]
    assert kinds == ["random_seed", "clock", "clock", "clock"]
    assert isinstance(log[0][1], int)
    assert all(isinstance(v, float) for _, v in log[1:])
    assert value[0] == log[1][1]  # time.time() is the logged instant


def test_a_replay_reproduces_the_run_exactly() -> None:
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    first, log = _run(rt, [])
    second, log2 = _run(rt, log)
    assert second == first  # the clock values and the random draw
    assert log2 == log


def test_a_different_seed_gives_a_different_draw() -> None:
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    first, log = _run(rt, [])
    changed = [("random_seed", log[0][1] + 1), *log[1:]]
    second, _ = _run(rt, changed)
    assert second[3] != first[3] and second[:3] == first[:3]


def test_a_divergent_replay_raises() -> None:
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    with pytest.raises(ReplayDivergenceError) as info:
        rt.start(SCRIPT, os_replay=[("random_seed", 1), ("urandom", "00")])
    assert isinstance(info.value, CodeRuntimeError)
    assert "'clock'" in str(info.value) and "'urandom'" in str(info.value)


def test_urandom_is_journaled_as_hex() -> None:
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    step = expect_complete(start(rt, "import os\nos.urandom(4).hex()"))
    assert step.os_log[1] == ("urandom", step.value)
    again = rt.start("import os\nos.urandom(4).hex()", os_replay=step.os_log)
    assert again.value == step.value


def test_without_the_clock_nothing_is_logged_but_the_seed() -> None:
    rt = MontyRuntime(system_clock=False, check_scripts=False, rewrite_scripts=False)
    step = rt.start("from datetime import date\ntry:\n    date.today()\nexcept OSError:\n    r = 'refused'\nr")
    assert expect_complete(step).value == "refused"
    assert [k for k, _ in step.os_log] == ["random_seed"]


def test_the_process_isolation_mode_logs_and_replays_too() -> None:
    rt = MontyRuntime(isolation="process", check_scripts=False, rewrite_scripts=False)
    first, log = _run(rt, [])
    second, _ = _run(rt, log)
    assert second == first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is Unix-only")
def test_a_forked_child_draws_other_seeds_than_its_parent() -> None:
    # The seed mixes the process id, read once per process and forgotten in a forked child:
    # parent and child share the key and the counter, so only the child's own id tells
    # their next seeds apart. The same cached id picks the step-worker pool, whose threads
    # do not survive a fork: the child's async step only completes on a pool of its own.
    rt = MontyRuntime(check_scripts=False, rewrite_scripts=False)
    assert expect_complete(rt.start("1")).os_log[0][0] == "random_seed"  # the id is cached now
    warm = rt.start_async("1")
    assert warm.wait(30.0)
    assert expect_complete(warm.result()).value == 1  # the parent's pool exists now
    read, write = os.pipe()
    with warnings.catch_warnings():
        # fork with threads: the child only starts scripts, on its own workers
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ticket = rt.start_async("2")
            if ticket.wait(30.0) and expect_complete(ticket.result()).value == 2:
                seeds = [str(rt.start("1").os_log[0][1]) for _ in range(3)]
                os.write(write, ",".join(seeds).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent = [str(rt.start("1").os_log[0][1]) for _ in range(3)]
    assert len(child) == 3, "the child's async step did not complete on its own workers"
    assert not set(child) & set(parent)
