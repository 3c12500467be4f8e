//! The engine (this folder) is the one place that talks to the Monty crates: compile, step,
//! drive, dump, load. The crates are named in one file, [`interp`]; everything else in the
//! extension reaches Monty through it, so a Monty bump touches this folder only.
//!
//! Everything a script does besides calling a tool (OS calls, name lookups, futures,
//! refused call forms) is answered here, in place, so an advance only stops at a tool
//! call, at completion, or at an uncaught exception.
//!
//! The folder by concern: this file holds a run's configuration, state and advances
//! (`start`, `resume`, `resume_gather`); [`request`] the checked tool call and the names a
//! script may call; [`seal`] a run's snapshot bytes and the way back; [`drive`] the one loop
//! that answers pauses; [`session`] the namespace-session engine.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::errors::HostError;
use crate::journal::Journal;
use crate::live::LiveOutput;
use crate::memory::{RunMemory, charge_to};
use crate::os_policy::OsPolicy;
use crate::output::{Printed, RunOutput};
use interp::unstable;
use interp::{
    CallArgs, CompileOptions, ExcType, ExtFunctionResult, FunctionCall, MontyException,
    MontyObject, MontyRun, PrintWriter, ResolveFutures, ResourceLimits, ResourceTracker,
};

pub(crate) mod callback_hint;
mod drive;
pub(crate) mod interp;
mod request;
mod seal;
pub(crate) mod session;

pub(crate) use interp::{DUMP_VERSION, MIN_SUPPORTED_DUMP_VERSION};
pub use request::ToolRequest;
pub(crate) use request::{classify_parts, name_answer};
pub use seal::{Loaded, dump, dump_gather, load, load_any, snapshot_depth};
pub(crate) use seal::{PendingRecord, PendingRecordRef, pending_table};

use drive::Run;
pub(crate) use drive::{Driven, Driver, Repl, drive};
use std::sync::Arc;

/// Highest recursion depth a script may ask for, in frames, even when "unlimited".
pub const RECURSION_CEILING: usize = 10_000;

/// The memory budget a run gets when the runtime sets none, in bytes: Monty checks large
/// allocations against it before making them, so a script such as `" " * (1 << 60)`
/// raises `MemoryError` instead of failing the host's allocator (which aborts the process).
pub const MEMORY_CEILING: usize = 1 << 40;

/// The budget of a run without `max_memory`: the machine's physical memory (at most
/// [`MEMORY_CEILING`]), so a growing script ends with `MemoryError` before the host runs out.
pub fn memory_ceiling() -> usize {
    crate::memory::physical_memory().map_or(MEMORY_CEILING, |m| m.min(MEMORY_CEILING))
}

/// Per-advance resource limits; they travel inside snapshots with the tracker.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_duration: Option<Duration>,
    pub max_memory: Option<usize>,
    pub max_recursion_depth: usize,
    /// OS calls (files, clock, environment, sleeps) one run may make, across its advances.
    pub max_os_calls: Option<u64>,
}

/// The default of [`Limits::max_os_calls`]: far more than a script reading a folder (or
/// timing itself with the clock) needs; a loop of them (about a microsecond each) ends within
/// seconds across any number of advances.
pub const DEFAULT_MAX_OS_CALLS: u64 = 1_000_000;

impl Limits {
    /// The recursion limit scripts really get: the configured one, at most the ceiling.
    pub fn recursion_depth(&self) -> usize {
        self.max_recursion_depth.min(RECURSION_CEILING)
    }

    pub(crate) fn tracker(&self) -> ResourceTracker {
        ResourceTracker::new(self.resource_limits())
    }

