"""``MontyRuntime(isolation="process")``: the runtime suite, unchanged, against the worker
pool; and crash containment (what ``in_process`` cannot promise, ``process`` does)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codeact import Call, CodeRuntimeError, Complete, MontyRuntime, ResourceLimits, ResumeValue, SnapshotError
from codeact.runtime import _process
from conftest import change_bytes, forge

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RUNTIME_SUITE = [
    "tests/test_monty_drive.py",
    "tests/test_monty_limits.py",
    "tests/test_monty_os.py",
    "tests/test_snapshot.py",
    "tests/test_seam.py",
]
# Timing test of the GIL: in process mode scripts run in other processes (there is no GIL
# to release), and its 1.8x threshold is about threads of one process.
DESELECT = ["tests/test_monty_limits.py::test_the_gil_is_released_while_a_script_runs"]


def test_the_runtime_suite_passes_with_process_isolation():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "_process_mode", "-p", "no:cacheprovider", *RUNTIME_SUITE]
    cmd += [f"--deselect={d}" for d in DESELECT]
    child = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    summary = child.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and not re.search(r"\d+ failed", summary), summary


def forged(snapshot: bytes, seed: int) -> bytes:
    """``snapshot`` with one to three payload bytes altered and its SHA-256 recomputed."""
    import random

    return forge(snapshot, change_bytes(random.Random(seed)))


def test_forged_unsigned_snapshots_cannot_crash_the_host_in_process_mode():
    """The known in-process limitation (docs/security.md, "What is not guaranteed") is contained:
    a worker may die, the call raises CodeRuntimeError, the pool replaces the worker."""
    rt = MontyRuntime(isolation="process")
    step = rt.start('data = [1, "two", {"k": 3.0}]\nr = call_tool("double", {"x": 21})\n[r, data]', "agent")
    assert isinstance(step, Call)
    snap = step.call.dump()
    before = _process.pool_stats()["crashes"]
    outcomes = {"ok": 0, "refused": 0, "worker_died": 0}
    for seed in range(300):
        try:
            rt.resume(forged(snap, seed), ResumeValue(1))
            outcomes["ok"] += 1
        except SnapshotError:
            outcomes["refused"] += 1
        except CodeRuntimeError as exc:
            outcomes["worker_died" if "worker process" in str(exc) else "refused"] += 1
    assert sum(outcomes.values()) == 300
    # The forgeries reach Monty's decoder and VM (a helper that missed the payload would
    # make every one an envelope refusal).
    assert outcomes["ok"] > 0, outcomes
    assert _process.pool_stats()["crashes"] - before == outcomes["worker_died"]
    # The host and the pool are fine afterwards.
    assert rt.resume(snap, ResumeValue(2)).value == [2, [1, "two", {"k": 3.0}]]  # type: ignore[union-attr]
    print(outcomes)


def test_a_worker_killed_mid_script_raises_and_is_replaced():
    rt = MontyRuntime(ResourceLimits(max_duration=30), isolation="process")
    import threading

    def kill_soon() -> None:
        import time

        time.sleep(0.3)
        for w in list(_process._POOL._busy_pids()):
            os.kill(w, 9)

    t = threading.Thread(target=kill_soon)
    t.start()
    with pytest.raises(CodeRuntimeError, match=r"worker process died \(killed by SIGKILL\)"):
        rt.start("while True:\n    pass", "agent")
    t.join()
    step = rt.start("1 + 1", "agent")
    assert isinstance(step, Complete) and step.value == 2


def test_a_hung_worker_is_killed_after_the_grace(monkeypatch):
    monkeypatch.setattr(_process, "HANG_GRACE", 0.5)
    rt = MontyRuntime(ResourceLimits(max_duration=0.2), isolation="process")
    monkeypatch.setattr(rt._engine, "timeout", 0.5)
    # A script the interpreter stops at 0.2 s answers in time: no false alarm.
    assert rt.start("while True:\n    pass", "agent").message.rstrip().endswith("> 200ms")  # type: ignore[union-attr]


def test_isolation_is_validated():
    with pytest.raises(ValueError, match="isolation"):
        MontyRuntime(isolation="thread")  # type: ignore[arg-type]
