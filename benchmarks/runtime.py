"""Runtime benchmark: codeact's MontyRuntime against the bare monty crate, CPython
``exec`` and pydantic-monty, side by side, with the performance targets checked.

    python benchmarks/runtime.py            # full run (a few minutes)
    python benchmarks/runtime.py --quick    # CI smoke, well under a minute
    python benchmarks/runtime.py --json out.json

Exit code 0 even when a target is missed (the table reports it); nonzero only when a
column fails to run. See benchmarks/README.md for what each column measures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _workloads import (  # noqa: E402
    CPU,
    DUMP_LOAD,
    DUMP_LOAD_RESULT,
    PRECHECK_RESULT,
    PRECHECK_SIZES_KB,
    ROUND_TRIP,
    ROUND_TRIP_CALLS,
    ROUND_TRIP_RESULT,
    START_COMPLETE,
    THREAD_WORKLOADS,
    per_op_us,
    per_run_ms,
    precheck_script,
    settings,
)

import codeact  # noqa: E402
from codeact import ResumeValue  # noqa: E402
from codeact.runtime import Call, Complete  # noqa: E402

DEFAULT_TARGET_DIR = Path.home() / ".cache" / "codeact" / "target"
DEFAULT_PM_PYTHON = Path.home() / ".cache" / "codeact" / "benchenv" / "bin" / "python"

# Targets on the codeact column.
START_TARGET_US = 5.0
ROUND_TRIP_TARGET_US = 3.0
DUMP_LOAD_TARGET_US = 10.0
THREADS_TARGET = 1.3
BARE_RATIO_GOAL = 2.0  # codeact / bare crate, at most
PRECHECK_SHARE_GOAL = 0.10  # issue 21: the pre-check's part of start on 1-40 KB scripts, at most
ROUND_TRIP_BARE_RATIO_GOAL = 1.5  # issue 10: the tool round trip, codeact / bare crate

# codeact 0.1.0 on Monty 0.0.19, measured on the same 2-core machine (issue 10): the row the
# 1.4 figures are compared with. Only the round trip was recorded for both columns.
BASELINE_0_1_0 = {"round_trip_us": {"codeact": 1.82, "bare": 0.70}}
PM_RATIO_GOAL = 30.0  # pydantic-monty / codeact round trip, at least


class BenchError(Exception):
    """A column could not be measured (build failure, crash, wrong result)."""


# ---------------------------------------------------------------------------- codeact


def _expect_complete(step: Any, expected: Any) -> None:
    if type(step) is not Complete or step.value != expected:
        raise BenchError(f"codeact: expected Complete({expected!r}), got {step!r}")


def bench_codeact(quick: bool) -> dict[str, float]:
    s = settings(quick)
    rt = codeact.MontyRuntime(codeact.ResourceLimits(max_duration=5.0, max_memory=256 * 1024 * 1024))
    out: dict[str, float] = {}

    _expect_complete(rt.start(START_COMPLETE), 2)
    out["start_complete_us"] = per_op_us(lambda: rt.start(START_COMPLETE), s["repeats"], s["batch"])

    def round_trip() -> None:
        step = rt.start(ROUND_TRIP)
        while type(step) is Call:
            call = step.call
            step = call.resume(ResumeValue(call.keyword_args["x"] + 1))
        _expect_complete(step, ROUND_TRIP_RESULT)

    out["round_trip_us"] = per_op_us(round_trip, s["rt_runs"], 1, warmup=1) / ROUND_TRIP_CALLS

    step = rt.start(DUMP_LOAD)
    if type(step) is not Call:
        raise BenchError(f"codeact: expected a Call, got {step!r}")
    call = step.call
    blob = call.dump()
    out["snapshot_bytes"] = len(blob)
    out["dump_us"] = per_op_us(call.dump, s["repeats"], s["batch"])
    # Loading alone is not a public operation; inspect() is load + reading the call.
    out["load_us"] = per_op_us(lambda: rt.inspect(blob), s["repeats"], s["batch"])
    _expect_complete(rt.resume(blob, ResumeValue(DUMP_LOAD_RESULT)), DUMP_LOAD_RESULT)
    value = ResumeValue(DUMP_LOAD_RESULT)
    out["restore_us"] = per_op_us(lambda: rt.resume(blob, value), s["repeats"], s["batch"])
    out["dump_load_us"] = out["dump_us"] + out["restore_us"]

    for name, (_label, code, expected) in CPU.items():
        _expect_complete(rt.start(code), expected)
        out[f"cpu_{name}_ms"] = per_run_ms(lambda code=code: rt.start(code), s["cpu_repeats"])

    for name in THREAD_WORKLOADS:
        code = CPU[name][1]
        out[f"threads2_{name}_ratio"] = thread_ratio(lambda code=code: rt.start(code), s["cpu_repeats"])
    out.update(bench_precheck(quick))
    return out


def bench_precheck(quick: bool) -> dict[str, float]:
    """Per script size: ``start`` of a new script text (the check's cache never hits), the
    pre-check alone on new texts (``MontyRuntime._checked``: the subset check, its rewrites
    and the awaited-call offsets), ``start`` with ``check_scripts=False,
    rewrite_scripts=False``, and the check's share of ``start``."""
    repeats = 5 if quick else 15
    checked = codeact.MontyRuntime(codeact.ResourceLimits(max_duration=5.0))
    unchecked = codeact.MontyRuntime(
        codeact.ResourceLimits(max_duration=5.0), check_scripts=False, rewrite_scripts=False
    )
    out: dict[str, float] = {}
    salt = iter(range(10**9))
    for kb in PRECHECK_SIZES_KB:
        _expect_complete(checked.start(precheck_script(kb, next(salt))), PRECHECK_RESULT)
        _expect_complete(unchecked.start(precheck_script(kb, next(salt))), PRECHECK_RESULT)
        start = per_op_us(lambda kb=kb: checked.start(precheck_script(kb, next(salt))), repeats, 5, warmup=2)
        check = per_op_us(lambda kb=kb: checked._checked(precheck_script(kb, next(salt))), repeats, 5, warmup=2)
        bare = per_op_us(lambda kb=kb: unchecked.start(precheck_script(kb, next(salt))), repeats, 5, warmup=2)
        text = per_op_us(lambda kb=kb: precheck_script(kb, next(salt)), repeats, 5, warmup=2)  # building the text
        out[f"precheck_{kb}kb_start_us"] = start - text
        out[f"precheck_{kb}kb_check_us"] = check - text
        out[f"precheck_{kb}kb_unchecked_start_us"] = bare - text
        out[f"precheck_{kb}kb_share"] = (check - text) / (start - text)
    return out


# ---------------------------------------------------------------------------- CPython


def bench_cpython(quick: bool) -> dict[str, float]:
    s = settings(quick)
    out: dict[str, float] = {}

    def run(code: str, env: dict[str, Any] | None = None) -> dict[str, Any]:
        g = dict(env or {})
        exec(compile(code, "main.py", "exec"), g)
        return g

    out["start_complete_us"] = per_op_us(lambda: run(START_COMPLETE), s["repeats"], s["batch"])

    def call_tool(name: str, args: dict[str, Any]) -> int:
        return args["x"] + 1

    if run(ROUND_TRIP, {"call_tool": call_tool})["total"] != ROUND_TRIP_RESULT:
        raise BenchError("CPython: wrong round-trip result")
    out["round_trip_us"] = (
        per_op_us(lambda: run(ROUND_TRIP, {"call_tool": call_tool}), s["rt_runs"], 1, warmup=1) / ROUND_TRIP_CALLS
    )
    for name, (_label, code, _expected) in CPU.items():
        out[f"cpu_{name}_ms"] = per_run_ms(lambda code=code: run(code), s["cpu_repeats"])
    for name in THREAD_WORKLOADS:
        code = CPU[name][1]
        out[f"threads2_{name}_ratio"] = thread_ratio(lambda code=code: run(code), s["cpu_repeats"])
    return out


# ---------------------------------------------------------------------------- threads


def _wall(fn: Any, threads: int) -> float:
    """Wall time for ``threads`` threads, released together, each running ``fn`` once."""
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def worker() -> None:
        barrier.wait()
        try:
            fn()
        except BaseException as e:  # surfaced below
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise BenchError(f"thread failed: {errors[0]!r}")
    return elapsed


def thread_ratio(fn: Any, repeats: int) -> float:
    """Median wall time of two threads each running ``fn`` once, over the median time
    of one thread running it once (1.0 = perfect parallelism, 2.0 = serialised)."""
    _wall(fn, 2)
    one = statistics.median(_wall(fn, 1) for _ in range(repeats))
    two = statistics.median(_wall(fn, 2) for _ in range(repeats))
    return two / one


# ---------------------------------------------------------------------------- bare crate


def bare_binary(target_dir: Path, rebuild: bool) -> Path:
    """The bare-crate benchmark binary (``rust/bench``), built with ``cargo build --release``
    first when it is missing or older than its sources."""
    binary = target_dir / "release" / "codeact-bench"
    sources = [ROOT / "rust" / "bench" / "Cargo.toml", *(ROOT / "rust" / "bench" / "src").rglob("*.rs")]
    stale = binary.exists() and max(p.stat().st_mtime for p in sources) > binary.stat().st_mtime
    if rebuild or stale or not binary.exists():
        cargo = shutil.which("cargo")
        if cargo is None:
            raise BenchError(f"{binary} is missing and cargo is not on PATH")
        print(f"building {binary} (cargo build --release -p codeact-bench) ...", file=sys.stderr, flush=True)
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir)}
        proc = subprocess.run([cargo, "build", "--release", "-p", "codeact-bench"], cwd=ROOT, env=env)
        if proc.returncode != 0 or not binary.exists():
            raise BenchError("cargo build --release -p codeact-bench failed")
    return binary


