"""How often a forged unsigned snapshot crashes the host in process (docs/security.md,
"What is not guaranteed").

A forgery is a real snapshot with one to three payload bytes changed and its SHA-256 tag
recomputed: what anyone who can write the session store can make when no ``snapshot_key``
is set. Each child process takes its own snapshot (a dump differs from process to process:
the script's random seed travels in it), resumes ``--count`` forgeries of it on an unsigned
``MontyRuntime`` in process (2 s per advance at most), and prints how many it resumed, saw
refused, or saw end in a caught panic. A child killed by a signal (a segfault, or a Rust
abort's SIGABRT) is a crash of the host; the campaign counts them and prints the rate, with
the last lines each crash printed.

Run: ``python fuzz/forged_snapshots.py --processes 30 --count 3000`` (``make
forged-snapshots``; about 15 s per 90,000 forgeries on one core). Exit code 0 whatever
the rate (this measures a documented gap, it does not gate); 1 when a child failed in Python.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CHILD = r"""
import hashlib, json, random, struct, sys
from codeact import CodeRuntimeError, MontyRuntime, ResourceLimits, ResumeValue

seed, count = int(sys.argv[1]), int(sys.argv[2])
rt = MontyRuntime(ResourceLimits(max_duration=2.0))  # a forged loop ends as a script error
step = rt.start('data = [1, "two", {"k": 3.0}]\nr = call_tool("double", {"x": 21})\n[r, data]', "agent")
snapshot = step.call.dump()
# magic (4), format version (2), Monty version (1 + n), dump version (2), flags (1), depth (4)
head = 4 + 2 + 1 + snapshot[6] + 2 + 1 + 4
plen = struct.unpack("<Q", snapshot[head : head + 8])[0]
payload = snapshot[head + 8 : head + 8 + plen]
rest = snapshot[head + 8 + plen : -32]
rng = random.Random(seed)
seen = {"resumed": 0, "refused": 0, "panics caught": 0, "other errors": 0}
for _ in range(count):
    p = bytearray(payload)
    for _ in range(rng.randint(1, 3)):
        p[rng.randrange(len(p))] = rng.randrange(256)
    body = snapshot[:head] + struct.pack("<Q", len(p)) + bytes(p) + rest
    try:
        rt.resume(body + hashlib.sha256(body).digest(), ResumeValue(1))
        seen["resumed"] += 1
    except CodeRuntimeError as exc:
        seen["panics caught" if "panicked" in str(exc) else "refused"] += 1
    except Exception:
        seen["other errors"] += 1
print(json.dumps(seen))
"""


def run_child(seed: int, count: int, timeout: float) -> dict[str, object]:
    """One child's tally, or how it crashed."""
    env = dict(os.environ, RUST_BACKTRACE="0")
    try:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(seed), str(count)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"seed": seed, "crash": f"no answer in {timeout:.0f} s"}
    if child.returncode == 0:
        return {"seed": seed, **json.loads(child.stdout.strip().splitlines()[-1])}
    tail = [line for line in child.stderr.splitlines() if line and not line.startswith("  ")][-3:]
    if child.returncode > 0:  # a Python error in the child: the campaign's fault, not a crash
        return {"seed": seed, "failed": f"exit {child.returncode}", "stderr": tail}
    return {"seed": seed, "crash": f"killed by {signal.Signals(-child.returncode).name}", "stderr": tail}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=30, help="child processes, one snapshot each")
    ap.add_argument("--count", type=int, default=3000, help="forgeries per child")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="children run at once")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a child may take")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: run_child(s, args.count, args.timeout), range(args.processes)))
    crashes = [r for r in results if "crash" in r]
    failed = [r for r in results if "failed" in r]
    tally = {k: sum(int(r.get(k, 0)) for r in results) for k in ("resumed", "refused", "panics caught", "other errors")}  # type: ignore[call-overload]
    for r in crashes + failed:
        print(f"seed {r['seed']}: {r.get('crash') or r['failed']}: {' | '.join(r.get('stderr', []))}")  # type: ignore[arg-type]
    survived = args.processes - len(crashes) - len(failed)
    print(
        f"{len(crashes)} crash(es) in {args.processes - len(failed)} processes of {args.count} forgeries each "
        f"(at most {(args.processes - len(failed)) * args.count:,} forgeries); in the {survived} that survived: "
        + ", ".join(f"{v:,} {k}" for k, v in tally.items())
        + f"; {time.perf_counter() - started:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
