"""Workload scripts and the timing helper shared by every Python-side column.

Stdlib only: ``_pydantic_monty_bench.py`` imports it from a separate venv. The same
script texts live in ``rust/bench/src/main.rs`` for the bare-crate column.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

START_COMPLETE = "1 + 1"

ROUND_TRIP = 'total = 0\nfor i in range(1000):\n    total += call_tool("inc", {"x": i})\ntotal\n'
ROUND_TRIP_CALLS = 1000
ROUND_TRIP_RESULT = 500_500  # each call returns x + 1

DUMP_LOAD = 'x = 1\ncall_tool("f", {"x": x})\n'
DUMP_LOAD_RESULT = 2  # resumed with x + 1

# name -> (label, script, expected value of the last expression)
CPU: dict[str, tuple[str, str, int]] = {
    "sum_loop": (
        "sum of i*i, 1M loop",
        "total = 0\nfor i in range(1000000):\n    total += i * i\ntotal\n",
        333_332_833_333_500_000,
    ),
    "fib25": (
        "recursive fib(25)",
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\nfib(25)\n",
        75_025,
    ),
    "str_join": (
        "join of 200k str(i)",
        's = ",".join([str(i) for i in range(200000)])\nlen(s)\n',
        1_288_889,
    ),
    "sorted": (
        "LCG 200k ints + sorted",
        "x = 12345\nvals = []\nfor _ in range(200000):\n"
        "    x = (x * 1103515245 + 12345) % 2147483648\n    vals.append(x)\ns = sorted(vals)\nlen(s)\n",
        200_000,
    ),
    "dict_comp": (
        "dict comprehension 200k",
        "d = {i: i * 2 for i in range(200000)}\nlen(d)\n",
        200_000,
    ),
}

# The CPU-bound scripts the two-thread (GIL) check runs.
THREAD_WORKLOADS = ("sum_loop", "fib25")


def per_op_us(fn: Callable[[], object], repeats: int, batch: int, warmup: int | None = None) -> float:
    """Median over ``repeats`` batches of the mean time of one ``fn()`` in a batch of
    ``batch`` calls, in microseconds. The cyclic GC is off while a batch runs (as in
    ``timeit``)."""
    for _ in range(min(batch, 100) if warmup is None else warmup):
        fn()
    samples = []
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in range(batch):
                fn()
            samples.append((time.perf_counter_ns() - t0) / 1000 / batch)
    finally:
        if was_enabled:
            gc.enable()
    return statistics.median(samples)


def per_run_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of one ``fn()`` over ``repeats`` runs (after one warm-up), in ms."""
    return per_op_us(fn, repeats, 1, warmup=1) / 1000


def settings(quick: bool) -> dict[str, int]:
    """Repeat counts: ``repeats`` batches of ``batch`` calls for µs-scale workloads,
    ``rt_runs`` runs of the 1000-call script, ``cpu_repeats`` runs of each CPU script."""
    if quick:
        return {"repeats": 5, "batch": 300, "rt_runs": 3, "cpu_repeats": 3}
    return {"repeats": 15, "batch": 3000, "rt_runs": 20, "cpu_repeats": 9}


PRECHECK_SIZES_KB = (1, 10, 40)

_PRECHECK_BLOCK = '''def summarize_{i}(rows, key="score"):
    """Totals per group of rows {i}."""
    totals = {{}}
    for row in rows:
        group = row.get("group", "none")
        totals[group] = totals.get(group, 0) + row[key] * {i}
    best = sorted(totals.items(), key=lambda kv: -kv[1])[:3]
    label = f"block {i}: {{len(rows)}} rows, best {{best[0][0] if best else None}}"
    return {{"label": label, "best": best, "count": len(totals)}}


data_{i} = [{{"group": "g" + str(j % 4), "score": j}} for j in range(3)]
'''


def precheck_script(kb: int, salt: int = 0) -> str:
    """A model-like script of about ``kb`` KB (function definitions, comprehensions, f-strings,
    a few calls), ending with an integer; ``salt`` only changes a comment, so every text is new
    to a cache keyed by script text."""
    blocks, size, i = [f"# run {salt}\n"], 0, 0
    while size < kb * 1024:
        block = _PRECHECK_BLOCK.format(i=i)
        blocks.append(block)
        size += len(block)
        i += 1
    blocks.append("out = summarize_0(data_0)\nout['count']\n")
    return "".join(blocks)


PRECHECK_RESULT = 3  # the groups of data_0
