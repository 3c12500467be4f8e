//! `codeact-bench repl N`: a session of N scripts on one `MontyRepl` that keeps its heap,
//! with the durability codeact's contract would add (`benchmarks/namespace.py` runs it
//! beside today's `persist_namespace`, ADR 0003).
//!
//! Per script: feed it; at its tool call, dump the suspended feed (the checkpoint taken
//! before a tool runs), load the dump back and resume from the loaded copy (a restart
//! mid-feed); once it completes, dump the idle REPL (the per-turn save) and continue the
//! session from a copy loaded from those bytes (a restart between scripts). Prints one JSON
//! object: per-script medians and means (µs), dump sizes (bytes) of the last script.

use std::hint::black_box;
use std::time::Instant;

use monty::{Dump, MontyRepl, ReplFunctionCall, ReplProgress, Session, SessionRef};
use monty_types::{CompileOptions, ExtFunctionResult, MontyObject, NameLookupResult, PrintWriter};

use crate::{PRINT_CAP, median, tracker};

/// The session's first script: the variables the later ones read and update (a few
/// small values, a 10,000-element list, a dict of 1,000 entries).
/// `benchmarks/namespace.py` holds the same text.
pub const SETUP: &str = "count = 0\nlabel = \"session\"\nratio = 0.5\nflags = [True, False]\nitems = list(range(10000))\ntable = {}\nfor i in range(1000):\n    table[\"k\" + str(i)] = i\ngot = call_tool(\"inc\", {\"x\": count})\n{\"type\": \"observation\", \"value\": {\"count\": count, \"items\": len(items), \"table\": len(table)}}\n";
/// Every later script: reads and updates what the earlier ones left, calls one tool.
pub const STEP: &str = "count += 1\nratio = ratio * 0.99\nflags.append(count % 2 == 0)\nitems[count % 10000] = -count\ntable[\"k\" + str(count % 1000)] = count\ngot = call_tool(\"inc\", {\"x\": count})\n{\"type\": \"observation\", \"value\": {\"count\": count, \"got\": got, \"items\": len(items), \"table\": len(table)}}\n";

#[derive(Default)]
struct Samples {
    feed_us: Vec<f64>,
    suspended_dump_us: Vec<f64>,
    suspended_load_us: Vec<f64>,
    idle_dump_us: Vec<f64>,
    idle_load_us: Vec<f64>,
    suspended_bytes: Vec<usize>,
    idle_bytes: Vec<usize>,
}

