//! The namespace-session engine: a Monty REPL (`monty::MontyRepl`) fed script after script
//! (`persist_namespace`; ADR 0003). `crate::py_repl` is its Python face; the feed runs
//! through the one [`drive`](super::drive) like a run.
//!
//! Session bytes: Monty's dump in the snapshot envelope, with codeact's section (mark,
//! format, kind, the paused feed's context). Format 1 has nothing else and is what a session
//! that never awaited a tool call writes, byte for byte as before; format 2 adds the
//! awaited-call offsets of the completed feeds, the paused feed's own, and its started calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::interp;
use crate::engine::interp::{
    CompileOptions, ExtFunctionResult, MontyException, MontyObject, PrintWriter, SourceRange,
};
use crate::engine::interp::{
    MontyRepl, ReplFunctionCall, ReplProgress, ReplResolveFutures, ReplStartError,
};

use super::{
    Advance, Driven, Driver, EngineConfig, Held, MAX_SCRIPT_BYTES, Outcome, PendingRecord,
    PendingTool, Repl, Stop, ToolRequest, classify_parts, drive, ext_result_within, guarded,
    pending_table,
};
use crate::errors::HostError;
use crate::journal::Journal;
use crate::live::LiveOutput;
use crate::memory::{RunMemory, charge_to};
use crate::output::{CappedOutput, Printed};
use crate::snapshot::{self, SESSION_IDLE as KIND_IDLE, SESSION_MARK};
use crate::stack::with_stack;

/// Stack a dump needs, in bytes (the heap serializes flat; this is headroom).
pub(crate) const DUMP_STACK: usize = 2 * 1024 * 1024;

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
pub(crate) type Awaits = BTreeMap<String, Vec<u32>>;

/// What a feed carries from advance to advance besides Monty's state.
pub(crate) struct Feed {
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
    pub(crate) pending: BTreeMap<u32, PendingTool>,
    /// What the feed printed so far and the OS calls it made, across its advances (one feed
    /// is one run for `max_stdout` and `max_os_calls`; a feed restored from bytes starts
    /// them anew).
    printed: Printed,
    os_calls: u64,
    clock_reads: u64,
    /// The feed's live output listener, if it has one ([`crate::live`]).
    pub(crate) live: Option<Arc<LiveOutput>>,
}

