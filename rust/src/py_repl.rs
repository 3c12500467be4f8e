//! Namespace sessions: one Monty REPL (`monty::MontyRepl`) whose heap and globals carry
//! from script to script, for `persist_namespace` on `MontyRuntime` (ADR 0003).
//!
//! A feed runs like a script run: the same limits, OS policy, journal (`os_log` /
//! `os_replay`), captured stdout, tool-call classification and name answers, and the same
//! seam steps. What differs:
//!
//! - between feeds the session is idle and dumps as Monty's `Session::Idle`; a feed paused
//!   at a tool call dumps as `Session::Suspended`, with the feed's context (its source, its
//!   name and the idle dump it started from) in codeact's own envelope section;
//! - a feed that raises leaves the namespace it started with: the session goes back to the
//!   idle dump taken when the feed started (Monty itself would keep the partial mutations);
//! - tracebacks name the feed's script (`main.py`) instead of Monty's `<python-input-N>`,
//!   and frames of functions defined by earlier feeds `<script N>` (N counts from 1);
//! - the session's heap is charged to one memory counter for the session's whole life, so
//!   `max_memory` covers the carried namespace; `max_duration` applies per advance;
//! - awaited tool calls (`await asyncio.gather(call_tool(...), ...)`) are found as in a run,
//!   by the byte offsets the host computed for the feed's source (`deferred`); a session
//!   keeps the offsets of every feed that completed, by Monty's input name, so a coroutine an
//!   earlier feed defined defers its calls too. Such calls start as futures; when every task
//!   waits on them the feed stops at a `Gather` ([`MontySessionGather`]), whose dump carries
//!   the started calls' arguments like a run's (`engine::tasks_to_bytes`).
//!
//! Session bytes: Monty's dump in the snapshot envelope, with codeact's section (mark,
//! format, kind, the paused feed's context). Format 1 has nothing else and is what a session
//! that never awaited a tool call writes, byte for byte as before; format 2 adds the
//! awaited-call offsets of the completed feeds, the paused feed's own, and its started calls.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};

use monty::{MontyRepl, ReplFunctionCall, ReplProgress, ReplResolveFutures, ReplStartError};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, PrintWriter,
    SourceRange,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::convert::{V, check_plain, monty_to_py, ref_to_py};
use crate::engine::{
    EngineConfig, MAX_SCRIPT_BYTES, NO_ASYNC, Outcome, PendingRecord, PendingTool,
    STACK_PER_SOURCE_BYTE, ToolRequest, classify_parts, ext_result_within, name_answer,
    os_calls_over, pending_table,
};
use crate::errors::{CodeRuntimeError, HostError};
use crate::journal::{Journal, OsLog};
use crate::memory::{RunMemory, charge_to};
use crate::output::{CappedOutput, Printed};
use crate::py_api::{
    DUMP_STACK, MontyEngine, journal_from_py, os_log_to_py, outcome_from_py, seam,
};
use crate::py_gather::{CallInfo, calls_in, gather_step, outcomes_from_py};
use crate::snapshot::{self, SESSION_IDLE as KIND_IDLE, SESSION_MARK};
use crate::stack::{run_interpreter, stack_needed, with_stack};

/// Version of the session section without awaited-call state.
const SESSION_FORMAT: u8 = 1;
/// Version of the session section with awaited-call state (offsets, started calls).
const SESSION_FORMAT_TASKS: u8 = 2;
const KIND_SUSPENDED: u8 = 1;

/// The session section, format 1: mark, format, kind, and for a suspended feed its context.
type SessionRecord = (u8, u8, u8, Option<FeedRecord>);
/// The session section, format 2: format 1's fields, then the awaited-call offsets of the
/// completed feeds, the paused feed's own offsets and its started calls.
type TasksSessionRecord = (
    u8,
    u8,
    u8,
    Option<FeedRecord>,
    Awaits,
    Vec<u32>,
    Vec<PendingRecord>,
);
/// script, script name, Monty's input name, the idle dump the feed started from.
type FeedRecord = (String, String, String, Vec<u8>);
/// Sorted byte offsets of the call expressions a feed awaits, by the feed's Monty input
/// name (`<python-input-N>`): what the session keeps of the feeds that completed.
type Awaits = BTreeMap<String, Vec<u32>>;

/// What a feed carries from advance to advance besides Monty's state.
struct Feed {
    script: String,
    script_name: String,
    /// The name Monty runs the feed under (`<python-input-N>`).
    input_name: String,
    /// Monty's dump of the idle session the feed started from (the rollback point).
    start: Arc<Vec<u8>>,
    /// The awaited-call offsets of the feeds that completed before this one.
    before: Arc<Awaits>,
    /// Sorted byte offsets of the call expressions this feed awaits.
    offsets: Vec<u32>,
    /// Tool calls the feed started without waiting for them, by call id, until settled.
    pending: BTreeMap<u32, PendingTool>,
    /// What the feed printed so far and the OS calls it made, across its advances (one feed
    /// is one run for `max_stdout` and `max_os_calls`; a feed restored from bytes starts
    /// them anew).
    printed: Printed,
    os_calls: u64,
    clock_reads: u64,
}

impl Feed {
    /// Whether the call expression at `at` is one the script awaits (in this feed's source,
    /// or in a function an earlier feed defined).
    fn defers(&self, at: &SourceRange) -> bool {
        let offsets = if at.filename == self.input_name {
            &self.offsets
        } else {
            match self.before.get(&at.filename) {
                Some(offsets) => offsets,
                None => return false,
            }
        };
        offsets.binary_search(&at.start).is_ok()
    }

    /// The session's awaited-call offsets once this feed has completed.
    fn awaits_after(&self) -> Arc<Awaits> {
        if self.offsets.is_empty() {
            return Arc::clone(&self.before);
        }
        let mut awaits = self.before.as_ref().clone();
        awaits.insert(self.input_name.clone(), self.offsets.clone());
        Arc::new(awaits)
    }
}