    /// These limits as Monty's; a restored continuation is tightened to them
    /// (`ResourceTracker::tighten_limits`): the stricter of the stored and these applies.
    pub(crate) fn resource_limits(&self) -> ResourceLimits {
        ResourceLimits {
            // Limits apply per advance: Monty's turn budget restarts at every resume.
            max_turn_duration: self.max_duration,
            max_memory: Some(self.max_memory.unwrap_or_else(memory_ceiling)),
            max_recursion_depth: self.recursion_depth(),
            // Tool calls are counted by the agent (max_tool_calls), not by the interpreter.
            max_suspensions: usize::MAX,
            ..ResourceLimits::default()
        }
    }
}

/// How scripts reach tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStyle {
    /// Only `call_tool("name", {...})`; every other call form is refused in the script.
    CallTool,
    /// Any call of an undefined name surfaces as a tool call with its arguments.
    Functions,
}

/// Everything an advance needs besides the script or snapshot.
pub struct EngineConfig {
    pub limits: Limits,
    pub os: OsPolicy,
    pub tool_style: ToolStyle,
    pub max_stdout: usize,
    pub snapshot_key: Option<Vec<u8>>,
}

/// A live continuation paused at a tool call.
pub struct Paused(Box<FunctionCall>, Arc<RunCtx>);

/// What a run carries from advance to advance besides Monty's state.
pub struct RunCtx {
    /// The run's memory counter (see [`crate::memory`]).
    memory: RunMemory,
    /// The script and its name, when known (not for a run restored from bytes): name
    /// lookups read it to tell a called name from a bare reference.
    source: Option<(String, String)>,
    /// The tool calls the script awaits, and those started and not yet settled.
    tasks: Tasks,
    /// What the run printed so far (`max_stdout` holds across its advances).
    output: RunOutput,
    /// OS calls the run made so far (`max_os_calls` holds across its advances).
    os_calls: AtomicU64,
    /// Clock reads the run made so far (a stepping clock answers by their count).
    clock_reads: AtomicU64,
}

/// The run-wide counters a snapshot carries, so a run resumed from bytes (in another
/// process, after a crash) stays bounded by the same budgets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunCounts {
    pub printed: Printed,
    pub os_calls: u64,
    pub clock_reads: u64,
}

impl RunCounts {
    fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// Where a script awaits tool calls: the call expressions (byte offsets of their start in
/// the script named `script`) whose result the script awaits rather than uses at once.
/// Computed by the host from the exact source Monty runs (`codeact.runtime._awaits`).
#[derive(Debug, Default, Clone)]
pub struct Deferred {
    pub script: String,
    /// Sorted byte offsets.
    pub offsets: Vec<u32>,
}

/// A tool call the script started without waiting for it: its checked request and the
/// arena its argument ids point into.
pub struct PendingTool {
    pub args: CallArgs,
    pub req: ToolRequest,
}

impl PendingTool {
    /// The call as snapshot bytes keep it: `(call_id, name, positional ids, keyword names
    /// and ids, arena)`, the shape of [`PendingRecord`].
    pub(crate) fn record(&self, call_id: u32) -> PendingRecordRef<'_> {
        let graph = unstable::call_args_parts(&self.args).0;
        (
            call_id,
            self.req.name(graph),
            &self.req.positional,
            self.req.keyword_list(graph),
            &self.args,
        )
    }
}

/// The awaited-call state of a run.
#[derive(Default)]
pub struct Tasks {
    pub deferred: Deferred,
    /// Call id -> the started call, until the host settles it.
    pub pending: Mutex<BTreeMap<u32, PendingTool>>,
}

impl RunCtx {
    fn new(
        memory: RunMemory,
        source: Option<(String, String)>,
        tasks: Tasks,
        counts: RunCounts,
    ) -> Self {
        Self {
            memory,
            source,
            tasks,
            output: RunOutput::new(counts.printed),
            os_calls: AtomicU64::new(counts.os_calls),
            clock_reads: AtomicU64::new(counts.clock_reads),
        }
    }

    fn counts(&self) -> RunCounts {
        RunCounts {
            printed: self.output.get(),
            os_calls: self.os_calls.load(Ordering::Relaxed),
            clock_reads: self.clock_reads.load(Ordering::Relaxed),
        }
    }

