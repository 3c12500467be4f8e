//! The engine (this folder) is the one place that talks to the `monty` crate: compile, step, drive, dump, load.
//!
//! Everything a script does besides calling a tool (OS calls, name lookups, futures,
//! refused call forms) is answered here, in place, so an advance only stops at a tool
//! call, at completion, or at an uncaught exception.

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use monty::{FunctionCall, MontyRun, ResolveFutures, RunProgress};
use monty_types::unstable::{self, NodeId};
use monty_types::{
    CallArgs, CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject,
    NameLookupResult, PrintWriter, ResourceLimits, ResourceTracker,
};

use crate::convert::{V, check_ref};
use crate::errors::HostError;
use crate::journal::Journal;
use crate::live::LiveOutput;
use crate::memory::{RunMemory, charge_to};
use crate::os_policy::OsPolicy;
use crate::output::{Printed, RunOutput};
use crate::snapshot;

pub(crate) mod callback_hint;
mod drive;

pub use monty::{DUMP_VERSION, MIN_SUPPORTED_DUMP_VERSION};
pub(crate) mod session;

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
    fn defers(&self, at: &monty_types::SourceRange) -> bool {
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

/// The tool call a paused script is waiting on, already checked. Arguments stay in the
/// paused call's arena ([`Paused::args`]); they are converted when Python reads them.
/// A `call_tool` request points into the arena for its name and its arguments too, so
/// classifying it allocates nothing (issue 21: the name and key strings and the list of
/// pairs were three allocations and three frees per round trip).
pub struct ToolRequest {
    pub name: ToolName,
    /// Arena ids of the positional arguments (`Functions` style only).
    pub positional: Vec<NodeId>,
    /// The keyword arguments (or the `call_tool` dict's items).
    pub keyword: Keywords,
    pub call_id: u32,
}

/// A requested tool's name.
pub enum ToolName {
    /// A string node of the call's arena (`call_tool`'s first argument).
    At(NodeId),
    /// The called name (`Functions` style), or a name read back from snapshot bytes.
    Named(String),
}

/// A request's keyword arguments.
pub enum Keywords {
    /// The items of a dict node of the call's arena (`call_tool`'s second argument), whose
    /// keys were checked to be strings.
    Dict(NodeId),
    /// Names and arena ids (`Functions` style keyword arguments, snapshot bytes; empty for a
    /// `call_tool` call without a dict).
    Listed(Vec<(String, NodeId)>),
}

impl ToolRequest {
    /// The tool's name; `graph` is the arena of the call's arguments.
    pub fn name<'a>(&'a self, graph: &'a unstable::MontyGraph) -> &'a str {
        match &self.name {
            ToolName::At(id) => graph.value(*id).as_str().unwrap_or_default(),
            ToolName::Named(name) => name,
        }
    }

    /// Calls `f` with each keyword argument's name and arena id, in the script's order,
    /// until it fails.
    pub fn try_keywords<'a, E>(
        &'a self,
        graph: &'a unstable::MontyGraph,
        mut f: impl FnMut(&'a str, NodeId) -> Result<(), E>,
    ) -> Result<(), E> {
        match &self.keyword {
            Keywords::Dict(id) => {
                if let unstable::MontyNode::Dict(pairs) = graph.node(*id) {
                    for (k, v) in pairs {
                        f(graph.value(*k).as_str().unwrap_or_default(), *v)?;
                    }
                }
                Ok(())
            }
            Keywords::Listed(items) => items.iter().try_for_each(|(k, v)| f(k, *v)),
        }
    }

    /// The keyword arguments as names and arena ids (snapshot bytes keep them so).
    pub fn keyword_list(&self, graph: &unstable::MontyGraph) -> Vec<(String, NodeId)> {
        let mut items = Vec::new();
        let _ = self.try_keywords(graph, |k, v| {
            items.push((k.to_owned(), v));
            Ok::<(), ()>(())
        });
        items
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
    SessionCall(Box<monty::ReplFunctionCall>, session::Feed),
    /// A namespace session's feed whose tasks all wait on started tool calls.
    SessionGather(Box<monty::ReplResolveFutures>, session::Feed),
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

/// Serializes a paused call into sealed snapshot bytes; hands the call back.
pub fn dump(cfg: &EngineConfig, paused: Paused) -> (Result<Vec<u8>, HostError>, Paused) {
    let Paused(call, ctx) = paused;
    let (call, room) = unbox(call);
    let progress = RunProgress::FunctionCall(call);
    let bytes = seal_progress(cfg, &progress, &ctx);
    let call = progress
        .into_function_call()
        .expect("just wrapped a function call");
    (bytes, Paused(Box::write(room, call), ctx))
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

/// The recursion limit a snapshot runs under, read from its envelope header so the caller
/// can size the stack before loading it. The integrity tag is checked once, by `load`,
/// before a single payload byte is decoded; a header that does not parse is refused here.
pub fn snapshot_depth(bytes: &[u8]) -> Result<usize, HostError> {
    Ok(snapshot::peek_depth(bytes)?.min(RECURSION_CEILING))
}

/// Restores a paused call from sealed snapshot bytes.
pub fn load(cfg: &EngineConfig, bytes: &[u8]) -> Result<(Paused, ToolRequest), HostError> {
    match load_any(cfg, bytes)? {
        Loaded::Call(paused, req) => Ok((paused, req)),
        Loaded::Gather(..) => Err(HostError::Snapshot(
            "snapshot is a script awaiting several tool calls (a gather): resume it with \
             resume_gather"
                .into(),
        )),
    }
}

/// A continuation restored from bytes.
pub enum Loaded {
    Call(Paused, ToolRequest),
    /// Paused where its tasks await started calls (sorted call ids).
    Gather(Box<PausedGather>, Vec<u32>),
}

/// Restores a paused call or a paused gather from sealed snapshot bytes.
pub fn load_any(cfg: &EngineConfig, bytes: &[u8]) -> Result<Loaded, HostError> {
    let (payload, extra) = snapshot::open_run(bytes, cfg.snapshot_key.as_deref())?;
    // The restored heap is the run's memory: charge its allocation to a fresh counter.
    let memory = RunMemory::new();
    let _charging = charge_to(&memory);
    guarded("load", || {
        let (tasks, counts) = match extra {
            Some(extra) => tasks_from_bytes(cfg.tool_style, extra)?,
            None => (Tasks::default(), RunCounts::default()),
        };
        let ctx = Arc::new(RunCtx::new(memory.clone(), None, tasks, counts));
        let dump = monty::Dump::load(payload)
            .map_err(|e| HostError::Snapshot(format!("cannot decode the paused script: {e}")))?;
        let monty::Session::Running(progress) = dump.state else {
            return Err(HostError::Snapshot(
                "snapshot is not a script paused at a tool call".into(),
            ));
        };
        let progress = match *progress {
            RunProgress::ResolveFutures(futures) => {
                let mut ids = futures.pending_call_ids().to_vec();
                ids.sort_unstable();
                if ids.is_empty() || !ctx.with_pending(|t| ids.iter().all(|id| t.contains_key(id)))
                {
                    return Err(HostError::Snapshot(
                        "snapshot awaits tool calls it does not describe".into(),
                    ));
                }
                return Ok(Loaded::Gather(Box::new(PausedGather(futures, ctx)), ids));
            }
            other => other,
        };
        let mut call = progress.into_function_call().ok_or_else(|| {
            HostError::Snapshot("snapshot is not a script paused at a tool call".into())
        })?;
        // This runtime's limits apply to a restored script (the stricter of them and the
        // limits stored with it).
        call.tracker_mut()
            .tighten_limits(&cfg.limits.resource_limits());
        let request = match classify(cfg.tool_style, &call) {
            Ok(r) => r,
            Err(_) => {
                return Err(HostError::Snapshot(
                    "snapshot is not paused at a valid tool call".into(),
                ));
            }
        };
        Ok(Loaded::Call(
            Paused(Box::new(call), Arc::clone(&ctx)),
            request,
        ))
    })
}

fn type_error(msg: String) -> MontyException {
    MontyException::new(ExcType::TypeError, Some(msg))
}

/// Unwraps and checks a call; an `Err` is the exception to raise into the script.
fn classify(style: ToolStyle, call: &FunctionCall) -> Result<ToolRequest, MontyException> {
    classify_parts(
        style,
        &call.function_name,
        &call.args,
        call.call_id,
        call.object_id.is_none(),
    )
}

/// [`classify`] on a call's parts (a script's or a session feed's call).
pub(crate) fn classify_parts(
    style: ToolStyle,
    function_name: &str,
    args: &CallArgs,
    call_id: u32,
    plain_function: bool,
) -> Result<ToolRequest, MontyException> {
    let (graph, arg_ids, kwarg_ids) = unstable::call_args_parts(args);
    if function_name != "call_tool" {
        if style == ToolStyle::Functions && plain_function {
            let mut keyword = Vec::with_capacity(kwarg_ids.len());
            for (k, v) in kwarg_ids {
                let Some(k) = graph.value(*k).as_str() else {
                    return Err(type_error("keyword argument names must be strings".into()));
                };
                keyword.push((k.to_owned(), *v));
            }
            let req = ToolRequest {
                name: ToolName::Named(function_name.to_owned()),
                positional: arg_ids.to_vec(),
                keyword: Keywords::Listed(keyword),
                call_id,
            };
            check_request(graph, &req)?;
            return Ok(req);
        }
        return Err(undefined_name(function_name));
    }
    let (name_id, name) = match arg_ids.first().map(|id| (*id, graph.value(*id).as_str())) {
        Some((id, Some(s))) => (id, s),
        _ => {
            return Err(type_error(
                "call_tool needs the tool name as its first argument, a string: \
                 call_tool(\"search\", {\"query\": \"...\"})"
                    .into(),
            ));
        }
    };
    if !kwarg_ids.is_empty() {
        return Err(type_error(format!(
            "call_tool takes the tool's arguments in one dict, not as keyword arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    if arg_ids.len() > 2 {
        return Err(type_error(format!(
            "call_tool takes exactly two arguments, the tool name and one dict of arguments: \
             call_tool(\"{name}\", {{\"arg\": value}})"
        )));
    }
    let mut keyword = Keywords::Listed(Vec::new());
    if let Some(id) = arg_ids.get(1) {
        let arg = graph.value(*id);
        match graph.node(*id) {
            unstable::MontyNode::Dict(pairs) => {
                for (k, _) in pairs {
                    let key = graph.value(*k);
                    if key.as_str().is_none() {
                        return Err(type_error(format!(
                            "call_tool argument names must be strings, got the {} key {}: \
                             call_tool(\"{name}\", {{\"arg\": value}})",
                            key.type_name(),
                            key.py_repr()
                        )));
                    }
                }
                keyword = Keywords::Dict(*id);
            }
            _ => {
                return Err(type_error(format!(
                    "call_tool's second argument must be a dict of the tool's arguments, got {}: \
                     call_tool(\"{name}\", {{\"arg\": value}})",
                    arg.type_name()
                )));
            }
        }
    }
    let req = ToolRequest {
        name: ToolName::At(name_id),
        positional: Vec::new(),
        keyword,
        call_id,
    };
    check_request(graph, &req)?;
    Ok(req)
}

fn check_request(graph: &unstable::MontyGraph, req: &ToolRequest) -> Result<(), MontyException> {
    for (i, v) in req.positional.iter().enumerate() {
        if is_scalar(graph, *v) {
            continue;
        }
        check_ref(V::at(graph, *v), &format!("argument {i}")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name(graph),
                e.describe()
            ))
        })?;
    }
    req.try_keywords(graph, |k, v| {
        if is_scalar(graph, v) {
            return Ok(());
        }
        check_ref(V::at(graph, v), &format!("argument '{k}'")).map_err(|e| {
            type_error(format!(
                "tool '{}' got a value it cannot take: {}",
                req.name(graph),
                e.describe()
            ))
        })
    })
}

/// Whether a node is a plain scalar (always crosses the boundary; nothing to check).
fn is_scalar(graph: &unstable::MontyGraph, id: NodeId) -> bool {
    matches!(
        graph.node(id),
        unstable::MontyNode::None
            | unstable::MontyNode::Bool(_)
            | unstable::MontyNode::Int(_)
            | unstable::MontyNode::BigInt(_)
            | unstable::MontyNode::Float(_)
            | unstable::MontyNode::String(_)
            | unstable::MontyNode::Bytes(_)
    )
}

/// CPython's builtin names (3.13): a lookup of one of these that Monty does not define is a
/// missing builtin, never a tool call.
const PYTHON_BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "False",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "None",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "True",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "__build_class__",
    "__debug__",
    "__doc__",
    "__file__",
    "__import__",
    "__name__",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// How the script's undefined names resolve: `call_tool` (and, in the functions style,
/// any other name that is not a Python builtin) is a host function whose calls pause the
/// script; other names raise `NameError`, with the tool hint only for names that look
/// like tool calls (not a builtin, not `final_answer`).
pub(crate) fn name_answer(style: ToolStyle, name: &str, called: bool) -> NameLookupResult {
    let builtin = PYTHON_BUILTINS.binary_search(&name).is_ok();
    if called && (name == "call_tool" || (style == ToolStyle::Functions && !builtin)) {
        return NameLookupResult::Value(MontyObject::function(name, None));
    }
    if builtin || name == "final_answer" || !called {
        return NameLookupResult::Undefined;
    }
    NameLookupResult::Error(undefined_name(name))
}

/// The `NameError` for a called name the host does not serve: with the tool hint unless
/// the name is a Python builtin or `final_answer`.
fn undefined_name(name: &str) -> MontyException {
    if PYTHON_BUILTINS.binary_search(&name).is_ok() || name == "final_answer" {
        return MontyException::new(
            ExcType::NameError,
            Some(format!("name '{name}' is not defined")),
        );
    }
    MontyException::new(
        ExcType::NameError,
        Some(format!(
            "name '{name}' is not defined. Tools are not Python functions here: call them only as \
             call_tool(\"<tool-name>\", {{\"arg\": value}})"
        )),
    )
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

    fn defers(&self, at: &monty_types::SourceRange) -> bool {
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

/// Serializes a paused gather into sealed snapshot bytes; hands it back.
pub fn dump_gather(
    cfg: &EngineConfig,
    paused: PausedGather,
) -> (Result<Vec<u8>, HostError>, PausedGather) {
    let PausedGather(futures, ctx) = paused;
    let progress = RunProgress::ResolveFutures(futures);
    let bytes = seal_progress(cfg, &progress, &ctx);
    let futures = progress
        .into_resolve_futures()
        .expect("just wrapped a paused gather");
    (bytes, PausedGather(futures, ctx))
}

/// Monty's dump of `progress` in the envelope, with the run's awaited-call state when it
/// has any (a run that awaits nothing seals exactly as before).
fn seal_progress(
    cfg: &EngineConfig,
    progress: &RunProgress,
    ctx: &RunCtx,
) -> Result<Vec<u8>, HostError> {
    let extra = tasks_to_bytes(ctx)?;
    monty::dump("main.py", None, &[], monty::SessionRef::Running(progress))
        .map(|payload| {
            snapshot::seal_with_extra(
                &payload,
                cfg.snapshot_key.as_deref(),
                cfg.limits.recursion_depth() as u32,
                extra.as_deref(),
            )
        })
        .map_err(|e| HostError::Snapshot(format!("cannot serialize the paused script: {e}")))
}

/// Version of the awaited-call section of the envelope written when the run has
/// counters to carry (formats 1, without them, and 2, without the clock reads, are still
/// read).
const TASKS_FORMAT: u8 = 3;
const TASKS_FORMAT_1: u8 = 1;
const TASKS_FORMAT_2: u8 = 2;

/// A started call in bytes: call id, tool name, positional and keyword argument ids, their
/// arena.
pub(crate) type PendingRecord = (u32, String, Vec<NodeId>, Vec<(String, NodeId)>, CallArgs);
/// A [`PendingRecord`] to serialize (the same bytes), borrowing what it can from the call.
pub(crate) type PendingRecordRef<'a> = (
    u32,
    &'a str,
    &'a [NodeId],
    Vec<(String, NodeId)>,
    &'a CallArgs,
);
type TasksRecord = (u8, String, Vec<u32>, Vec<PendingRecord>);
/// Format 2: format 1 plus the run's counters (bytes printed, cut or not, OS calls).
type TasksRecord2 = (u8, String, Vec<u32>, Vec<PendingRecord>, (u64, bool, u64));
/// Format 3: format 2's counters plus the run's clock reads.
type TasksRecord3 = (
    u8,
    String,
    Vec<u32>,
    Vec<PendingRecord>,
    (u64, bool, u64, u64),
);

fn tasks_to_bytes(ctx: &RunCtx) -> Result<Option<Vec<u8>>, HostError> {
    let d = &ctx.tasks.deferred;
    let counts = ctx.counts();
    ctx.with_pending(|t| {
        if d.offsets.is_empty() && t.is_empty() && counts.is_zero() {
            return Ok(None);
        }
        let pending: Vec<_> = t.iter().map(|(id, p)| p.record(*id)).collect();
        let c = (
            counts.printed.used as u64,
            counts.printed.truncated,
            counts.os_calls,
            counts.clock_reads,
        );
        postcard::to_allocvec(&(TASKS_FORMAT, &d.script, &d.offsets, pending, c))
            .map(Some)
            .map_err(|e| HostError::Snapshot(format!("cannot serialize the awaited calls: {e}")))
    })
}

/// Started calls read back from bytes (a paused script's, or a paused session feed's), each
/// checked as a live call is: ids within its arena, the style's shape, plain values only.
/// `what` names them in the error (`"snapshot's awaited calls"`).
pub(crate) fn pending_table(
    style: ToolStyle,
    records: Vec<PendingRecord>,
    what: &str,
) -> Result<BTreeMap<u32, PendingTool>, HostError> {
    let bad = |why: &str| HostError::Snapshot(format!("{what} {why}"));
    let mut table = BTreeMap::new();
    for (call_id, name, positional, keyword, args) in records {
        let graph = unstable::call_args_parts(&args).0;
        let in_range = |id: &NodeId| (id.0 as usize) < graph.len();
        if !positional.iter().all(in_range)
            || !keyword.iter().all(|(_, v)| in_range(v))
            || (style == ToolStyle::CallTool && !positional.is_empty())
        {
            return Err(bad("are malformed"));
        }
        let req = ToolRequest {
            name: ToolName::Named(name),
            positional,
            keyword: Keywords::Listed(keyword),
            call_id,
        };
        check_request(graph, &req).map_err(|_| bad("hold a value that cannot cross"))?;
        table.insert(call_id, PendingTool { args, req });
    }
    Ok(table)
}

fn tasks_from_bytes(style: ToolStyle, bytes: &[u8]) -> Result<(Tasks, RunCounts), HostError> {
    let bad = |why: String| HostError::Snapshot(format!("snapshot's awaited calls {why}"));
    let decode_error = |e: postcard::Error| bad(format!("cannot be decoded: {e}"));
    let format = bytes.first().copied().unwrap_or(0);
    let (script, offsets, pending, counts) = match format {
        TASKS_FORMAT_1 => {
            let (_, script, offsets, pending): TasksRecord =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            (script, offsets, pending, RunCounts::default())
        }
        TASKS_FORMAT_2 => {
            let (_, script, offsets, pending, (used, truncated, os_calls)): TasksRecord2 =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            let printed = Printed {
                used: usize::try_from(used).map_err(|_| bad("are malformed".into()))?,
                truncated,
            };
            let counts = RunCounts {
                printed,
                os_calls,
                clock_reads: 0,
            };
            (script, offsets, pending, counts)
        }
        TASKS_FORMAT => {
            let (_, script, offsets, pending, (used, truncated, os_calls, clock_reads)): TasksRecord3 =
                postcard::from_bytes(bytes).map_err(decode_error)?;
            let printed = Printed {
                used: usize::try_from(used).map_err(|_| bad("are malformed".into()))?,
                truncated,
            };
            let counts = RunCounts {
                printed,
                os_calls,
                clock_reads,
            };
            (script, offsets, pending, counts)
        }
        other => {
            return Err(bad(format!(
                "have format {other}, this build reads {TASKS_FORMAT_1} to {TASKS_FORMAT}"
            )));
        }
    };
    let table = pending_table(style, pending, "snapshot's awaited calls")?;
    Ok((
        Tasks {
            deferred: Deferred { script, offsets },
            pending: Mutex::new(table),
        },
        counts,
    ))
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

    #[test]
    fn the_run_counters_read_back_from_formats_2_and_3() {
        let none: Vec<PendingRecord> = Vec::new();
        let v2 = postcard::to_allocvec(&(
            TASKS_FORMAT_2,
            "main.py",
            vec![1u32],
            &none,
            (5u64, true, 7u64),
        ))
        .unwrap();
        let (_, counts) = tasks_from_bytes(ToolStyle::CallTool, &v2).unwrap();
        let printed = Printed {
            used: 5,
            truncated: true,
        };
        let want = RunCounts {
            printed,
            os_calls: 7,
            clock_reads: 0,
        };
        assert_eq!(counts, want);
        let v3 = postcard::to_allocvec(&(
            TASKS_FORMAT,
            "main.py",
            vec![1u32],
            &none,
            (5u64, true, 7u64, 9u64),
        ))
        .unwrap();
        let (_, counts) = tasks_from_bytes(ToolStyle::CallTool, &v3).unwrap();
        assert_eq!(
            counts,
            RunCounts {
                clock_reads: 9,
                ..want
            }
        );
        assert!(tasks_from_bytes(ToolStyle::CallTool, &[4]).is_err());
    }

    #[test]
    fn the_builtin_table_is_sorted_for_binary_search() {
        assert!(PYTHON_BUILTINS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn only_tool_like_names_get_the_tool_hint() {
        for name in ["object", "dir", "final_answer", "print"] {
            assert!(matches!(
                name_answer(ToolStyle::CallTool, name, true),
                NameLookupResult::Undefined
            ));
        }
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "search_web", true),
            NameLookupResult::Error(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "call_tool", true),
            NameLookupResult::Value(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::Functions, "search_web", true),
            NameLookupResult::Value(_)
        ));
        assert!(matches!(
            name_answer(ToolStyle::CallTool, "call_tool", false),
            NameLookupResult::Undefined
        ));
        assert!(matches!(
            name_answer(ToolStyle::Functions, "dir", true),
            NameLookupResult::Undefined
        ));
    }
}
