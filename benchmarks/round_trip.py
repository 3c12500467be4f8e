"""Tool round trip, codeact's binding against the bare monty crate, side by side.

The same script (1,000 ``call_tool`` round trips, each answered with ``x + 1``) runs
alternately through ``MontyRuntime`` (the step API: ``start`` → ``Call`` → ``resume``) and
through the bare crate's Rust loop (``codeact-bench round-trip``, same limits). Each round
takes the best of ``--runs`` runs of each side, one right after the other, so both see the
same machine load; the figure reported is the median of the per-round ratios.

Usage: ``python benchmarks/round_trip.py [--rounds 7] [--runs 20] [--json PATH]``.
Issue 10's goal: codeact / bare ≤ 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import codeact
from codeact.runtime import Call, Complete, ResumeValue

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _workloads import ROUND_TRIP, ROUND_TRIP_CALLS, ROUND_TRIP_RESULT  # noqa: E402

DEFAULT_TARGET_DIR = Path.home() / ".cache" / "codeact" / "target"
GOAL = 1.5


def codeact_best_us(rt: codeact.MontyRuntime, runs: int) -> float:
    """Best of ``runs`` runs of the round-trip script, µs per call."""
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        step = rt.start(ROUND_TRIP)
        while type(step) is Call:
            call = step.call
            step = call.resume(ResumeValue(call.keyword_args["x"] + 1))
        elapsed = time.perf_counter() - t
        if type(step) is not Complete or step.value != ROUND_TRIP_RESULT:
            raise SystemExit(f"codeact: wrong result {step!r}")
        best = min(best, elapsed * 1e6 / ROUND_TRIP_CALLS)
    return best


def bare_best_us(binary: Path, runs: int) -> float:
    proc = subprocess.run([str(binary), "round-trip", str(runs)], capture_output=True, text=True, check=True)
    return float(json.loads(proc.stdout)["round_trip_us"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=20, help="runs of 1,000 calls per side per round (best taken)")
    ap.add_argument("--target-dir", type=Path, default=Path(os.environ.get("CARGO_TARGET_DIR", DEFAULT_TARGET_DIR)))
    ap.add_argument("--json", type=Path, help="also write the figures as JSON to PATH")
    args = ap.parse_args(argv)
    binary = args.target_dir / "release" / "codeact-bench"
    if not binary.exists():
        print(f"{binary} is missing: cargo build --release -p codeact-bench", file=sys.stderr)
        return 2
    rt = codeact.MontyRuntime(codeact.ResourceLimits(max_duration=5.0, max_memory=256 * 1024 * 1024))
    codeact_best_us(rt, 3)  # warm-up
    rows = []
    for i in range(args.rounds):
        # Alternate which side goes first, so a load change mid-round favours neither.
        if i % 2:
            bare = bare_best_us(binary, args.runs)
            ours = codeact_best_us(rt, args.runs)
        else:
            ours = codeact_best_us(rt, args.runs)
            bare = bare_best_us(binary, args.runs)
        rows.append((ours, bare, ours / bare))
        print(f"round {i + 1}: codeact {ours:.3f} µs, bare crate {bare:.3f} µs, ratio {ours / bare:.2f}x")
    ratios = [r[2] for r in rows]
    median = statistics.median(ratios)
    print(
        f"tool round trip, codeact / bare crate: median {median:.2f}x "
        f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x, {len(rows)} rounds; goal <= {GOAL}x)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rounds": [{"codeact_us": a, "bare_us": b, "ratio": r} for a, b, r in rows],
                    "median_ratio": median,
                    "goal": GOAL,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