/// What the host tool returns for `call_tool("inc", {"x": i})`: `i + 1`.
fn tool_result(call: &ReplFunctionCall) -> MontyObject {
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

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

fn load(bytes: &[u8]) -> Session {
    Dump::load(bytes).expect("load").state
}

/// Runs one script on `repl` with the durability steps; returns the REPL loaded back from
/// its idle dump and the script's `count` observation.
fn one_script(repl: MontyRepl, code: &str, s: &mut Samples) -> (MontyRepl, i64) {
    let mut out = String::new();
    let mut feed = 0.0;
    let t = Instant::now();
    let mut progress = repl.feed_start(
        code,
        vec![],
        PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
    );
    feed += us(t);
    loop {
        let p = progress.unwrap_or_else(|e| panic!("script raised: {}", e.error));
        let t = Instant::now();
        progress = match p {
            ReplProgress::Complete { repl, value } => {
                feed += us(t);
                s.feed_us.push(feed);
                let count = observation_count(&value);
                // The per-turn save, then a restart from it.
                let t = Instant::now();
                let bytes =
                    monty::dump("main.py", None, &[], SessionRef::Idle(&repl)).expect("dump");
                s.idle_dump_us.push(us(t));
                s.idle_bytes.push(bytes.len());
                drop(repl);
                let t = Instant::now();
                let loaded = match load(&bytes) {
                    Session::Idle(repl) => *repl,
                    _ => panic!("not an idle REPL"),
                };
                s.idle_load_us.push(us(t));
                return (loaded, count);
            }
            ReplProgress::NameLookup(lookup) => {
                let answer = if lookup.name == "call_tool" {
                    NameLookupResult::Value(MontyObject::function("call_tool", None))
                } else {
                    NameLookupResult::Undefined
                };
                let next = lookup.resume(
                    answer,
                    PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
                );
                feed += us(t);
                next
            }
            ReplProgress::FunctionCall(call) => {
                feed += us(t);
                // The checkpoint before the tool runs, then a restart from it.
                let progress = ReplProgress::FunctionCall(call);
                let t = Instant::now();
                let bytes = monty::dump("main.py", None, &[], SessionRef::Suspended(&progress))
                    .expect("dump");
                s.suspended_dump_us.push(us(t));
                s.suspended_bytes.push(bytes.len());
                drop(progress);
                let t = Instant::now();
                let call = match load(&bytes) {
                    Session::Suspended(p) => p.into_function_call().expect("a call"),
                    _ => panic!("not a suspended feed"),
                };
                s.suspended_load_us.push(us(t));
                let t = Instant::now();
                let v = tool_result(&call);
                let next = call.resume(
                    ExtFunctionResult::Return(v),
                    PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
                );
                feed += us(t);
                next
            }
            ReplProgress::OsCall(_) => panic!("unexpected OS call"),
            ReplProgress::ResolveFutures(_) => panic!("unexpected futures"),
        };
    }
}

fn observation_count(value: &MontyObject) -> i64 {
    let pairs = value.as_ref().pairs().expect("a dict");
    let inner = pairs
        .iter()
        .find_map(|(k, v)| (k.as_str() == Some("value")).then_some(v))
        .expect("value");
    match inner.pairs() {
        Some(fields) => fields
            .iter()
            .find_map(|(k, v)| (k.as_str() == Some("count")).then(|| v.as_int()).flatten())
            .expect("count"),
        None => inner.as_int().expect("an int"),
    }
}

/// The final script's text: `STEP` ending with the final result instead of an observation.
pub fn final_step() -> String {
    let (body, _) = STEP
        .rsplit_once("{\"type\"")
        .expect("STEP ends with its result");
    format!("{body}{{\"type\": \"final_result\", \"value\": count}}\n")
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// One session of `n` scripts; JSON fields for it, prefixed `n{n}_`.
pub fn session(n: usize) -> Vec<(String, String)> {
    let mut s = Samples::default();
    let last = final_step();
    let t = Instant::now();
    let mut repl = MontyRepl::new("main.py", tracker(), CompileOptions::default());
    for i in 0..n {
        let code = if i == 0 {
            SETUP
        } else if i + 1 == n {
            last.as_str()
        } else {
            STEP
        };
        let (next, count) = one_script(repl, code, &mut s);
        assert_eq!(count, i as i64, "script {i} saw the wrong state");
        repl = next;
    }
    let wall = us(t);
    black_box(repl);
    let later = |v: &[f64]| -> f64 { median(v[1..].to_vec()) };
    let p = |k: &str| format!("n{n}_{k}");
    vec![
        (p("wall_per_script_us"), format!("{:.2}", wall / n as f64)),
        (p("feed_us"), format!("{:.2}", later(&s.feed_us))),
        (p("setup_feed_us"), format!("{:.2}", s.feed_us[0])),
        (p("idle_dump_us"), format!("{:.2}", later(&s.idle_dump_us))),
        (p("idle_load_us"), format!("{:.2}", later(&s.idle_load_us))),
        (
            p("suspended_dump_us"),
            format!("{:.2}", later(&s.suspended_dump_us)),
        ),
        (
            p("suspended_load_us"),
            format!("{:.2}", later(&s.suspended_load_us)),
        ),
        (
            p("idle_dump_mean_us"),
            format!("{:.2}", mean(&s.idle_dump_us)),
        ),
        (
            p("idle_bytes_first"),
            s.idle_bytes[1.min(n - 1)].to_string(),
        ),
        (p("idle_bytes_last"), s.idle_bytes[n - 1].to_string()),
        (
            p("suspended_bytes_last"),
            s.suspended_bytes[n - 1].to_string(),
        ),
        (
            p("idle_bytes_per_script"),
            format!(
                "{:.1}",
                s.idle_bytes.iter().sum::<usize>() as f64 / n as f64
            ),
        ),
    ]
}

/// `codeact-bench repl-probe`: which kinds of values survive a REPL's dump and load
/// between scripts (what `persist_namespace` today drops or keeps as source). Prints one
/// JSON object: each name's value after the restart, or the error.
pub fn probe() -> String {
    const DEFINE: &str = "def inc(x):\n    return x + 1\ndef counter():\n    n = [0]\n    def bump():\n        n[0] += 1\n        return n[0]\n    return bump\nbump = counter()\nbump()\nsquare = lambda x: x * x\nit = iter([1, 2, 3])\nnext(it)\nseen = {1, 2}\nclass Box:\n    def __init__(self, v):\n        self.v = v\nbox = Box(7)\nimport json\nNone\n";
    const USES: &[(&str, &str)] = &[
        ("function", "inc(1)"),
        ("closure", "bump()"),
        ("lambda", "square(3)"),
        ("iterator", "next(it)"),
        ("set", "sorted(seen)"),
        ("instance", "box.v"),
        ("module", "json.dumps([1])"),
    ];
    let mut out = String::new();
    let mut repl = MontyRepl::new("main.py", tracker(), CompileOptions::default());
    repl.feed_run(
        DEFINE,
        vec![],
        PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
    )
    .unwrap_or_else(|e| panic!("probe script raised: {e}"));
    let bytes = monty::dump("main.py", None, &[], SessionRef::Idle(&repl)).expect("dump");
    drop(repl);
    let mut repl = match load(&bytes) {
        Session::Idle(repl) => *repl,
        _ => panic!("not an idle REPL"),
    };
    let fields: Vec<String> = USES
        .iter()
        .map(|(kind, code)| {
            let got = match repl.feed_run(
                code,
                vec![],
                PrintWriter::CollectString(&mut out, Some(PRINT_CAP)),
            ) {
                Ok(v) => format!("{v:?}"),
                Err(e) => format!("error: {e}"),
            };
            format!("\"{kind}\": {:?}", format!("{code} -> {got}"))
        })
        .collect();
    format!("{{\"dump_bytes\": {}, {}}}", bytes.len(), fields.join(", "))
}