/// State shared by a session and its paused feed.
struct Inner {
    cfg: Arc<EngineConfig>,
    /// The session's memory counter, for its whole life (see [`crate::memory`]).
    memory: Arc<RunMemory>,
    /// Where the rollback copy of a feed's starting session is charged: host bookkeeping,
    /// not the script's memory, so it does not count against `max_memory`.
    spare: Arc<RunMemory>,
    /// The idle session; `None` while a feed runs or is paused at a tool call.
    repl: Mutex<Option<MontyRepl>>,
    /// The awaited-call offsets of the feeds that completed (see [`Feed::defers`]).
    awaits: Mutex<Arc<Awaits>>,
}

impl Inner {
    fn repl(&self) -> MutexGuard<'_, Option<MontyRepl>> {
        self.repl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn awaits(&self) -> MutexGuard<'_, Arc<Awaits>> {
        self.awaits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Where a feed's advance stopped.
enum Stop {
    Call(Box<ReplFunctionCall>, ToolRequest, Feed),
    /// Every task waits on started calls (sorted call ids, each in the feed's table).
    Gather(Box<ReplResolveFutures>, Vec<u32>, Feed),
    Complete(MontyObject),
    Raised(String),
}

struct Advance {
    stop: Stop,
    stdout: String,
    stderr: String,
    os_log: OsLog,
}

fn snapshot_error(what: &str) -> impl Fn(String) -> HostError + '_ {
    move |e| HostError::Snapshot(format!("cannot {what}: {e}"))
}

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, HostError>) -> Result<T, HostError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let detail = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(HostError::Internal(format!(
            "Monty panicked during {what}: {detail}"
        )))
    })
}

/// Monty's dump of an idle session.
fn dump_idle(repl: &MontyRepl) -> Result<Vec<u8>, HostError> {
    monty::dump("main.py", None, &[], monty::SessionRef::Idle(repl))
        .map_err(|e| snapshot_error("serialize the session")(e.to_string()))
}

/// An idle session from Monty's dump.
fn load_idle(payload: &[u8]) -> Result<MontyRepl, HostError> {
    let dump = monty::Dump::load(payload)
        .map_err(|e| snapshot_error("decode the session")(e.to_string()))?;
    match dump.state {
        monty::Session::Idle(repl) => Ok(*repl),
        _ => Err(HostError::Snapshot(
            "these bytes are not an idle namespace session".into(),
        )),
    }
}

/// Seals Monty's `payload` with the session section (see [`section`]).
fn seal(
    cfg: &EngineConfig,
    payload: &[u8],
    kind: u8,
    feed: Option<&Feed>,
    awaits: &Awaits,
) -> Result<Vec<u8>, HostError> {
    let extra = section(kind, feed, awaits)?;
    Ok(snapshot::seal_with_extra(
        payload,
        cfg.snapshot_key.as_deref(),
        cfg.limits.recursion_depth() as u32,
        Some(&extra),
    ))
}

/// The session section: of kind `kind`, for the paused `feed` (None when idle), with the
/// completed feeds' offsets `awaits`. Format 1 unless there are awaited-call offsets or
/// started calls to carry.
fn section(kind: u8, feed: Option<&Feed>, awaits: &Awaits) -> Result<Vec<u8>, HostError> {
    let record = feed.map(|f| (&f.script, &f.script_name, &f.input_name, f.start.as_ref()));
    let (offsets, pending) = match feed {
        Some(f) => (f.offsets.as_slice(), Some(&f.pending)),
        None => (&[][..], None),
    };
    let pending: Vec<_> = pending
        .into_iter()
        .flatten()
        .map(|(id, p)| (*id, &p.req.name, &p.req.positional, &p.req.keyword, &p.args))
        .collect();
    if awaits.is_empty() && offsets.is_empty() && pending.is_empty() {
        postcard::to_allocvec(&(SESSION_MARK, SESSION_FORMAT, kind, record))
    } else {
        postcard::to_allocvec(&(
            SESSION_MARK,
            SESSION_FORMAT_TASKS,
            kind,
            record,
            awaits,
            offsets,
            pending,
        ))
    }
    .map_err(|e| snapshot_error("serialize the session's context")(e.to_string()))
}

/// The session section as read back (format 1 or 2).
struct Record {
    kind: u8,
    feed: Option<FeedRecord>,
    awaits: Awaits,
    offsets: Vec<u32>,
    pending: Vec<PendingRecord>,
}

/// Opens session bytes: Monty's payload and the session section.
fn open<'a>(cfg: &EngineConfig, bytes: &'a [u8]) -> Result<(&'a [u8], Record), HostError> {
    let (payload, extra) = snapshot::open_with_extra(bytes, cfg.snapshot_key.as_deref())?;
    let not_session = || {
        HostError::Snapshot(
            "these bytes are a paused script (the dump of a Call or a Gather), not a namespace \
             session: resume them with MontyRuntime.resume (a Gather's with resume_gather)"
                .into(),
        )
    };
    let extra = extra.ok_or_else(not_session)?;
    if extra.first() != Some(&SESSION_MARK) {
        return Err(not_session());
    }
    let undecodable =
        |e: postcard::Error| snapshot_error("decode the session's context")(e.to_string());
    // postcard writes a u8 as one byte: the format is the section's second byte.
    match extra.get(1).copied() {
        Some(SESSION_FORMAT) => {
            let (_, _, kind, feed): SessionRecord =
                postcard::from_bytes(extra).map_err(undecodable)?;
            Ok((
                payload,
                Record {
                    kind,
                    feed,
                    awaits: Awaits::new(),
                    offsets: Vec::new(),
                    pending: Vec::new(),
                },
            ))
        }
        Some(SESSION_FORMAT_TASKS) => {
            let (_, _, kind, feed, awaits, offsets, pending): TasksSessionRecord =
                postcard::from_bytes(extra).map_err(undecodable)?;
            let sorted = |o: &[u32]| o.windows(2).all(|w| w[0] < w[1]);
            if !sorted(&offsets) || !awaits.values().all(|o| sorted(o)) {
                return Err(HostError::Snapshot(
                    "the session's awaited calls are malformed".into(),
                ));
            }
            Ok((
                payload,
                Record {
                    kind,
                    feed,
                    awaits,
                    offsets,
                    pending,
                },
            ))
        }
        other => Err(HostError::Snapshot(format!(
            "the session's context has format {}, this build reads {SESSION_FORMAT} and \
             {SESSION_FORMAT_TASKS}",
            other.unwrap_or_default()
        ))),
    }
}

