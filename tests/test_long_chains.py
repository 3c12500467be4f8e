"""Long flat chains (``1+1+...``, ``x.real.real...``) are parsed with enough host stack; each
case runs in a child process so a crash fails one test, not the suite."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import sys, threading
from codeact import MontyRuntime, ResourceLimits, Raised, Complete
src = {src}
def run():
    for rt in (MontyRuntime(), MontyRuntime(check_scripts=False, rewrite_scripts=False)):
        step = rt.start(src)
        assert isinstance(step, (Raised, Complete)), step
        print(type(step).__name__, (getattr(step, "message", "") or "").splitlines()[-1:])
if {small_thread}:
    threading.stack_size(256 * 1024)
    t = threading.Thread(target=run)
    t.start()
    t.join()
else:
    run()
"""

CASES = {
    "binop-chain": "'1' + '+1' * 150000",
    "attribute-chain": "'x = 1\\nx' + '.real' * 400000",
    "unary-chain": "'-' * 1000000 + '1'",
    "too-long": "'1' + '+1' * 2200000",
}


@pytest.mark.parametrize("small_thread", [False, True], ids=["main-thread", "256KiB-thread"])
@pytest.mark.parametrize("name", list(CASES))
def test_long_chains_do_not_crash_the_host(name: str, small_thread: bool) -> None:
    code = CHILD.format(src=CASES[name], small_thread=small_thread)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    assert child.stdout.count("Raised") + child.stdout.count("Complete") == 2, child.stdout
