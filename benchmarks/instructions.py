"""Instruction counts under callgrind: codeact's ``start`` of ``1 + 1`` and tool round trip
beside the bare monty crate's (``codeact-bench``), per operation, with their ratios.

    python benchmarks/instructions.py            # 2,000 starts, 10,000 round trips (about 3 minutes)
    python benchmarks/instructions.py --quick    # 300 starts, 2,000 round trips

Timings on a shared virtual machine move by 20 % from one run to the next; instruction counts
move by about 1 % for the round trip and 3 % for a start (hash seeds and addresses differ per
process; the driver fixes PYTHONHASHSEED and turns the cyclic GC off), whatever the load, so
a change of a few percent in the per-call path shows here (compare a few runs) when it drowns
in the timed benchmarks (``runtime.py``, ``round_trip.py``). Instructions
are not time (a cache miss or a locked instruction costs many cycles, a simple move less than
one), so the timed benchmarks stay the measure of the issue's targets; this one says where the
instructions go. Each figure is the difference between a run of N operations and a run of
none (or one), so the interpreter's start-up and imports cancel out.

Needs valgrind (``apt-get install valgrind``); exits 0 with a note when it is missing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from runtime import BenchError, add_target_dir, bare_binary  # noqa: E402

# The Python side: `start` runs N starts of `1 + 1` through MontyRuntime.start; `round-trip`
# runs one script making N tool calls, each answered through the step API.
_PY_DRIVER = """
import gc
import sys
import codeact
from codeact import ResumeValue
from codeact.runtime import Call


def main(mode, n):
    # In a function, as runtime.py's loops are: locals and cached globals, not module-level
    # name lookups.
    rt = codeact.MontyRuntime(codeact.ResourceLimits(max_duration=60.0, max_memory=256 * 1024 * 1024))
    assert rt.start("1 + 1").value == 2
    gc.disable()  # as timeit does: a collection's cost lands on whichever run it falls in
    if mode == "start":
        for _ in range(n):
            rt.start("1 + 1")
        return
    script = 'total = 0\\nfor i in range(%d):\\n    total += call_tool("inc", {"x": i})\\ntotal\\n' % n
    step = rt.start(script)
    while type(step) is Call:
        call = step.call
        step = call.resume(ResumeValue(call.keyword_args["x"] + 1))
    assert step.value == n * (n + 1) // 2, step


main(sys.argv[1], int(sys.argv[2]))
"""


def _instructions(cmd: list[str]) -> int:
    """Instructions callgrind counted for ``cmd`` (every thread)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *cmd],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},  # the same dict layouts in every run
        )
        if proc.returncode != 0:
            raise BenchError(f"{cmd[0]} under callgrind exited with {proc.returncode}: {proc.stderr[-1500:]}")
        found = re.search(r"Collected : (\d+)", proc.stderr)
        if found is None:
            raise BenchError(f"callgrind reported no count for {cmd}")
        return int(found.group(1))


def per_op(cmd: list[str], base: int, n: int) -> float:
    """Instructions per operation: the run of ``n`` operations minus the run of ``base``."""
    return (_instructions([*cmd, str(base + n)]) - _instructions([*cmd, str(base)])) / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer operations (a minute or so)")
    add_target_dir(ap)
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("instructions.py: valgrind is not installed (apt-get install valgrind); nothing measured")
        return 0
    starts, calls = (300, 2000) if args.quick else (2000, 10000)
    try:
        bare = str(bare_binary(args.target_dir, rebuild=False))
        py = [sys.executable, "-c", _PY_DRIVER]
        rows = [
            ("start → complete `1 + 1`", per_op([*py, "start"], 0, starts), per_op([bare, "starts"], 0, starts)),
            # The bare crate's round trip runs whole 1,000-call scripts: one run as the base.
            (
                "tool round trip",
                per_op([*py, "round-trip"], 1, calls),
                per_op([bare, "round-trip"], 1, calls // 1000) / 1000,
            ),
        ]
    except BenchError as e:
        print(f"instructions.py: {e}", file=sys.stderr)
        return 1
    print(f"instructions per operation under callgrind ({starts} starts, {calls} calls)")
    print(f"{'workload':<28}{'codeact':>12}{'bare crate':>14}{'codeact/bare':>15}")
    for label, ours, theirs in rows:
        print(f"{label:<28}{ours:>12,.0f}{theirs:>14,.0f}{ours / theirs:>14.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