/// Monty's `<python-input-N>` names in `message`: the feed's own as its script name,
/// earlier feeds' as `<script N+1>`.
fn rename_inputs(message: &str, feed: &Feed) -> String {
    const PREFIX: &str = "<python-input-";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + PREFIX.len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let n = tail[..digits].parse::<u64>().ok();
        match n {
            Some(n) if tail[digits..].starts_with('>') => {
                let whole = &rest[at..at + PREFIX.len() + digits + 1];
                if whole == feed.input_name {
                    out.push_str(&feed.script_name);
                } else {
                    out.push_str(&format!("<script {}>", n + 1));
                }
                rest = &tail[digits + 1..];
            }
            _ => {
                out.push_str(PREFIX);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether the name at `at` is called (`name(`), read from the feed's source.
fn is_called(feed: &Feed, at: &SourceRange) -> bool {
    if crate::traceback::unknown_position(&at.filename) {
        return false; // an augmented assignment's target (`counter += 1`)
    }
    if at.filename != feed.input_name {
        return true;
    }
    feed.script
        .get(at.end as usize..)
        .is_none_or(|rest| rest.trim_start().starts_with('('))
}

type Progress = Result<ReplProgress, Box<ReplStartError>>;

/// Where a drive ended: at a tool call, at a gather, or with the session idle again.
enum Driven {
    Call(Box<ReplFunctionCall>, ToolRequest),
    Gather(Box<ReplResolveFutures>, Vec<u32>),
    Done(Box<MontyRepl>, Result<MontyObject, String>),
}

/// Runs a feed from `progress` until a tool call, a gather, completion or an uncaught
/// exception. Awaited calls start as futures, recorded in the feed's pending table.
fn drive(
    cfg: &EngineConfig,
    mut progress: Progress,
    out: &mut CappedOutput,
    journal: &mut Journal,
    feed: &mut Feed,
) -> Result<Driven, HostError> {
    let mut table = None;
    loop {
        let p = match progress {
            Ok(p) => p,
            Err(err) => {
                let ReplStartError { repl, error } = *err;
                return Ok(Driven::Done(
                    Box::new(repl),
                    Err(rename_inputs(
                        &crate::traceback::render(error, Some((&feed.script, &feed.input_name))),
                        feed,
                    )),
                ));
            }
        };
        // The advance's time budget, charged at each pause the advance answers itself
        // (`os_policy::AdvanceClock`; a tool call returned to the host ends the advance).
        let over_budget = match &p {
            ReplProgress::OsCall(call) => journal.clock.charge(&call.function_call, p.tracker()),
            ReplProgress::Complete { .. } => None,
            _ => journal.clock.charge_turn(p.tracker()),
        };
        progress = match p {
            ReplProgress::Complete { repl, value } => {
                let result = match check_plain(&value, "the result") {
                    Ok(()) => Ok(value),
                    Err(e) => Err(format!(
                        "TypeError: the script's last expression must be plain data: {}",
                        e.describe()
                    )),
                };
                return Ok(Driven::Done(Box::new(repl), result));
            }
            ReplProgress::FunctionCall(mut call) => match classify_parts(
                cfg.tool_style,
                &call.function_name,
                &call.args,
                call.call_id,
                call.object_id.is_none(),
            ) {
                Ok(req) if !call.allow_eager_await && feed.defers(&call.position) => {
                    // An awaited call that competes with other work: start it as a future and
                    // run on; the host runs it when every task waits (`ResolveFutures`).
                    if let Some(exc) = over_budget {
                        call.abort(exc, PrintWriter::Callback(out))
                    } else {
                        let args = std::mem::take(&mut call.args);
                        feed.pending.insert(req.call_id, PendingTool { args, req });
                        call.resume_pending(PrintWriter::Callback(out))
                    }
                }
                Ok(req) => return Ok(Driven::Call(Box::new(call), req)),
                Err(exc) => match over_budget {
                    Some(timeout) => call.abort(timeout, PrintWriter::Callback(out)),
                    None => call.resume(ExtFunctionResult::Error(exc), PrintWriter::Callback(out)),
                },
            },
            ReplProgress::OsCall(call) => {
                feed.os_calls += 1;
                if let Some(exc) = os_calls_over(feed.os_calls, cfg.limits.max_os_calls) {
                    progress = call.abort(exc, PrintWriter::Callback(out));
                    continue;
                }
                if let Some(exc) = over_budget {
                    progress = call.abort(exc, PrintWriter::Callback(out));
                    continue;
                }
                if call.function_call.fs_primary_path().is_some()
                    && table.is_none()
                    && !cfg.os.mounts.is_empty()
                {
                    table = Some(cfg.os.mount_table()?);
                }
                match cfg.os.nondeterministic(
                    &call.function_call,
                    journal,
                    &mut feed.clock_reads,
                )? {
                    Some(answer) => call.resume(answer, PrintWriter::Callback(out)),
                    None => {
                        let os = &cfg.os;
                        let t = table.as_mut();
                        call.resume_with(PrintWriter::Callback(out), |c| os.service(c, t))
                    }
                }
            }
            ReplProgress::NameLookup(lookup) => {
                if let Some(exc) = over_budget {
                    progress = lookup.abort(exc, PrintWriter::Callback(out));
                    continue;
                }
                let called = is_called(feed, &lookup.position);
                let answer = name_answer(cfg.tool_style, &lookup.name, called);
                lookup.resume(answer, PrintWriter::Callback(out))
            }
            ReplProgress::ResolveFutures(futures) => {
                let mut ids = futures.pending_call_ids().to_vec();
                ids.sort_unstable();
                if ids.iter().all(|id| feed.pending.contains_key(id)) {
                    return Ok(Driven::Gather(Box::new(futures), ids));
                }
                // A future the host did not start (never expected): fail it in the script.
                let answers = ids
                    .into_iter()
                    .filter(|id| !feed.pending.contains_key(id))
                    .map(|id| {
                        (
                            id,
                            ExtFunctionResult::Error(MontyException::new(
                                ExcType::RuntimeError,
                                Some(NO_ASYNC.into()),
                            )),
                        )
                    })
                    .collect();
                futures.resume(answers, PrintWriter::Callback(out))
            }
        };
    }
}

/// Ends or pauses a feed: at a tool call or a gather the feed's context travels with it;
/// when done the session is idle again, back at the feed's start when it raised.
fn settle(
    inner: &Inner,
    driven: Driven,
    mut feed: Feed,
    out: CappedOutput,
    journal: Journal,
) -> Result<Advance, HostError> {
    feed.printed = out.printed();
    let stop = match driven {
        Driven::Call(call, req) => Stop::Call(call, req, feed),
        Driven::Gather(futures, ids) => Stop::Gather(futures, ids, feed),
        Driven::Done(repl, Ok(value)) => {
            *inner.awaits() = feed.awaits_after();
            *inner.repl() = Some(*repl);
            Stop::Complete(value)
        }
        Driven::Done(repl, Err(message)) => {
            drop(repl);
            *inner.repl() = Some(load_idle(&feed.start)?);
            Stop::Raised(message)
        }
    };
    Ok(Advance {
        stop,
        stdout: out.text,
        stderr: out.err,
        os_log: journal.into_log(),
    })
}

/// Puts the session back at the feed's start after a host failure mid-feed.
fn roll_back(inner: &Inner, start: &[u8]) {
    if let Ok(repl) = guarded("load", || load_idle(start)) {
        *inner.repl() = Some(repl);
    }
}

/// Feeds `script` to the idle session `repl` and runs it to its first stop. `deferred`:
/// byte offsets of the call expressions the script awaits.
fn feed(
    inner: &Inner,
    repl: MontyRepl,
    script: String,
    script_name: String,
    mut journal: Journal,
    mut deferred: Vec<u32>,
) -> Result<Advance, HostError> {
    let _charging = charge_to(&inner.memory);
    if script.len() > MAX_SCRIPT_BYTES {
        *inner.repl() = Some(repl);
        return Ok(Advance {
            stop: Stop::Raised(format!(
                "SyntaxError: the script is too long: {} bytes (at most {MAX_SCRIPT_BYTES}); \
                 split the work across turns",
                script.len()
            )),
            stdout: String::new(),
            stderr: String::new(),
            os_log: Vec::new(),
        });
    }
    let start = match guarded("dump", || {
        let _spare = charge_to(&inner.spare);
        dump_idle(&repl).map(Arc::new)
    }) {
        Ok(start) => start,
        Err(e) => {
            *inner.repl() = Some(repl);
            return Err(e);
        }
    };
    deferred.sort_unstable();
    deferred.dedup();
    let mut feed = Feed {
        input_name: repl.next_script_name(),
        script,
        script_name,
        start: Arc::clone(&start),
        before: Arc::clone(&inner.awaits()),
        offsets: deferred,
        pending: BTreeMap::new(),
        printed: Printed::default(),
        os_calls: 0,
        clock_reads: 0,
    };
    let cfg = &inner.cfg;
    let result = guarded("feed", move || {
        let seed = journal.random_seed()?;
        let repl = repl.with_os_policy(cfg.os.monty_policy(seed));
        let mut out = CappedOutput::new(cfg.max_stdout);
        let progress = repl.feed_start(
            &feed.script,
            Vec::<(String, MontyObject)>::new(),
            PrintWriter::Callback(&mut out),
        );
        let driven = drive(cfg, progress, &mut out, &mut journal, &mut feed)?;
        settle(inner, driven, feed, out, journal)
    });
    if result.is_err() {
        roll_back(inner, &start);
    }
    result
}

/// Goes on with a paused feed: `go` resumes Monty (given the feed and the output), then the
/// feed runs to its next stop.
fn go_on(
    inner: &Inner,
    mut feed: Feed,
    mut journal: Journal,
    go: impl FnOnce(&mut Feed, &mut CappedOutput) -> Progress,
) -> Result<Advance, HostError> {
    let _charging = charge_to(&inner.memory);
    let start = Arc::clone(&feed.start);
    let cfg = &inner.cfg;
    let result = guarded("resume", move || {
        let mut out = CappedOutput::continuing(cfg.max_stdout, feed.printed);
        // Monty restarts the turn budget (our per-advance time limit) at every resume.
        let progress = go(&mut feed, &mut out);
        let driven = drive(cfg, progress, &mut out, &mut journal, &mut feed)?;
        settle(inner, driven, feed, out, journal)
    });
    if result.is_err() {
        roll_back(inner, &start);
    }
    result
}

/// Resumes a feed paused at a tool call with `outcome` and runs it to its next stop.
fn resume(
    inner: &Inner,
    call: ReplFunctionCall,
    feed: Feed,
    outcome: Outcome,
    journal: Journal,
) -> Result<Advance, HostError> {
    let (limit, mut used) = (inner.cfg.limits.max_memory, inner.memory.used());
    go_on(inner, feed, journal, move |_, out| {
        let result = ext_result_within(outcome, limit, &mut used);
        if call.allow_eager_await {
            let settled = match result {
                ExtFunctionResult::Error(exc) => Err(exc),
                ExtFunctionResult::Return(v) => Ok(v),
                _ => unreachable!("ext_result gives a value or an error"),
            };
            call.resume_eager(settled, PrintWriter::Callback(out))
        } else {
            call.resume(result, PrintWriter::Callback(out))
        }
    })
}

/// Settles some (or all) of the calls a paused gather awaits and runs to the next stop.
/// The caller has checked that every id is one the gather awaits.
fn resume_gather(
    inner: &Inner,
    futures: ReplResolveFutures,
    feed: Feed,
    outcomes: Vec<(u32, Outcome)>,
    journal: Journal,
) -> Result<Advance, HostError> {
    let (limit, mut used) = (inner.cfg.limits.max_memory, inner.memory.used());
    go_on(inner, feed, journal, move |feed, out| {
        let results = outcomes
            .into_iter()
            .map(|(id, o)| {
                feed.pending.remove(&id);
                (id, ext_result_within(o, limit, &mut used))
            })
            .collect();
        futures.resume(results, PrintWriter::Callback(out))
    })
}

/// Sealed bytes of a feed paused at `progress` (a tool call or a gather).
fn dump_paused(
    cfg: &EngineConfig,
    progress: &ReplProgress,
    feed: &Feed,
) -> Result<Vec<u8>, HostError> {
    monty::dump(
        &feed.script_name,
        None,
        &[],
        monty::SessionRef::Suspended(progress),
    )
    .map_err(|e| snapshot_error("serialize the paused script")(e.to_string()))
    .and_then(|payload| seal(cfg, &payload, KIND_SUSPENDED, Some(feed), &feed.before))
}

/// Sealed bytes of a feed paused at `call`; hands the call back.
fn dump_call(
    cfg: &EngineConfig,
    call: ReplFunctionCall,
    feed: &Feed,
) -> (Result<Vec<u8>, HostError>, ReplFunctionCall) {
    let progress = ReplProgress::FunctionCall(call);
    let bytes = dump_paused(cfg, &progress, feed);
    let call = progress
        .into_function_call()
        .expect("just wrapped a function call");
    (bytes, call)
}

/// Sealed bytes of a feed paused at a gather; hands the gather back.
fn dump_gather(
    cfg: &EngineConfig,
    futures: ReplResolveFutures,
    feed: &Feed,
) -> (Result<Vec<u8>, HostError>, ReplResolveFutures) {
    let progress = ReplProgress::ResolveFutures(futures);
    let bytes = dump_paused(cfg, &progress, feed);
    let futures = progress
        .into_resolve_futures()
        .expect("just wrapped a paused gather");
    (bytes, futures)
}

/// What session bytes hold.
enum LoadedSession {
    Idle(Box<MontyRepl>),
    Call(Box<ReplFunctionCall>, ToolRequest, Feed),
    Gather(Box<ReplResolveFutures>, Vec<u32>, Feed),
}

/// Restores session bytes; also gives the completed feeds' awaited-call offsets.
fn load_session(
    cfg: &EngineConfig,
    memory: &Arc<RunMemory>,
    bytes: &[u8],
) -> Result<(LoadedSession, Awaits), HostError> {
    let (payload, record) = open(cfg, bytes)?;
    let _charging = charge_to(memory);
    guarded("load", || {
        let Record {
            kind,
            feed,
            awaits,
            offsets,
            pending,
        } = record;
        let loaded = match (kind, feed) {
            (KIND_IDLE, None) if offsets.is_empty() && pending.is_empty() => {
                let mut repl = load_idle(payload)?;
                // This runtime's limits apply (the stricter of them and the stored ones).
                repl.tracker_mut()
                    .tighten_limits(&cfg.limits.resource_limits());
                LoadedSession::Idle(Box::new(repl))
            }
            (KIND_SUSPENDED, Some((script, script_name, input_name, start))) => {
                let dump = monty::Dump::load(payload)
                    .map_err(|e| snapshot_error("decode the paused script")(e.to_string()))?;
                let monty::Session::Suspended(mut progress) = dump.state else {
                    return Err(HostError::Snapshot(
                        "the session is not paused at a tool call".into(),
                    ));
                };
                progress
                    .tracker_mut()
                    .tighten_limits(&cfg.limits.resource_limits());
                let feed = Feed {
                    script,
                    script_name,
                    input_name,
                    start: Arc::new(start),
                    before: Arc::new(awaits.clone()),
                    offsets,
                    pending: pending_table(cfg.tool_style, pending, "the session's awaited calls")?,
                    printed: Printed::default(),
                    os_calls: 0,
                    clock_reads: 0,
                };
                match *progress {
                    ReplProgress::ResolveFutures(futures) => {
                        let mut ids = futures.pending_call_ids().to_vec();
                        ids.sort_unstable();
                        if ids.is_empty() || !ids.iter().all(|id| feed.pending.contains_key(id)) {
                            return Err(HostError::Snapshot(
                                "the session awaits tool calls it does not describe".into(),
                            ));
                        }
                        LoadedSession::Gather(Box::new(futures), ids, feed)
                    }
                    ReplProgress::FunctionCall(call) => {
                        let req = classify_parts(
                            cfg.tool_style,
                            &call.function_name,
                            &call.args,
                            call.call_id,
                            call.object_id.is_none(),
                        )
                        .map_err(|_| {
                            HostError::Snapshot(
                                "the session is not paused at a valid tool call".into(),
                            )
                        })?;
                        LoadedSession::Call(Box::new(call), req, feed)
                    }
                    _ => {
                        return Err(HostError::Snapshot(
                            "the session is not paused at a tool call".into(),
                        ));
                    }
                }
            }
            _ => {
                return Err(HostError::Snapshot(
                    "the session's context is malformed".into(),
                ));
            }
        };
        Ok((loaded, awaits))
    })
}

/// The seam step for an advance of a session feed.
fn build_step(py: Python<'_>, inner: &Arc<Inner>, advance: Advance) -> PyResult<Py<PyAny>> {
    let types = seam(py)?;
    let stdout = PyString::new(py, &advance.stdout).into_any();
    let stderr = PyString::new(py, &advance.stderr).into_any();
    let os_log = os_log_to_py(py, &advance.os_log)?.into_any();
    match advance.stop {
        Stop::Complete(value) => {
            let value = monty_to_py(py, &value, "the result")
                .map_err(|e| HostError::Internal(e.describe()))?;
            types
                .complete
                .build(py, [value.into_bound(py), stdout, os_log, stderr])
        }
        Stop::Raised(message) => {
            let message = PyString::new(py, &message).into_any();
            types.raised.build(py, [message, stdout, os_log, stderr])
        }
        Stop::Call(call, req, feed) => {
            let pending = Py::new(py, MontySessionCall::new(py, inner, *call, req, feed)?)?;
            types.call.build(
                py,
                [pending.into_bound(py).into_any(), stdout, os_log, stderr],
            )
        }
        Stop::Gather(futures, ids, feed) => {
            let (gather, calls) = MontySessionGather::new(py, inner, *futures, ids, feed)?;
            gather_step(py, gather.into_any(), calls, [stdout, stderr], os_log)
        }
    }
}

/// A namespace session: a Monty REPL whose globals carry from feed to feed.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontySession {
    inner: Arc<Inner>,
}

impl MontySession {
    fn from_engine(engine: &MontyEngine) -> Self {
        Self {
            inner: Arc::new(Inner {
                cfg: Arc::clone(&engine.cfg),
                memory: RunMemory::new(),
                spare: RunMemory::new(),
                repl: Mutex::new(None),
                awaits: Mutex::default(),
            }),
        }
    }
}

const BUSY: &str = "the session is running a script or paused at a tool call; \
                    resume that call before feeding another script";

#[pymethods]
impl MontySession {
    /// A new, empty session under `engine`'s limits and OS policy.
    #[staticmethod]
    fn start(engine: &MontyEngine) -> Self {
        let session = Self::from_engine(engine);
        {
            let _charging = charge_to(&session.inner.memory);
            let repl = MontyRepl::new(
                "main.py",
                session.inner.cfg.limits.tracker(),
                CompileOptions::default(),
            );
            *session.inner.repl() = Some(repl);
        }
        session
    }

    /// Restores a session from bytes of `dump()` (idle), of a paused feed's call `dump()`
    /// or of a paused feed's gather `dump()`. Returns `(session, paused)`: `paused` is None
    /// for an idle session, else the paused feed's `MontySessionCall` or
    /// `MontySessionGather` (resume it to go on).
    #[staticmethod]
    fn load(
        py: Python<'_>,
        engine: &MontyEngine,
        snapshot: Vec<u8>,
    ) -> PyResult<(Self, Option<Py<PyAny>>)> {
        let session = Self::from_engine(engine);
        let cfg = Arc::clone(&session.inner.cfg);
        let memory = Arc::clone(&session.inner.memory);
        let depth = crate::engine::snapshot_depth(&snapshot)?;
        let (loaded, awaits) =
            run_interpreter(py, depth, move || load_session(&cfg, &memory, &snapshot))?;
        *session.inner.awaits() = Arc::new(awaits);
        match loaded {
            LoadedSession::Idle(repl) => {
                *session.inner.repl() = Some(*repl);
                Ok((session, None))
            }
            LoadedSession::Call(call, req, feed) => {
                let pending = MontySessionCall::new(py, &session.inner, *call, req, feed)?;
                Ok((session, Some(Py::new(py, pending)?.into_any())))
            }
            LoadedSession::Gather(futures, ids, feed) => {
                let (gather, _calls) =
                    MontySessionGather::new(py, &session.inner, *futures, ids, feed)?;
                Ok((session, Some(gather.into_any())))
            }
        }
    }

    /// Runs `script` in the session to its first stop; returns a `Call`, `Gather`,
    /// `Complete` or `Raised`. After `Complete` the script's globals stay; after `Raised`
    /// the session is as it was before the script. `deferred`: byte offsets of the call
    /// expressions the script awaits (as for `MontyEngine.start`).
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None))]
    fn feed(
        &self,
        py: Python<'_>,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
    ) -> PyResult<Py<PyAny>> {
        let journal = journal_from_py(os_replay)?;
        let repl = self
            .inner
            .repl()
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(BUSY))?;
        let inner = Arc::clone(&self.inner);
        let needed = stack_needed(inner.cfg.limits.max_recursion_depth)
            + script.len().min(MAX_SCRIPT_BYTES) * STACK_PER_SOURCE_BYTE;
        let deferred = deferred.unwrap_or_default();
        let advance = py
            .detach(move || {
                with_stack(needed, || {
                    feed(&inner, repl, script, script_name, journal, deferred)
                })
            })
            .map_err(PyErr::from)?;
        build_step(py, &self.inner, advance)
    }

    /// Sealed bytes of the idle session (load them with `MontySession.load`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let repl = self
            .inner
            .repl()
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(BUSY))?;
        let inner = Arc::clone(&self.inner);
        let awaits = Arc::clone(&self.inner.awaits());
        let (bytes, repl) = py.detach(move || {
            with_stack(DUMP_STACK, || {
                let bytes = dump_idle(&repl)
                    .and_then(|payload| seal(&inner.cfg, &payload, KIND_IDLE, None, &awaits));
                (bytes, repl)
            })
        });
        *self.inner.repl() = Some(repl);
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Whether the session is idle (ready for `feed` and `dump`).
    #[getter]
    fn idle(&self) -> bool {
        self.inner.repl().is_some()
    }

    /// Bytes currently charged to the session (its heap and the interpreter's state).
    #[getter]
    fn memory_used(&self) -> usize {
        self.inner.memory.used()
    }
}

