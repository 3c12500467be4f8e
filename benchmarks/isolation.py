"""The cost of ``MontyRuntime(isolation="process")`` against the default in-process runtime.

    python benchmarks/isolation.py [--quick]

Reports medians, in microseconds: a trivial script start to finish, one tool round trip
(start, pause, resume in place), a resume from snapshot bytes, and a CPU-bound script; and
the ratio process / in-process for each. The pool is warmed up first (worker spawn time is
reported separately).
"""

from __future__ import annotations

import argparse
import statistics
import time

from codeact import MontyRuntime, ResumeValue
from codeact.runtime import _process

LOOP = "total = 0\nfor i in range(200000):\n    total += i\ntotal"


def bench(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeat = 30 if args.quick else 300
    t0 = time.perf_counter()
    MontyRuntime(isolation="process").start("1", "warm")
    spawn_ms = (time.perf_counter() - t0) * 1e3
    rows = []
    for mode in ("in_process", "process"):
        rt = MontyRuntime(isolation=mode)  # type: ignore[arg-type]
        snap = rt.start('x = call_tool("t")\nx + 1', "b").call.dump()  # type: ignore[union-attr]

        def trivial(rt=rt):
            rt.start("1 + 1", "b")

        def round_trip(rt=rt):
            rt.start('x = call_tool("t", {"a": 1})\nx + 1', "b").call.resume(ResumeValue(1))  # type: ignore[union-attr]

        def from_bytes(rt=rt, snap=snap):
            rt.resume(snap, ResumeValue(1))

        def cpu(rt=rt):
            rt.start(LOOP, "b")

        rows.append(
            (
                mode,
                bench(trivial, repeat),
                bench(round_trip, repeat),
                bench(from_bytes, repeat),
                bench(cpu, max(5, repeat // 10)),
            )
        )
    print(f"worker spawn (first request, cold): {spawn_ms:.0f} ms")
    print(f"{'mode':<12}{'trivial':>12}{'tool trip':>12}{'resume bytes':>14}{'cpu loop':>12}   (µs, median)")
    for mode, *vals in rows:
        print(f"{mode:<12}" + "".join(f"{v:>12.1f}" for v in vals[:2]) + f"{vals[2]:>14.1f}{vals[3]:>12.1f}")
    base, proc = rows
    print(
        "ratio       "
        + "".join(f"{p / b:>11.1f}x" for b, p in zip(base[1:3], proc[1:3], strict=True))
        + f"{proc[3] / base[3]:>13.1f}x{proc[4] / base[4]:>11.2f}x"
    )
    print(f"pool: {_process.pool_stats()}")


if __name__ == "__main__":
    main()