impl Feed {
    /// The byte range `(start, end)` of the source range `at` in this feed's own script;
    /// None for a range elsewhere (a function an earlier feed defined) or unknown.
    pub(crate) fn own_range(&self, at: &SourceRange) -> Option<(u32, u32)> {
        (at.filename == self.input_name && at.start <= at.end).then_some((at.start, at.end))
    }

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
pub(crate) struct Inner {
    pub(crate) cfg: Arc<EngineConfig>,
    /// The session's memory counter, for its whole life (see [`crate::memory`]).
    pub(crate) memory: RunMemory,
    /// Where the rollback copy of a feed's starting session is charged: host bookkeeping,
    /// not the script's memory, so it does not count against `max_memory`.
    pub(crate) spare: RunMemory,
    /// The idle session; `None` while a feed runs or is paused at a tool call.
    pub(crate) repl: Mutex<Option<MontyRepl>>,
    /// The awaited-call offsets of the feeds that completed (see [`Feed::defers`]).
    pub(crate) awaits: Mutex<Arc<Awaits>>,
}

impl Inner {
    pub(crate) fn repl(&self) -> MutexGuard<'_, Option<MontyRepl>> {
        self.repl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn awaits(&self) -> MutexGuard<'_, Arc<Awaits>> {
        self.awaits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Inner {
    /// A session's state under `cfg`, with no interpreter yet.
    pub(crate) fn new(cfg: Arc<EngineConfig>) -> Arc<Self> {
        Arc::new(Self {
            cfg,
            memory: RunMemory::new(),
            spare: RunMemory::new(),
            repl: Mutex::new(None),
            awaits: Mutex::default(),
        })
    }
}

/// Puts a new, empty interpreter in the session.
pub(crate) fn start(inner: &Inner) {
    let _charging = charge_to(&inner.memory);
    let repl = MontyRepl::new(
        "main.py",
        inner.cfg.limits.tracker(),
        CompileOptions::default(),
    );
    *inner.repl() = Some(repl);
}

/// Sealed bytes of the idle session `repl`; hands it back.
pub(crate) fn dump_idle_session(
    inner: &Inner,
    repl: MontyRepl,
) -> (Result<Vec<u8>, HostError>, MontyRepl) {
    let awaits = Arc::clone(&inner.awaits());
    let bytes =
        dump_idle(&repl).and_then(|payload| seal(&inner.cfg, &payload, KIND_IDLE, None, &awaits));
    (bytes, repl)
}

fn snapshot_error(what: &str) -> impl Fn(String) -> HostError + '_ {
    move |e| HostError::Snapshot(format!("cannot {what}: {e}"))
}

/// Monty's dump of an idle session.
pub(crate) fn dump_idle(repl: &MontyRepl) -> Result<Vec<u8>, HostError> {
    interp::dump("main.py", None, &[], interp::SessionRef::Idle(repl))
        .map_err(|e| snapshot_error("serialize the session")(e.to_string()))
}

/// An idle session from Monty's dump.
pub(crate) fn load_idle(payload: &[u8]) -> Result<MontyRepl, HostError> {
    let dump = interp::Dump::load(payload)
        .map_err(|e| snapshot_error("decode the session")(e.to_string()))?;
    match dump.state {
        interp::Session::Idle(repl) => Ok(*repl),
        _ => Err(HostError::Snapshot(
            "these bytes are not an idle namespace session".into(),
        )),
    }
}

/// Seals Monty's `payload` with the session section (see [`section`]).
pub(crate) fn seal(
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
        .map(|(id, p)| p.record(*id))
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

impl Driver for Feed {
    fn source(&self) -> Option<(&str, &str)> {
        Some((&self.script, &self.input_name))
    }

    fn defers(&self, at: &SourceRange) -> bool {
        Feed::defers(self, at)
    }

    fn start_call(&mut self, call: PendingTool) {
        self.pending.insert(call.req.call_id, call);
    }

    fn started(&self, ids: &[u32]) -> bool {
        ids.iter().all(|id| self.pending.contains_key(id))
    }

    fn count_os_call(&mut self) -> u64 {
        self.os_calls += 1;
        self.os_calls
    }

    fn clock_reads<R>(&mut self, f: impl FnOnce(&mut u64) -> R) -> R {
        f(&mut self.clock_reads)
    }

    fn raised(&self, exc: MontyException) -> String {
        let text = crate::traceback::render(exc, Some((&self.script, &self.input_name)));
        rename_inputs(&text, self)
    }
}

type Progress = Result<ReplProgress, Box<ReplStartError>>;

/// Ends or pauses a feed: at a tool call or a gather the feed's context travels with it;
/// when done the session is idle again, back at the feed's start when it raised.
fn settle(
    inner: &Inner,
    driven: Driven<Repl>,
    mut feed: Feed,
    out: CappedOutput,
    journal: Journal,
) -> Result<Advance, HostError> {
    feed.printed = out.printed();
    let stop = match driven {
        Driven::Call(call, req) => Stop::Call(Held::SessionCall(call, feed), req),
        Driven::Gather(futures, ids) => Stop::Gather(Held::SessionGather(futures, feed), ids),
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
pub(crate) fn roll_back(inner: &Inner, start: &[u8]) {
    if let Ok(repl) = guarded("load", || load_idle(start)) {
        *inner.repl() = Some(repl);
    }
}

/// Feeds `script` to the idle session `repl` and runs it to its first stop. `deferred`:
/// byte offsets of the call expressions the script awaits.
pub(crate) fn feed(
    inner: &Inner,
    repl: MontyRepl,
    script: String,
    script_name: String,
    mut journal: Journal,
    mut deferred: Vec<u32>,
    live: Option<Arc<LiveOutput>>,
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
        live,
    };
    let cfg = &inner.cfg;
    let result = guarded("feed", move || {
        let seed = journal.random_seed()?;
        let repl = repl.with_os_policy(cfg.os.monty_policy(seed));
        let mut out = CappedOutput::new(cfg.max_stdout).with_live(feed.live.clone());
        let progress = repl.feed_start(
            &feed.script,
            Vec::<(String, MontyObject)>::new(),
            PrintWriter::Callback(&mut out),
        );
        let driven = drive::<Repl>(cfg, progress, &mut out, &mut journal, &mut feed, ())?;
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
        let mut out =
            CappedOutput::continuing(cfg.max_stdout, feed.printed).with_live(feed.live.clone());
        // Monty restarts the turn budget (our per-advance time limit) at every resume.
        let progress = go(&mut feed, &mut out);
        let driven = drive::<Repl>(cfg, progress, &mut out, &mut journal, &mut feed, ())?;
        settle(inner, driven, feed, out, journal)
    });
    if result.is_err() {
        roll_back(inner, &start);
    }
    result
}

/// Resumes a feed paused at a tool call with `outcome` and runs it to its next stop.
pub(crate) fn resume(
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
pub(crate) fn resume_gather(
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
    interp::dump(
        &feed.script_name,
        None,
        &[],
        interp::SessionRef::Suspended(progress),
    )
    .map_err(|e| snapshot_error("serialize the paused script")(e.to_string()))
    .and_then(|payload| seal(cfg, &payload, KIND_SUSPENDED, Some(feed), &feed.before))
}

/// Sealed bytes of a feed paused at `call`; hands the call back.
pub(crate) fn dump_call(
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
pub(crate) fn dump_gather(
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
pub(crate) enum LoadedSession {
    Idle(Box<MontyRepl>),
    Call(Box<ReplFunctionCall>, ToolRequest, Feed),
    Gather(Box<ReplResolveFutures>, Vec<u32>, Feed),
}

/// Restores session bytes; also gives the completed feeds' awaited-call offsets.
pub(crate) fn load_session(
    cfg: &EngineConfig,
    memory: &RunMemory,
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
                let dump = interp::Dump::load(payload)
                    .map_err(|e| snapshot_error("decode the paused script")(e.to_string()))?;
                let interp::Session::Suspended(mut progress) = dump.state else {
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
                    live: None,
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

/// A paused feed dropped without a resume: the session goes back to the feed's start.
pub(crate) fn drop_paused(inner: &Inner, paused: impl FnOnce(), feed: Feed) {
    let _charging = charge_to(&inner.memory);
    paused();
    let start = Arc::clone(&feed.start);
    drop(feed);
    if inner.repl().is_none() {
        with_stack(DUMP_STACK, || roll_back(inner, &start));
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
            live: None,
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