/// A paused feed dropped without a resume: the session goes back to the feed's start.
fn drop_paused(inner: &Inner, paused: impl FnOnce(), feed: Feed) {
    let _charging = charge_to(&inner.memory);
    paused();
    let start = Arc::clone(&feed.start);
    drop(feed);
    if inner.repl().is_none() {
        with_stack(DUMP_STACK, || roll_back(inner, &start));
    }
}

const ALREADY_RESUMED: &str = "this PendingCall was already resumed; a PendingCall is single use";

/// A session feed paused at a tool call, held live in memory; resume it once.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontySessionCall {
    inner: Arc<Inner>,
    name: String,
    positional: Py<PyTuple>,
    keyword: Py<PyDict>,
    call_id: u32,
    paused: Mutex<Option<(Box<ReplFunctionCall>, Feed)>>,
}

impl MontySessionCall {
    fn new(
        py: Python<'_>,
        inner: &Arc<Inner>,
        call: ReplFunctionCall,
        req: ToolRequest,
        feed: Feed,
    ) -> PyResult<Self> {
        let arena = monty_types::unstable::call_args_parts(&call.args).0;
        let mut positional = Vec::with_capacity(req.positional.len());
        for (i, v) in req.positional.iter().enumerate() {
            positional.push(
                ref_to_py(py, V::at(arena, *v), &format!("argument {i}"))
                    .map_err(|e| HostError::Internal(e.describe()))?,
            );
        }
        let keyword = PyDict::new(py);
        for (k, v) in &req.keyword {
            keyword.set_item(
                k,
                ref_to_py(py, V::at(arena, *v), k)
                    .map_err(|e| HostError::Internal(e.describe()))?,
            )?;
        }
        Ok(Self {
            inner: Arc::clone(inner),
            name: req.name,
            positional: PyTuple::new(py, positional)?.unbind(),
            keyword: keyword.unbind(),
            call_id: req.call_id,
            paused: Mutex::new(Some((Box::new(call), feed))),
        })
    }

