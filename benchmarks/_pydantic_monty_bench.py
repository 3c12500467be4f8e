"""The pydantic-monty column: run by ``runtime.py`` with the interpreter of a separate
venv that has ``pydantic-monty`` installed (a worker-pool binding: each script runs in
a ``monty`` subprocess, reached over IPC). Prints one JSON object to stdout.

    ~/.cache/codeact/benchenv/bin/python benchmarks/_pydantic_monty_bench.py [--quick]
"""

from __future__ import annotations

import json
import sys

import pydantic_monty as pm
from _workloads import (
    CPU,
    DUMP_LOAD,
    DUMP_LOAD_RESULT,
    ROUND_TRIP,
    ROUND_TRIP_CALLS,
    ROUND_TRIP_RESULT,
    START_COMPLETE,
    per_op_us,
    per_run_ms,
    settings,
)

MiB = 1024 * 1024
# Same budget as the other columns; the pool's own suspension cap (1000 per checkout by
# default) would stop the 1000-call script, so lift it.
LIMITS = {
    "max_feed_duration_secs": 5.0,
    "max_memory": 256 * MiB,
    "max_recursion_depth": 1000,
    "max_suspensions": 10**9,
}


def answer(snap):
    """Drives a snapshot to completion, answering call_tool("...", {"x": i}) with i + 1."""
    while not isinstance(snap, pm.MontyComplete):
        if isinstance(snap, pm.FunctionSnapshot):
            snap = snap.resume({"return_value": snap.args[1]["x"] + 1})
        elif isinstance(snap, pm.NameLookupSnapshot):
            snap = snap.resume()
        else:
            raise RuntimeError(f"unexpected snapshot {snap!r}")
    return snap.output


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    s = settings(quick)
    # Every operation here costs 50-300 µs of IPC: smaller batches keep the run short.
    repeats, batch = s["repeats"], max(s["batch"] // 20, 10)
    out: dict[str, object] = {"version": pm.__version__, "mode": "quick" if quick else "full"}

    with pm.Monty() as pool:
        with pool.checkout(limits=LIMITS) as sess:
            assert sess.feed_run(START_COMPLETE) == 2
            out["start_complete_us"] = per_op_us(lambda: sess.feed_run(START_COMPLETE), repeats, batch)

            def round_trip() -> None:
                assert answer(sess.feed_start(ROUND_TRIP)) == ROUND_TRIP_RESULT

            out["round_trip_us"] = per_op_us(round_trip, s["rt_runs"], 1, warmup=1) / ROUND_TRIP_CALLS

        def checkout_run() -> None:
            with pool.checkout(limits=LIMITS) as sess:
                sess.feed_run(START_COMPLETE)

        out["start_complete_checkout_us"] = per_op_us(checkout_run, repeats, batch)

        with pool.checkout(limits=LIMITS) as sess:
            snap = sess.feed_start(DUMP_LOAD)
            assert isinstance(snap, pm.FunctionSnapshot)
            blob = snap.dump()
            out["snapshot_bytes"] = len(blob)
            out["dump_us"] = per_op_us(snap.dump, repeats, batch)
            answer(snap)

        def load() -> None:
            # A mid-feed snapshot loads only into a fresh session: the checkout is part of it.
            with pool.checkout(limits=LIMITS) as sess:
                sess.load_snapshot(blob)

        def restore() -> None:
            with pool.checkout(limits=LIMITS) as sess:
                assert answer(sess.load_snapshot(blob)) == DUMP_LOAD_RESULT

        out["load_us"] = per_op_us(load, repeats, batch)
        out["restore_us"] = per_op_us(restore, repeats, batch)
        out["dump_load_us"] = out["dump_us"] + out["restore_us"]

        for name, (_label, code, expected) in CPU.items():
            with pool.checkout(limits=LIMITS) as sess:

                def cpu(sess=sess, code=code, expected=expected) -> None:
                    assert sess.feed_run(code) == expected

                out[f"cpu_{name}_ms"] = per_run_ms(cpu, s["cpu_repeats"])

    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