    /// Whether the call expression at `at` is one the script awaits.
    fn defers(&self, at: &interp::SourceRange) -> bool {
        let d = &self.tasks.deferred;
        !d.offsets.is_empty()
            && (at.filename == d.script || d.script.ends_with(&format!("/{}", at.filename)))
            && d.offsets.binary_search(&at.start).is_ok()
    }

    /// Runs `f` on the pending-call table.
    pub fn with_pending<R>(&self, f: impl FnOnce(&mut BTreeMap<u32, PendingTool>) -> R) -> R {
        let mut table = self
            .tasks
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut table)
    }
}

impl Paused {
    /// The arena the request's node ids point into.
    pub fn arena(&self) -> &unstable::MontyGraph {
        unstable::call_args_parts(&self.0.args).0
    }

    /// The byte range `(start, end)` of the paused call expression in the script the run was
    /// started with; None when Monty does not know it. A run has one source: the script.
    pub fn range(&self) -> Option<(u32, u32)> {
        let at = &self.0.position;
        (!crate::traceback::unknown_position(&at.filename) && at.start <= at.end)
            .then_some((at.start, at.end))
    }
}

/// A live continuation where every task of the script waits on started tool calls
/// (`await asyncio.gather(call_tool(...), ...)`).
pub struct PausedGather(ResolveFutures, Arc<RunCtx>);

impl PausedGather {
    /// The run's state (its pending-call table names the calls).
    pub fn ctx(&self) -> &Arc<RunCtx> {
        &self.1
    }
}

/// A script paused at one or more tool calls, held live: the four cases of a continuation.
pub enum Held {
    /// A run paused at one tool call.
    RunCall(Paused),
    /// A run whose tasks all wait on started tool calls.
    RunGather(Box<PausedGather>),
    /// A namespace session's feed paused at one tool call.
    SessionCall(Box<interp::ReplFunctionCall>, session::Feed),
    /// A namespace session's feed whose tasks all wait on started tool calls.
    SessionGather(Box<interp::ReplResolveFutures>, session::Feed),
}

impl Held {
    /// Gives the paused run or feed a live output listener for its later advances (a
    /// continuation restored from bytes has none); a run that has one keeps it.
    pub fn listen(&mut self, live: Arc<LiveOutput>) {
        match self {
            Self::RunCall(Paused(_, ctx)) => {
                ctx.output.listen(live);
            }
            Self::RunGather(paused) => {
                paused.1.output.listen(live);
            }
            Self::SessionCall(_, feed) | Self::SessionGather(_, feed) => {
                feed.live.get_or_insert(live);
            }
        }
    }

    /// The byte range `(start, end)` of the paused call expression in the source the run
    /// or feed was given (the script as the interpreter read it); None for a gather, for a
    /// position Monty does not know, and for a call made in a function an earlier feed of
    /// the session defined (its source is that feed's).
    pub fn call_range(&self) -> Option<(u32, u32)> {
        match self {
            Self::RunCall(paused) => paused.range(),
            Self::SessionCall(call, feed) => feed.own_range(&call.position),
            Self::RunGather(_) | Self::SessionGather(..) => None,
        }
    }
}

/// Where an advance stopped.
pub enum Stop {
    /// At one tool call, already checked.
    Call(Held, ToolRequest),
    /// The script awaits these started calls (sorted call ids, each in the run's table).
    Gather(Held, Vec<u32>),
    Complete(MontyObject),
    Raised(String),
}

/// One advance: where it stopped and what the script printed on the way.
pub struct Advance {
    pub stop: Stop,
    pub stdout: String,
    /// What the script wrote to stderr (`print(..., file=sys.stderr)`) on the way.
    pub stderr: String,
    /// The nondeterministic answers given to the script during this advance, in order.
    pub os_log: crate::journal::OsLog,
}