    fn take(&self) -> PyResult<(Box<ReplFunctionCall>, Feed)> {
        self.paused
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("pending call lock poisoned"))?
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(ALREADY_RESUMED))
    }
}

#[pymethods]
impl MontySessionCall {
    /// The tool name the script called.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Positional arguments (always empty in the `call_tool` style).
    #[getter]
    fn positional_args(&self, py: Python<'_>) -> Py<PyTuple> {
        self.positional.clone_ref(py)
    }

    /// Keyword arguments: the `call_tool` dict, in the script's order.
    #[getter]
    fn keyword_args(&self, py: Python<'_>) -> Py<PyDict> {
        self.keyword.clone_ref(py)
    }

    /// The interpreter's call counter for this call.
    #[getter]
    fn call_id(&self) -> u32 {
        self.call_id
    }

    /// Sealed bytes of the paused session (restore with `MontySession.load`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (call, feed) = self.take()?;
        let cfg = Arc::clone(&self.inner.cfg);
        let (bytes, call, feed) = py.detach(move || {
            with_stack(DUMP_STACK, || {
                let (bytes, call) = dump_call(&cfg, *call, &feed);
                (bytes, call, feed)
            })
        });
        *self.paused.lock().expect("pending call lock") = Some((Box::new(call), feed));
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Resumes the feed in place with `outcome` (`ResumeValue` or `ResumeError`).
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let outcome = outcome_from_py(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let (call, feed) = self.take()?;
        let inner = Arc::clone(&self.inner);
        let depth = inner.cfg.limits.max_recursion_depth;
        let advance = run_interpreter(py, depth, move || {
            resume(&inner, *call, feed, outcome, journal)
        })?;
        build_step(py, &self.inner, advance)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "MontySessionCall(name={:?}, keyword_args={}, call_id={})",
            self.name,
            self.keyword.bind(py).repr()?,
            self.call_id
        ))
    }
}

