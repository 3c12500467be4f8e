//! Bare-crate baseline: the same workloads as `benchmarks/runtime.py`, driving `monty`
//! 1.4.0 directly from Rust with no Python, no conversion and no snapshot envelope.
//!
//! Prints one JSON object of medians to stdout: microseconds for the per-operation
//! workloads, milliseconds for the CPU set. `--quick` runs few repeats (CI smoke).
//! `codeact-bench repl N...` runs the MontyRepl sessions of `benchmarks/namespace.py`
//! instead (src/repl.rs).

mod repl;

use std::hint::black_box;
use std::time::{Duration, Instant};

use monty::{Dump, FunctionCall, MontyRun, RunProgress, Session, SessionRef};
use monty_types::{
    CompileOptions, ExtFunctionResult, MontyObject, NameLookupResult, PrintWriter, ResourceLimits,
    ResourceTracker,
};

const MIB: usize = 1024 * 1024;
const PRINT_CAP: usize = 10 * MIB;

/// The scripts; `benchmarks/workloads.py` holds the same text for the Python side.
const START_COMPLETE: &str = "1 + 1";
const ROUND_TRIP: &str =
    "total = 0\nfor i in range(1000):\n    total += call_tool(\"inc\", {\"x\": i})\ntotal\n";
const ROUND_TRIP_CALLS: u32 = 1000;
const ROUND_TRIP_RESULT: i64 = 500_500;
const DUMP_LOAD: &str = "x = 1\ncall_tool(\"f\", {\"x\": x})\n";
const CPU: &[(&str, &str, i64)] = &[
    (
        "sum_loop",
        "total = 0\nfor i in range(1000000):\n    total += i * i\ntotal\n",
        333_332_833_333_500_000,
    ),
    (
        "fib25",
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\nfib(25)\n",
        75_025,
    ),
    (
        "str_join",
        "s = \",\".join([str(i) for i in range(200000)])\nlen(s)\n",
        1_288_889,
    ),
    (
        "sorted",
        "x = 12345\nvals = []\nfor _ in range(200000):\n    x = (x * 1103515245 + 12345) % 2147483648\n    vals.append(x)\ns = sorted(vals)\nlen(s)\n",
        200_000,
    ),
    (
        "dict_comp",
        "d = {i: i * 2 for i in range(200000)}\nlen(d)\n",
        200_000,
    ),
];

fn tracker() -> ResourceTracker {
    ResourceTracker::new(
        ResourceLimits::default()
            .max_turn_duration(Duration::from_secs(5))
            .max_memory(256 * MIB),
    )
}

fn compile(code: &str) -> MontyRun {
    MontyRun::new(
        code.to_string(),
        "main.py",
        vec![],
        CompileOptions::default(),
    )
    .unwrap_or_else(|e| panic!("compile failed: {e}"))
}

/// What the host tool returns for `call_tool("inc", {"x": i})`: `i + 1`.
fn tool_result(call: &FunctionCall) -> MontyObject {
    assert_eq!(
        call.function_name, "call_tool",
        "unexpected call {}",
        call.function_name
    );
    let pairs = call
        .args
        .arg(1)
        .and_then(|d| d.pairs())
        .expect("a dict of arguments");
    let x = pairs
        .iter()
        .find_map(|(k, v)| (k.as_str() == Some("x")).then(|| v.as_int()).flatten())
        .expect("argument x");
    MontyObject::int(x + 1)
}

/// Drives `progress` to completion, answering every tool call; returns the result and
/// the number of calls answered.
fn drive(
    mut progress: Result<RunProgress, monty_types::MontyException>,
    out: &mut String,
) -> (MontyObject, u32) {
    let mut calls = 0;
    loop {
        let p = progress.unwrap_or_else(|e| panic!("script raised: {e}"));
        progress = match p {
            RunProgress::Complete(v) => return (v, calls),
            RunProgress::FunctionCall(call) => {
                calls += 1;
                let v = tool_result(&call);
                call.resume(
                    ExtFunctionResult::Return(v),
                    PrintWriter::CollectString(out, Some(PRINT_CAP)),
                )
            }
            RunProgress::NameLookup(lookup) => lookup.resume(
                NameLookupResult::Undefined,
                PrintWriter::CollectString(out, Some(PRINT_CAP)),
            ),
            RunProgress::OsCall(_) => panic!("unexpected OS call"),
            RunProgress::ResolveFutures(_) => panic!("unexpected futures"),
        };
    }
}

/// Compiles and runs `code` to completion.
fn run(code: &str) -> (MontyObject, u32) {
    let mut out = String::new();
    let progress = compile(code).start(
        vec![],
        tracker(),
        PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
    );
    drive(progress, &mut out)
}

/// Starts `DUMP_LOAD` and returns it paused at its tool call.
fn paused() -> FunctionCall {
    let mut out = String::new();
    let progress = compile(DUMP_LOAD)
        .start(
            vec![],
            tracker(),
            PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
        )
        .expect("start");
    progress.into_function_call().expect("paused at a call")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median over `repeats` batches of the mean time of one `f()` in a batch of `n`, in µs.
fn per_op_us(repeats: usize, n: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..n.min(100) {
        f();
    }
    let samples = (0..repeats)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        })
        .collect();
    median(samples)
}

fn int(v: &MontyObject) -> i64 {
    v.as_ref()
        .as_int()
        .unwrap_or_else(|| panic!("expected an int, got {v:?}"))
}