impl Advance {
    /// Gives the run or feed paused at this advance's stop a live output listener (see
    /// [`Held::listen`]); nothing for an advance that ended the run.
    pub fn listen(&mut self, live: Arc<LiveOutput>) {
        if let Stop::Call(held, _) | Stop::Gather(held, _) = &mut self.stop {
            held.listen(live);
        }
    }
}

/// What the paused call returns to the script.
pub enum Outcome {
    Value(MontyObject),
    Error { exc_type: String, message: String },
}

pub(crate) fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, HostError>,
) -> Result<T, HostError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(HostError::Internal(format!(
                "Monty panicked during {what}: {detail}"
            )))
        }
    }
}

/// Longest script accepted, in bytes; longer ones are refused as a script mistake.
pub const MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

/// Host stack a start needs on top of the recursion allowance, per byte of source:
/// Monty's parser and compiler recurse along long flat chains (`1+1+...`, `a.b.c...`)
/// that its nesting guard does not count (measured: up to about 33 bytes per source byte).
pub const STACK_PER_SOURCE_BYTE: usize = 64;

/// Compiles and runs `script` up to its first stop.
pub fn start(
    cfg: &EngineConfig,
    script: String,
    script_name: &str,
    mut journal: Journal,
    deferred: Vec<u32>,
    live: Option<Arc<LiveOutput>>,
) -> Result<Advance, HostError> {
    if script.len() > MAX_SCRIPT_BYTES {
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
    let mut offsets = deferred;
    offsets.sort_unstable();
    offsets.dedup();
    let ctx = Arc::new(RunCtx::new(
        RunMemory::new(),
        Some((script.clone(), script_name.to_owned())),
        Tasks {
            deferred: Deferred {
                script: script_name.to_owned(),
                offsets,
            },
            pending: Mutex::default(),
        },
        RunCounts::default(),
    ));
    if let Some(live) = live {
        ctx.output.listen(live);
    }
    let _charging = charge_to(&ctx.memory);
    guarded("start", || {
        let mut out = ctx.output.capture(cfg.max_stdout);
        let run = match MontyRun::new(script, script_name, Vec::new(), CompileOptions::default()) {
            Ok(run) => run,
            Err(exc) => {
                return Ok(Advance {
                    stop: Stop::Raised(exc.to_string()),
                    stdout: String::new(),
                    stderr: String::new(),
                    os_log: journal.into_log(),
                });
            }
        };
        let seed = journal.random_seed()?;
        let run = run.with_os_policy(cfg.os.monty_policy(seed));
        let progress = run.start(
            Vec::new(),
            cfg.limits.tracker(),
            PrintWriter::Callback(&mut out),
        );
        let stop = run_stop(
            drive::<Run>(cfg, progress, &mut out, &mut journal, &mut &*ctx, None)?,
            &ctx,
        );
        ctx.output.keep(&out);
        Ok(Advance {
            stop,
            stdout: out.text,
            stderr: out.err,
            os_log: journal.into_log(),
        })
    })
}

/// Resumes a paused call with `outcome` and runs to the next stop.
pub fn resume(
    cfg: &EngineConfig,
    paused: Paused,
    outcome: Outcome,
    mut journal: Journal,
) -> Result<Advance, HostError> {
    let Paused(call, ctx) = paused;
    let _charging = charge_to(&ctx.memory);
    guarded("resume", move || {
        // Monty's resume takes the paused state by value; its box is kept for the next pause.
        let (call, room) = unbox(call);
        // Monty restarts the turn budget (our per-advance time limit) at every resume.
        let eager = call.allow_eager_await;
        let result = ext_result_within(outcome, cfg.limits.max_memory, &mut ctx.memory.used());
        let mut out = ctx.output.capture(cfg.max_stdout);
        let progress = if eager {
            // `await call_tool(...)` with nothing else to run: the awaited value, settled now.
            let settled = match result {
                ExtFunctionResult::Error(exc) => Err(exc),
                ExtFunctionResult::Return(v) => Ok(v),
                _ => unreachable!("ext_result gives a value or an error"),
            };
            call.resume_eager(settled, PrintWriter::Callback(&mut out))
        } else {
            call.resume(result, PrintWriter::Callback(&mut out))
        };
        let stop = run_stop(
            drive::<Run>(
                cfg,
                progress,
                &mut out,
                &mut journal,
                &mut &*ctx,
                Some(room),
            )?,
            &ctx,
        );
        ctx.output.keep(&out);
        Ok(Advance {
            stop,
            stdout: out.text,
            stderr: out.err,
            os_log: journal.into_log(),
        })
    })
}

/// Moves a value out of its box and hands back the box's allocation, emptied, for the
/// next value of the type (`Box::write`): the paused call a resume takes and the one it
/// stops at next share one allocation (see [`drive::Interp::Spare`]). Dropping the
/// emptied box frees the allocation without dropping a value.
fn unbox<T>(boxed: Box<T>) -> (T, Box<MaybeUninit<T>>) {
    let raw = Box::into_raw(boxed);
    // SAFETY: `raw` comes from `Box::into_raw`: valid, aligned and initialised. The value is
    // read out once, and the allocation is handed back typed `MaybeUninit<T>`, which never
    // drops its contents, so the value is dropped only by its new owner. `MaybeUninit<T>`
    // has the layout of `T`, so the box frees the allocation with the layout it was made with.
    unsafe { (raw.read(), Box::from_raw(raw.cast::<MaybeUninit<T>>())) }
}

/// Where an advance of a run stopped, from where its drive ended.
fn run_stop(driven: Driven<Run>, ctx: &Arc<RunCtx>) -> Stop {
    match driven {
        Driven::Call(call, req) => Stop::Call(Held::RunCall(Paused(call, Arc::clone(ctx))), req),
        Driven::Gather(futures, ids) => Stop::Gather(
            Held::RunGather(Box::new(PausedGather(*futures, Arc::clone(ctx)))),
            ids,
        ),
        Driven::Done((), Ok(value)) => Stop::Complete(value),
        Driven::Done((), Err(message)) => Stop::Raised(message),
    }
}

impl Driver for &RunCtx {
    fn source(&self) -> Option<(&str, &str)> {
        self.source.as_ref().map(|(s, n)| (s.as_str(), n.as_str()))
    }

    fn defers(&self, at: &interp::SourceRange) -> bool {
        RunCtx::defers(self, at)
    }

    fn start_call(&mut self, call: PendingTool) {
        self.with_pending(|t| t.insert(call.req.call_id, call));
    }

    fn started(&self, ids: &[u32]) -> bool {
        self.with_pending(|t| ids.iter().all(|id| t.contains_key(id)))
    }

    fn count_os_call(&mut self) -> u64 {
        self.os_calls.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn clock_reads<R>(&mut self, f: impl FnOnce(&mut u64) -> R) -> R {
        let mut reads = self.clock_reads.load(Ordering::Relaxed);
        let r = f(&mut reads);
        self.clock_reads.store(reads, Ordering::Relaxed);
        r
    }

    fn raised(&self, exc: MontyException) -> String {
        raised_text(exc, self)
    }
}

/// The traceback fed back for a script's uncaught exception (`crate::traceback`).
fn raised_text(exc: MontyException, ctx: &RunCtx) -> String {
    let source = ctx.source.as_ref().map(|(s, n)| (s.as_str(), n.as_str()));
    crate::traceback::render(exc, source)
}

pub(crate) const NO_ASYNC: &str =
    "asynchronous tool calls are not supported; call tools synchronously, without `await`";

/// What a tool outcome is to Monty, within the script's memory limit (`limit`, with `used`
/// bytes already held, raised by what it lets in): a value that cannot fit is raised in the script, at the call, as a
/// `MemoryError` it can catch. The value was built outside the advance, so it would enter
/// the heap uncounted and only show when the heap is next recounted (a session rolling back
/// or loading), failing every later script of the session instead of this call.
pub(crate) fn ext_result_within(
    outcome: Outcome,
    limit: Option<usize>,
    used: &mut usize,
) -> ExtFunctionResult {
    if let (Outcome::Value(value), Some(limit)) = (&outcome, limit) {
        let size = unstable::graph_parts(value).0.decoded_size();
        let left = limit.saturating_sub(*used);
        if size <= left {
            // Several values settled together (a gather) must fit together.
            *used += size;
        } else {
            return ExtFunctionResult::Error(MontyException::new(
                ExcType::MemoryError,
                Some(format!(
                    "the tool's result needs about {size} bytes, more than the {left} bytes left \
                     of the script's memory limit ({limit} bytes); ask the tool for less (a page, \
                     a summary, fewer fields)"
                )),
            ));
        }
    }
    ext_result(outcome)
}

/// What a tool outcome is to Monty.
pub(crate) fn ext_result(outcome: Outcome) -> ExtFunctionResult {
    match outcome {
        Outcome::Value(v) => ExtFunctionResult::Return(v),
        Outcome::Error { exc_type, message } => {
            // Only Exception subclasses: a script must be able to catch a tool failure.
            let kind = ExcType::from_str(&exc_type)
                .ok()
                .filter(|k| k.is_subclass_of(ExcType::Exception))
                .unwrap_or(ExcType::RuntimeError);
            ExtFunctionResult::Error(MontyException::new(kind, Some(message)))
        }
    }
}

/// Settles some (or all) of the calls a paused gather awaits and runs to the next stop.
/// The caller has checked that every id is one the gather awaits.
pub fn resume_gather(
    cfg: &EngineConfig,
    paused: PausedGather,
    outcomes: Vec<(u32, Outcome)>,
    mut journal: Journal,
) -> Result<Advance, HostError> {
    let PausedGather(futures, ctx) = paused;
    let _charging = charge_to(&ctx.memory);
    guarded("resume", || {
        ctx.with_pending(|t| {
            for (id, _) in &outcomes {
                t.remove(id);
            }
        });
        let mut used = ctx.memory.used();
        let results = outcomes
            .into_iter()
            .map(|(id, o)| (id, ext_result_within(o, cfg.limits.max_memory, &mut used)))
            .collect();
        let mut out = ctx.output.capture(cfg.max_stdout);
        // Monty restarts the turn budget (our per-advance time limit) here too.
        let progress = futures.resume(results, PrintWriter::Callback(&mut out));
        let stop = run_stop(
            drive::<Run>(cfg, progress, &mut out, &mut journal, &mut &*ctx, None)?,
            &ctx,
        );
        ctx.output.keep(&out);
        Ok(Advance {
            stop,
            stdout: out.text,
            stderr: out.err,
            os_log: journal.into_log(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbox_moves_the_value_out_once_and_keeps_its_allocation() {
        use std::rc::Rc;
        let counted = Rc::new(());
        let boxed = Box::new((Rc::clone(&counted), [7u8; 2048]));
        let at = &*boxed as *const _ as usize;
        let (value, room) = unbox(boxed);
        assert_eq!(
            Rc::strong_count(&counted),
            2,
            "moved, not copied nor dropped"
        );
        assert_eq!(value.1[2047], 7);
        let again = Box::write(room, value);
        assert_eq!(
            &*again as *const _ as usize, at,
            "the next value reuses the allocation"
        );
        let (value, room) = unbox(again);
        drop(room); // frees the allocation without dropping the value
        assert_eq!(Rc::strong_count(&counted), 2);
        drop(value);
        assert_eq!(Rc::strong_count(&counted), 1);
    }
}