impl Drop for MontySessionCall {
    /// A paused feed dropped without a resume: the session goes back to the feed's start.
    fn drop(&mut self) {
        let paused = self
            .paused
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((call, feed)) = paused {
            drop_paused(&self.inner, move || drop(call), feed);
        }
    }
}

const GATHER_RESUMED: &str = "this Gather was already resumed; a Gather is single use";

/// A session feed whose tasks all wait on started tool calls (`await asyncio.gather(...)`),
/// held live in memory: the continuation of a session's `Gather` step; resume it once.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontySessionGather {
    inner: Arc<Inner>,
    ids: Vec<u32>,
    /// `(name, positional_args, keyword_args, call_id)` of each call, in call order.
    calls: Py<PyTuple>,
    paused: Mutex<Option<(Box<ReplResolveFutures>, Feed)>>,
}

impl MontySessionGather {
    /// The live continuation and the calls it awaits.
    fn new(
        py: Python<'_>,
        inner: &Arc<Inner>,
        futures: ReplResolveFutures,
        ids: Vec<u32>,
        feed: Feed,
    ) -> PyResult<(Py<Self>, Vec<CallInfo>)> {
        let calls = calls_in(py, &feed.pending, &ids)?;
        let listed = calls
            .iter()
            .map(|(name, positional, keyword, id)| {
                (
                    name.as_str(),
                    positional.clone_ref(py),
                    keyword.clone_ref(py),
                    *id,
                )
                    .into_pyobject(py)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let gather = Self {
            inner: Arc::clone(inner),
            ids,
            calls: PyTuple::new(py, listed)?.unbind(),
            paused: Mutex::new(Some((Box::new(futures), feed))),
        };
        Ok((Py::new(py, gather)?, calls))
    }

    fn take(&self) -> PyResult<(Box<ReplResolveFutures>, Feed)> {
        self.paused
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("gather lock poisoned"))?
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(GATHER_RESUMED))
    }
}