fn load(bytes: &[u8]) -> FunctionCall {
    match Dump::load(bytes).expect("load").state {
        Session::Running(p) => p.into_function_call().expect("a call"),
        _ => panic!("not a paused run"),
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `codeact-bench repl N...`: sessions of N scripts on one MontyRepl (src/repl.rs).
    if std::env::args().nth(1).as_deref() == Some("repl-probe") {
        println!("{}", repl::probe());
        return;
    }
    // `codeact-bench round-trip N`: only the tool round trip, best of N runs of 1000 calls,
    // µs per call (for side-by-side runs with the Python binding: benchmarks/round_trip.py).
    if std::env::args().nth(1).as_deref() == Some("round-trip") {
        let runs: usize = std::env::args()
            .nth(2)
            .map_or(20, |n| n.parse().expect("a number of runs"));
        let best = (0..runs.max(1))
            .map(|_| {
                let t = Instant::now();
                let (v, calls) = run(black_box(ROUND_TRIP));
                let us = t.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
                assert_eq!(int(&v), ROUND_TRIP_RESULT);
                us
            })
            .fold(f64::INFINITY, f64::min);
        println!("{{\"round_trip_us\": {best:.4}}}");
        return;
    }
    // `codeact-bench starts N`: only N starts of `1 + 1`, untimed (for instruction counts
    // under callgrind, against the same loop in Python: `benchmarks/instructions.py`).
    if std::env::args().nth(1).as_deref() == Some("starts") {
        let n: usize = std::env::args()
            .nth(2)
            .map_or(1000, |n| n.parse().expect("a number of starts"));
        for _ in 0..n {
            assert_eq!(int(&run(black_box(START_COMPLETE)).0), 2);
        }
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("repl") {
        let fields: Vec<(String, String)> = std::env::args()
            .skip(2)
            .filter(|a| a != "--quick")
            .flat_map(|n| repl::session(n.parse().expect("a number of scripts")))
            .collect();
        let body = fields
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!("{{\"monty\": \"1.4.0\", \"mode\": \"repl\", {body}}}");
        return;
    }
    let (repeats, batch, cpu_repeats) = if quick { (5, 300, 3) } else { (15, 3000, 9) };
    let mut fields: Vec<(String, String)> = Vec::new();
    let num = |fields: &mut Vec<(String, String)>, k: &str, v: f64| {
        fields.push((k.to_string(), format!("{v:.4}")));
    };

    // start -> complete of `1 + 1` (parse + compile + run).
    assert_eq!(int(&run(START_COMPLETE).0), 2);
    num(
        &mut fields,
        "start_complete_us",
        per_op_us(repeats, batch, || {
            black_box(run(black_box(START_COMPLETE)));
        }),
    );

    // Tool round trip: one script, 1000 calls; per call.
    let (v, calls) = run(ROUND_TRIP);
    assert_eq!((int(&v), calls), (ROUND_TRIP_RESULT, ROUND_TRIP_CALLS));
    let total_us = per_op_us(repeats, if quick { 3 } else { 20 }, || {
        black_box(run(black_box(ROUND_TRIP)));
    });
    num(
        &mut fields,
        "round_trip_us",
        total_us / f64::from(ROUND_TRIP_CALLS),
    );

    // Dump and load of a small paused state.
    let mut call = Some(paused());
    let mut dump_once = || -> Vec<u8> {
        let progress = RunProgress::FunctionCall(call.take().unwrap());
        let bytes =
            monty::dump("main.py", None, &[], SessionRef::Running(&progress)).expect("dump");
        call = progress.into_function_call();
        bytes
    };
    let bytes = dump_once();
    let size = bytes.len();
    let dump_us = per_op_us(repeats, batch, || {
        black_box(dump_once());
    });
    let load_us = per_op_us(repeats, batch, || {
        black_box(load(black_box(&bytes)));
    });
    let restore = |bytes: &[u8]| -> MontyObject {
        let mut out = String::new();
        let call = load(bytes);
        let v = tool_result(&call);
        let progress = call.resume(
            ExtFunctionResult::Return(v),
            PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
        );
        drive(progress, &mut out).0
    };
    assert_eq!(int(&restore(&bytes)), 2);
    let restore_us = per_op_us(repeats, batch, || {
        black_box(restore(black_box(&bytes)));
    });
    num(&mut fields, "dump_us", dump_us);
    num(&mut fields, "load_us", load_us);
    num(&mut fields, "restore_us", restore_us);
    num(&mut fields, "dump_load_us", dump_us + restore_us);
    fields.push(("snapshot_bytes".to_string(), size.to_string()));

    // CPU set, ms per run.
    for (name, code, expected) in CPU {
        assert_eq!(int(&run(code).0), *expected, "{name}");
        let ms = per_op_us(cpu_repeats, 1, || {
            black_box(run(black_box(code)));
        }) / 1000.0;
        num(&mut fields, &format!("cpu_{name}_ms"), ms);
    }

    // Two threads each running a CPU-bound script vs one thread running it once.
    for (name, code, _) in CPU
        .iter()
        .filter(|(n, _, _)| matches!(*n, "sum_loop" | "fib25"))
    {
        let wall = |threads: usize| -> f64 {
            let barrier = std::sync::Barrier::new(threads + 1);
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        barrier.wait();
                        black_box(run(code));
                    });
                }
                barrier.wait();
                let t = Instant::now();
                // The scope joins every thread before returning.
                t
            })
            .elapsed()
            .as_secs_f64()
        };
        wall(2);
        let one = median((0..cpu_repeats).map(|_| wall(1)).collect());
        let two = median((0..cpu_repeats).map(|_| wall(2)).collect());
        num(&mut fields, &format!("threads2_{name}_ratio"), two / one);
    }

    let body = fields
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "{{\"monty\": \"1.4.0\", \"mode\": \"{}\", {body}}}",
        if quick { "quick" } else { "full" }
    );
}