def add_target_dir(ap: argparse.ArgumentParser) -> None:
    """The ``--target-dir`` option naming where ``bare_binary`` looks and builds."""
    ap.add_argument(
        "--target-dir",
        type=Path,
        default=Path(os.environ.get("CARGO_TARGET_DIR", DEFAULT_TARGET_DIR)),
        help="cargo target dir holding release/codeact-bench (default: $CARGO_TARGET_DIR or %(default)s)",
    )


def bench_bare(quick: bool, target_dir: Path, rebuild: bool) -> dict[str, float]:
    binary = bare_binary(target_dir, rebuild)
    proc = subprocess.run([str(binary), *(["--quick"] if quick else [])], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"codeact-bench exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------- pydantic-monty


def _has_pydantic_monty(python: Path) -> bool:
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import pydantic_monty"], capture_output=True, text=True)
    return probe.returncode == 0


def bench_pydantic_monty(quick: bool, python: Path | None) -> dict[str, float] | None:
    """Runs the column in a subprocess of ``python``; when not given, the dedicated venv
    if it exists, else this interpreter (``pip install -e .[benchmark]``). None = skipped."""
    if python is None:
        python = DEFAULT_PM_PYTHON if DEFAULT_PM_PYTHON.exists() else Path(sys.executable)
    if not _has_pydantic_monty(python):
        return None
    proc = subprocess.run(
        [str(python), str(HERE / "_pydantic_monty_bench.py"), *(["--quick"] if quick else [])],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    if proc.returncode != 0:
        raise BenchError(f"pydantic-monty bench exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------- report

ROWS: list[tuple[str, str, str]] = [
    # key, label, unit
    ("start_complete_us", "start→complete `1 + 1`", "µs"),
    ("round_trip_us", "tool round trip (1000 calls)", "µs/call"),
    ("dump_us", "dump small paused state", "µs"),
    ("load_us", "load it (codeact: inspect)", "µs"),
    ("restore_us", "load + resume → complete", "µs"),
    ("dump_load_us", "dump + load&resume", "µs"),
    ("snapshot_bytes", "snapshot size", "bytes"),
    *(
        row
        for kb in PRECHECK_SIZES_KB
        for row in (
            (f"precheck_{kb}kb_start_us", f"start of a new {kb} KB script", "µs"),
            (f"precheck_{kb}kb_check_us", "  its pre-check alone", "µs"),
            (f"precheck_{kb}kb_unchecked_start_us", "  start, check_scripts=False", "µs"),
            (f"precheck_{kb}kb_share", "  pre-check share of start", "x"),
        )
    ),
    *((f"cpu_{name}_ms", label, "ms") for name, (label, _code, _exp) in CPU.items()),
    *((f"threads2_{name}_ratio", f"2 threads / 1, {CPU[name][0]}", "x") for name in THREAD_WORKLOADS),
]
COLUMNS = [("codeact", "codeact"), ("bare", "bare crate"), ("cpython", "CPython exec"), ("pm", "pydantic-monty")]


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    if unit == "bytes":
        return f"{int(v):,}"
    if unit == "x":
        return f"{v:.2f}x"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def build_report(results: dict[str, dict[str, float] | None]) -> dict[str, Any]:
    c, bare, cp, pm = (results.get(k) or {} for k in ("codeact", "bare", "cpython", "pm"))
    rows = []
    for key, label, unit in ROWS:
        vals = {col: (results.get(col) or {}).get(key) for col, _ in COLUMNS}
        is_time = unit not in ("bytes", "x")
        rows.append(
            {
                "key": key,
                "label": label,
                "unit": unit,
                "values": vals,
                "codeact_over_bare": ratio(vals["codeact"], vals["bare"]) if is_time else None,
                "pm_over_codeact": ratio(vals["pm"], vals["codeact"]) if is_time else None,
            }
        )
    cpu_keys = [f"cpu_{n}_ms" for n in CPU]

    def cpu_geo(num: dict[str, float], den: dict[str, float]) -> float | None:
        if not all(k in num and k in den for k in cpu_keys):
            return None
        return geomean([num[k] / den[k] for k in cpu_keys])

    summary = {
        "cpu_geomean_codeact_over_cpython": cpu_geo(c, cp),
        "cpu_geomean_bare_over_cpython": cpu_geo(bare, cp),
        "cpu_geomean_pm_over_cpython": cpu_geo(pm, cp),
        "cpu_geomean_codeact_over_bare": cpu_geo(c, bare),
    }

    targets = []

    def target(name: str, value: float | None, goal: float, at_most: bool = True, unit: str = "") -> None:
        if value is None:
            status = "SKIP"
        else:
            status = "PASS" if (value <= goal if at_most else value >= goal) else "MISS"
        targets.append(
            {
                "name": name,
                "value": value,
                "goal": f"{'≤' if at_most else '≥'} {goal:g}{unit}",
                "status": status,
                "unit": unit,
            }
        )

    target("codeact start→complete `1 + 1`", c.get("start_complete_us"), START_TARGET_US, unit=" µs")
    target("codeact tool round trip", c.get("round_trip_us"), ROUND_TRIP_TARGET_US, unit=" µs")
    target("codeact dump + load&resume", c.get("dump_load_us"), DUMP_LOAD_TARGET_US, unit=" µs")
    shares = [c[k] for k in (f"precheck_{kb}kb_share" for kb in PRECHECK_SIZES_KB) if k in c]
    target(
        "codeact pre-check share of start, 1-40 KB scripts (worst)",
        max(shares) if shares else None,
        PRECHECK_SHARE_GOAL,
        unit="x",
    )
    threads = [c[k] for k in (f"threads2_{n}_ratio" for n in THREAD_WORKLOADS) if k in c]
    target(
        "codeact 2 threads vs 1, CPU-bound (worst of " + ", ".join(THREAD_WORKLOADS) + ")",
        max(threads) if threads else None,
        THREADS_TARGET,
        unit="x",
    )
    for key, label in (
        ("start_complete_us", "start→complete"),
        ("round_trip_us", "round trip"),
        ("dump_load_us", "dump + load&resume"),
    ):
        target(f"codeact / bare crate, {label}", ratio(c.get(key), bare.get(key)), BARE_RATIO_GOAL, unit="x")
    target(
        "codeact / bare crate, CPU set (geometric mean)",
        summary["cpu_geomean_codeact_over_bare"],
        BARE_RATIO_GOAL,
        unit="x",
    )
    target(
        "pydantic-monty / codeact, round trip",
        ratio(pm.get("round_trip_us"), c.get("round_trip_us")),
        PM_RATIO_GOAL,
        at_most=False,
        unit="x",
    )
    return {"rows": rows, "summary": summary, "targets": targets}


def render(report: dict[str, Any], meta: dict[str, Any]) -> None:
    headers = ["workload", "unit", *(title for _, title in COLUMNS), "codeact/bare", "p-monty/codeact"]
    body = []
    for r in report["rows"]:
        body.append(
            [
                r["label"],
                r["unit"],
                *(fmt(r["values"][col], r["unit"]) for col, _ in COLUMNS),
                fmt(r["codeact_over_bare"], "x"),
                fmt(r["pm_over_codeact"], "x"),
            ]
        )
    s = report["summary"]
    geo = [
        "CPU set vs CPython (geometric mean of time ratios): "
        f"codeact {fmt(s['cpu_geomean_codeact_over_cpython'], 'x')}, "
        f"bare crate {fmt(s['cpu_geomean_bare_over_cpython'], 'x')}, "
        f"pydantic-monty {fmt(s['cpu_geomean_pm_over_cpython'], 'x')}"
    ]
    tgt = [
        [
            t["status"],
            t["name"],
            fmt(t["value"], "x" if t["unit"] == "x" else "µs") + ("" if t["unit"] == "x" else " µs"),
            t["goal"],
        ]
        if t["value"] is not None
        else [t["status"], t["name"], "—", t["goal"]]
        for t in report["targets"]
    ]
    title = (
        f"codeact runtime benchmark ({meta['mode']}): medians; "
        f"pydantic-monty {meta.get('pydantic_monty') or 'not run'}, monty crate {meta.get('monty_crate')}"
    )
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _render_plain(title, headers, body, geo, tgt, meta)
        return
    # Not a terminal (CI log, pipe): do not wrap the table at rich's default 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    table = Table(title=title, box=box.SIMPLE_HEAVY)
    for i, h in enumerate(headers):
        table.add_column(h, justify="left" if i < 2 else "right")
    for row in body:
        table.add_row(*row)
    console.print(table)
    for line in geo + meta["notes"]:
        console.print(line, markup=False)
    ttable = Table(title="targets", box=box.SIMPLE)
    for h in ("", "target", "measured", "goal"):
        ttable.add_column(h)
    for status, name, value, goal in tgt:
        style = {"PASS": "green", "MISS": "bold red"}.get(status, "yellow")
        ttable.add_row(f"[{style}]{status}[/{style}]", name, value, goal)
    console.print(ttable)


def _render_plain(
    title: str, headers: list[str], body: list[list[str]], geo: list[str], tgt: list[list[str]], meta: dict[str, Any]
) -> None:
    def table(rows: list[list[str]], left: int) -> None:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for n, r in enumerate(rows):
            print(
                "  ".join(
                    c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
            if n == 0:
                print("  ".join("-" * w for w in widths))

    print(title)
    print()
    table([headers, *body], 2)
    print()
    for line in geo + meta["notes"]:
        print(line)
    print()
    print("targets")
    table([["", "target", "measured", "goal"], *tgt], 4)


# ---------------------------------------------------------------------------- main


def _cpu_busy() -> tuple[float, float] | None:
    """(seconds of CPU time the whole machine has spent busy, seconds spent by this
    process and its children), from /proc/stat; None where unavailable."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [int(x) for x in fields]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    busy = sum(ticks[:8]) - idle  # user..steal; guest time is already in user
    t = os.times()
    return busy / hz, t.user + t.system + t.children_user + t.children_system


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few repeats, for CI smoke (well under a minute)")
    ap.add_argument("--json", metavar="PATH", type=Path, help="also write the figures as JSON to PATH")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the bare-crate binary even if present")
    add_target_dir(ap)
    env_pm = os.environ.get("CODEACT_BENCH_PYDANTIC_MONTY_PYTHON")
    ap.add_argument(
        "--pydantic-monty-python",
        type=Path,
        default=Path(env_pm) if env_pm else None,
        help=f"interpreter of a venv with pydantic-monty installed (default: $CODEACT_BENCH_PYDANTIC_MONTY_PYTHON, "
        f"else {DEFAULT_PM_PYTHON} if present, else this interpreter); the column is skipped without it",
    )
    args = ap.parse_args(argv)

    busy_before = _cpu_busy()
    t0 = time.perf_counter()
    results: dict[str, dict[str, float] | None] = {}
    errors: list[str] = []
    notes: list[str] = []
    steps = [
        ("bare", lambda: bench_bare(args.quick, args.target_dir, args.rebuild)),
        ("codeact", lambda: bench_codeact(args.quick)),
        ("cpython", lambda: bench_cpython(args.quick)),
        ("pm", lambda: bench_pydantic_monty(args.quick, args.pydantic_monty_python)),
    ]
    for col, fn in steps:
        print(f"running {dict(COLUMNS)[col]} ...", file=sys.stderr, flush=True)
        try:
            results[col] = fn()
        except BenchError as e:
            results[col] = None
            errors.append(f"{dict(COLUMNS)[col]}: {e}")
    if results.get("pm") is None and not any(e.startswith("pydantic-monty") for e in errors):
        where = args.pydantic_monty_python or f"{DEFAULT_PM_PYTHON} or {sys.executable}"
        notes.append(f"pydantic-monty column skipped: pydantic_monty not importable by {where}")
    notes.append(
        "round trip = one 1000-call script / 1000; load&resume = restore from bytes and run to the end; "
        "pydantic-monty load includes a pool checkout (a mid-feed snapshot only loads into a fresh session)"
    )

    wall = time.perf_counter() - t0
    busy_after = _cpu_busy()
    cpus = os.cpu_count() or 1
    others = None
    if busy_before is not None and busy_after is not None:
        # CPUs kept busy by other processes on average while this ran.
        others = max(0.0, ((busy_after[0] - busy_before[0]) - (busy_after[1] - busy_before[1])) / wall)
        if others > 0.25:
            notes.append(
                f"WARNING: other processes kept {others:.2f} of {cpus} CPUs busy during the run: "
                "timings (and the two-thread ratio above all) are unreliable; rerun on a quiet machine"
            )
    meta = {
        "mode": "quick" if args.quick else "full",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": cpus,
        "other_processes_cpus_busy": others,
        "monty_crate": (results.get("bare") or {}).get("monty", "1.4.0"),
        "baseline_0_1_0": BASELINE_0_1_0,
        "pydantic_monty": (results.get("pm") or {}).get("version"),
        "notes": notes,
    }
    report = build_report(results)
    render(report, meta)
    rt_now = (results.get("codeact") or {}).get("round_trip_us")
    rt_bare = (results.get("bare") or {}).get("round_trip_us")
    base = BASELINE_0_1_0["round_trip_us"]
    print(
        f"\ntool round trip, codeact / bare crate: 0.1.0 on Monty 0.0.19 {base['codeact']:.2f} / {base['bare']:.2f} µs"
        f" = {base['codeact'] / base['bare']:.2f}x; now on Monty 1.4.0 "
        + (
            f"{rt_now:.2f} / {rt_bare:.2f} µs = {rt_now / rt_bare:.2f}x (goal <= {ROUND_TRIP_BARE_RATIO_GOAL}x)"
            if rt_now and rt_bare
            else "n/a"
        )
    )
    elapsed = time.perf_counter() - t0
    print(f"\n(total {elapsed:.1f} s)")
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)

    if args.json:
        payload = {"meta": {**meta, "elapsed_s": elapsed}, "results": results, **report, "errors": errors}
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