#[pymethods]
impl MontySessionGather {
    /// The call ids the feed awaits, in call order.
    #[getter]
    fn call_ids(&self) -> Vec<u32> {
        self.ids.clone()
    }

    /// The calls the feed awaits, in call order, each as
    /// `(name, positional_args, keyword_args, call_id)`.
    #[getter]
    fn calls(&self, py: Python<'_>) -> Py<PyTuple> {
        self.calls.clone_ref(py)
    }

    /// Sealed bytes of the paused session (restore with `MontySession.load`; may be called
    /// repeatedly).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (futures, feed) = self.take()?;
        let cfg = Arc::clone(&self.inner.cfg);
        let (bytes, futures, feed) = py.detach(move || {
            with_stack(DUMP_STACK, || {
                let (bytes, futures) = dump_gather(&cfg, *futures, &feed);
                (bytes, futures, feed)
            })
        });
        *self.paused.lock().expect("gather lock") = Some((Box::new(futures), feed));
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Settles the calls in `outcomes` ({call_id: `ResumeValue` | `ResumeError`}, a subset
    /// allowed) and runs the feed to its next stop (another `Gather` while it still waits).
    #[pyo3(signature = (outcomes, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        outcomes: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let outcomes = outcomes_from_py(py, outcomes, &self.ids)?;
        let journal = journal_from_py(os_replay)?;
        let (futures, feed) = self.take()?;
        let inner = Arc::clone(&self.inner);
        let depth = inner.cfg.limits.max_recursion_depth;
        let advance = run_interpreter(py, depth, move || {
            resume_gather(&inner, *futures, feed, outcomes, journal)
        })?;
        build_step(py, &self.inner, advance)
    }

