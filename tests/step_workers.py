"""What the tests that count native step-worker threads run in a fresh process."""

from __future__ import annotations

import subprocess
import sys

COUNT_STEP_WORKERS = """
import os, time
from codeact.runtime import MontyRuntime

def step_workers():
    names = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/comm") as f:
            names.append(f.read().strip())
    return sum(1 for n in names if n.startswith("codeact-step"))
"""
"""Source defining ``step_workers()``: the threads of this process named ``codeact-step-*``
(read from ``/proc``, Linux)."""


def run_fresh(body: str) -> list[str]:
    """Runs ``COUNT_STEP_WORKERS`` then ``body`` in a new interpreter; returns the words it
    printed (asserting it exited 0)."""
    out = subprocess.run([sys.executable, "-c", COUNT_STEP_WORKERS + body], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()