    fn __repr__(&self) -> String {
        format!("MontySessionGather(call_ids={:?})", self.ids)
    }
}

impl Drop for MontySessionGather {
    /// A paused feed dropped without a resume: the session goes back to the feed's start.
    fn drop(&mut self) {
        let paused = self
            .paused
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((futures, feed)) = paused {
            drop_paused(&self.inner, move || drop(futures), feed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_named(input: &str) -> Feed {
        Feed {
            script: String::new(),
            script_name: "main.py".into(),
            input_name: input.into(),
            start: Arc::new(Vec::new()),
            before: Arc::new(Awaits::from([("<python-input-0>".to_string(), vec![4, 9])])),
            offsets: vec![2, 7],
            pending: BTreeMap::new(),
            printed: Printed::default(),
            os_calls: 0,
            clock_reads: 0,
        }
    }

    #[test]
    fn input_names_become_script_names() {
        let feed = feed_named("<python-input-2>");
        let msg = "File \"<python-input-2>\", line 3\nFile \"<python-input-0>\", line 1\n<python-input-x>";
        assert_eq!(
            rename_inputs(msg, &feed),
            "File \"main.py\", line 3\nFile \"<script 1>\", line 1\n<python-input-x>"
        );
    }

    #[test]
    fn awaited_calls_are_found_in_this_feed_and_in_earlier_ones() {
        let feed = feed_named("<python-input-2>");
        let at = |file: &str, start: u32| SourceRange {
            filename: file.into(),
            start,
            end: start + 1,
        };
        assert!(feed.defers(&at("<python-input-2>", 7)));
        assert!(!feed.defers(&at("<python-input-2>", 4)));
        assert!(feed.defers(&at("<python-input-0>", 4)));
        assert!(!feed.defers(&at("<python-input-0>", 7)));
        assert!(!feed.defers(&at("<python-input-1>", 4)));
        let after = feed.awaits_after();
        assert_eq!(after.get("<python-input-2>"), Some(&vec![2, 7]));
        assert_eq!(after.len(), 2);
    }

    #[test]
    fn a_session_that_awaits_nothing_writes_format_one_byte_for_byte() {
        let none: Option<FeedRecord> = None;
        assert_eq!(
            section(KIND_IDLE, None, &Awaits::new()).unwrap(),
            postcard::to_allocvec(&(SESSION_MARK, SESSION_FORMAT, KIND_IDLE, none)).unwrap()
        );
        let mut feed = feed_named("<python-input-1>");
        feed.script = "x = call_tool('t', {})".into();
        feed.start = Arc::new(vec![1, 2, 3]);
        feed.before = Arc::new(Awaits::new());
        feed.offsets.clear();
        let old: SessionRecord = (
            SESSION_MARK,
            SESSION_FORMAT,
            KIND_SUSPENDED,
            Some((
                feed.script.clone(),
                feed.script_name.clone(),
                feed.input_name.clone(),
                vec![1, 2, 3],
            )),
        );
        assert_eq!(
            section(KIND_SUSPENDED, Some(&feed), &feed.before).unwrap(),
            postcard::to_allocvec(&old).unwrap()
        );
    }

    #[test]
    fn awaited_call_state_round_trips_in_format_two() {
        let feed = feed_named("<python-input-2>");
        let bytes = section(KIND_SUSPENDED, Some(&feed), &feed.before).unwrap();
        assert_eq!(bytes[..2], [SESSION_MARK, SESSION_FORMAT_TASKS]);
        let (_, _, kind, record, awaits, offsets, pending): TasksSessionRecord =
            postcard::from_bytes(&bytes).unwrap();
        assert_eq!(kind, KIND_SUSPENDED);
        assert_eq!(record.unwrap().2, "<python-input-2>");
        assert_eq!(awaits, *feed.before);
        assert_eq!(offsets, vec![2, 7]);
        assert!(pending.is_empty());
        let idle = section(KIND_IDLE, None, &feed.before).unwrap();
        assert_eq!(idle[1], SESSION_FORMAT_TASKS);
    }
}
