//! One `drive` for both kinds of interpreter: a one-shot run (`MontyRun`) and a namespace
//! session feed (`MontyRepl`).
//!
//! Monty gives the two kinds their own pause types with the same methods. [`Interp`] names
//! one kind's types, [`Driver`] is what the run or the feed keeps across the advance (its
//! awaited calls, its counters, its source), and [`drive`] answers every pause the host
//! serves itself until the script stops at a tool call, a gather, completion or an
//! uncaught exception.

use crate::engine::interp::{
    CallArgs, ExcType, ExtFunctionResult, MontyException, MontyObject, NameLookupResult,
    OsFunctionCall, PrintWriter, ResourceTracker, SourceRange,
};
use crate::engine::interp::{
    FunctionCall, MontyRepl, NameLookup, OsCall, ReplFunctionCall, ReplNameLookup, ReplOsCall,
    ReplProgress, ReplResolveFutures, ReplStartError, ResolveFutures, RunProgress,
};

use std::mem::MaybeUninit;

use super::{EngineConfig, NO_ASYNC, PendingTool, ToolRequest, classify_parts, name_answer};
use crate::convert::check_plain;
use crate::engine::interp::MountTable;
use crate::errors::HostError;
use crate::journal::Journal;
use crate::output::CappedOutput;

/// One kind of interpreter: its progress and pause types.
pub(crate) trait Interp: Sized {
    /// Where an advance paused (`RunProgress`, `ReplProgress`).
    type Progress;
    /// What ends an advance with an uncaught exception.
    type Failure;
    type Call: ToolPause<Self>;
    type Os: OsPause<Self>;
    type Lookup: LookupPause<Self>;
    type Futures: FuturesPause<Self>;
    /// What comes back besides the value when the script ends: nothing for a run, the idle
    /// session for a feed.
    type Rest;
    /// The allocation a paused tool call of the previous pause was boxed in, emptied by its
    /// resume, for the next pause to reuse: a run's paused call is about 1.8 KB, past the
    /// system allocator's small-block caches, and its allocation and release cost more than
    /// the rest of the binding's share of a round trip (issue 21). Nothing for a feed.
    type Spare: Default;

    /// The resource tracker at a pause (None once the script completed).
    fn tracker(progress: &Self::Progress) -> Option<&ResourceTracker>;
    /// The OS call a pause is at, if it is at one.
    fn os_call(progress: &Self::Progress) -> Option<&OsFunctionCall>;
    /// The pause `progress` is at. A tool call is moved into `spare` when the kind boxes its
    /// calls and a box is left over from the previous pause.
    fn split(progress: Self::Progress, spare: &mut Self::Spare) -> Pause<Self>;
    fn failed(failure: Self::Failure) -> (Self::Rest, MontyException);
}

/// What a resume gives back.
pub(crate) type Progress<I> = Result<<I as Interp>::Progress, <I as Interp>::Failure>;

/// One pause, by kind.
pub(crate) enum Pause<I: Interp> {
    Call(I::Call),
    Os(I::Os),
    Lookup(I::Lookup),
    Futures(I::Futures),
    Complete(I::Rest, MontyObject),
}

/// A script paused at a host function call.
pub(crate) trait ToolPause<I: Interp> {
    fn request(&self, cfg: &EngineConfig) -> Result<ToolRequest, MontyException>;
    fn eager(&self) -> bool;
    fn position(&self) -> &SourceRange;
    fn take_args(&mut self) -> CallArgs;
    fn resume(self, result: ExtFunctionResult, out: &mut CappedOutput) -> Progress<I>;
    fn resume_pending(self, out: &mut CappedOutput) -> Progress<I>;
    fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<I>;
}

/// A script paused at an OS call.
pub(crate) trait OsPause<I: Interp> {
    fn function_call(&self) -> &OsFunctionCall;
    fn resume(self, result: ExtFunctionResult, out: &mut CappedOutput) -> Progress<I>;
    fn resume_with(
        self,
        out: &mut CappedOutput,
        handler: impl FnOnce(OsFunctionCall) -> ExtFunctionResult,
    ) -> Progress<I>;
    fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<I>;
}

/// A script paused at a name it does not define.
pub(crate) trait LookupPause<I: Interp> {
    fn name(&self) -> &str;
    fn position(&self) -> &SourceRange;
    fn resume(self, answer: NameLookupResult, out: &mut CappedOutput) -> Progress<I>;
    fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<I>;
}

/// A script whose every task waits on started calls.
pub(crate) trait FuturesPause<I: Interp> {
    fn pending_call_ids(&self) -> &[u32];
    fn resume(self, answers: Vec<(u32, ExtFunctionResult)>, out: &mut CappedOutput) -> Progress<I>;
}

/// The one-shot run.
pub(crate) enum Run {}
/// A namespace session's feed.
pub(crate) enum Repl {}

/// The pause traits for one kind: Monty gives both kinds' pause types the same methods.
macro_rules! pauses {
    ($interp:ty, $call:ty, $os:ty, $lookup:ty, $futures:ty) => {
        impl ToolPause<$interp> for $call {
            fn request(&self, cfg: &EngineConfig) -> Result<ToolRequest, MontyException> {
                classify_parts(
                    cfg.tool_style,
                    &self.function_name,
                    &self.args,
                    self.call_id,
                    self.object_id.is_none(),
                )
            }
            fn eager(&self) -> bool {
                self.allow_eager_await
            }
            fn position(&self) -> &SourceRange {
                &self.position
            }
            fn take_args(&mut self) -> CallArgs {
                std::mem::take(&mut self.args)
            }
            fn resume(
                self,
                result: ExtFunctionResult,
                out: &mut CappedOutput,
            ) -> Progress<$interp> {
                <$call>::resume(self, result, PrintWriter::Callback(out))
            }
            fn resume_pending(self, out: &mut CappedOutput) -> Progress<$interp> {
                <$call>::resume_pending(self, PrintWriter::Callback(out))
            }
            fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<$interp> {
                <$call>::abort(self, exc, PrintWriter::Callback(out))
            }
        }
        impl OsPause<$interp> for $os {
            fn function_call(&self) -> &OsFunctionCall {
                &self.function_call
            }
            fn resume(
                self,
                result: ExtFunctionResult,
                out: &mut CappedOutput,
            ) -> Progress<$interp> {
                <$os>::resume(self, result, PrintWriter::Callback(out))
            }
            fn resume_with(
                self,
                out: &mut CappedOutput,
                handler: impl FnOnce(OsFunctionCall) -> ExtFunctionResult,
            ) -> Progress<$interp> {
                <$os>::resume_with(self, PrintWriter::Callback(out), handler)
            }
            fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<$interp> {
                <$os>::abort(self, exc, PrintWriter::Callback(out))
            }
        }
        impl LookupPause<$interp> for $lookup {
            fn name(&self) -> &str {
                &self.name
            }
            fn position(&self) -> &SourceRange {
                &self.position
            }
            fn resume(self, answer: NameLookupResult, out: &mut CappedOutput) -> Progress<$interp> {
                <$lookup>::resume(self, answer, PrintWriter::Callback(out))
            }
            fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<$interp> {
                <$lookup>::abort(self, exc, PrintWriter::Callback(out))
            }
        }
        impl FuturesPause<$interp> for $futures {
            fn pending_call_ids(&self) -> &[u32] {
                <$futures>::pending_call_ids(self)
            }
            fn resume(
                self,
                answers: Vec<(u32, ExtFunctionResult)>,
                out: &mut CappedOutput,
            ) -> Progress<$interp> {
                <$futures>::resume(self, answers, PrintWriter::Callback(out))
            }
        }
    };
}

pauses!(Run, FunctionCall, OsCall, NameLookup, ResolveFutures);

/// A boxed tool pause: a run's `FunctionCall` carries Monty's whole paused state (a few KB),
/// so it is boxed once where Monty hands it over and moved as a pointer from there on
/// (issue 21: the moves of the unboxed call were about 7 % of a round trip's instructions).
impl<I: Interp, T: ToolPause<I>> ToolPause<I> for Box<T> {
    fn request(&self, cfg: &EngineConfig) -> Result<ToolRequest, MontyException> {
        T::request(self, cfg)
    }
    fn eager(&self) -> bool {
        T::eager(self)
    }
    fn position(&self) -> &SourceRange {
        T::position(self)
    }
    fn take_args(&mut self) -> CallArgs {
        T::take_args(self)
    }
    fn resume(self, result: ExtFunctionResult, out: &mut CappedOutput) -> Progress<I> {
        T::resume(*self, result, out)
    }
    fn resume_pending(self, out: &mut CappedOutput) -> Progress<I> {
        T::resume_pending(*self, out)
    }
    fn abort(self, exc: MontyException, out: &mut CappedOutput) -> Progress<I> {
        T::abort(*self, exc, out)
    }
}
pauses!(
    Repl,
    ReplFunctionCall,
    ReplOsCall,
    ReplNameLookup,
    ReplResolveFutures
);

impl Interp for Run {
    type Progress = RunProgress;
    type Failure = MontyException;
    type Call = Box<FunctionCall>;
    type Os = OsCall;
    type Lookup = NameLookup;
    type Futures = ResolveFutures;
    type Rest = ();
    type Spare = Option<Box<MaybeUninit<FunctionCall>>>;

    fn tracker(progress: &RunProgress) -> Option<&ResourceTracker> {
        match progress {
            RunProgress::FunctionCall(c) => Some(c.tracker()),
            RunProgress::OsCall(c) => Some(c.tracker()),
            RunProgress::NameLookup(l) => Some(l.tracker()),
            RunProgress::ResolveFutures(f) => Some(f.tracker()),
            RunProgress::Complete(_) => None,
        }
    }

    fn os_call(progress: &RunProgress) -> Option<&OsFunctionCall> {
        match progress {
            RunProgress::OsCall(c) => Some(&c.function_call),
            _ => None,
        }
    }

    #[inline(always)] // into `drive`: the paused call then moves once, from where it lies into its box
    fn split(progress: RunProgress, spare: &mut Self::Spare) -> Pause<Self> {
        match progress {
            RunProgress::FunctionCall(c) => Pause::Call(match spare.take() {
                Some(room) => Box::write(room, c),
                None => Box::new(c),
            }),
            RunProgress::OsCall(c) => Pause::Os(c),
            RunProgress::NameLookup(l) => Pause::Lookup(l),
            RunProgress::ResolveFutures(f) => Pause::Futures(f),
            RunProgress::Complete(value) => Pause::Complete((), value),
        }
    }

    fn failed(failure: MontyException) -> ((), MontyException) {
        ((), failure)
    }
}

impl Interp for Repl {
    type Progress = ReplProgress;
    type Failure = Box<ReplStartError>;
    type Call = Box<ReplFunctionCall>;
    type Os = ReplOsCall;
    type Lookup = ReplNameLookup;
    type Futures = ReplResolveFutures;
    type Rest = Box<MontyRepl>;
    type Spare = ();

    fn tracker(progress: &ReplProgress) -> Option<&ResourceTracker> {
        match progress {
            ReplProgress::Complete { .. } => None,
            p => Some(p.tracker()),
        }
    }

    fn os_call(progress: &ReplProgress) -> Option<&OsFunctionCall> {
        match progress {
            ReplProgress::OsCall(c) => Some(&c.function_call),
            _ => None,
        }
    }

    fn split(progress: ReplProgress, _spare: &mut ()) -> Pause<Self> {
        match progress {
            ReplProgress::FunctionCall(c) => Pause::Call(Box::new(c)),
            ReplProgress::OsCall(c) => Pause::Os(c),
            ReplProgress::NameLookup(l) => Pause::Lookup(l),
            ReplProgress::ResolveFutures(f) => Pause::Futures(f),
            ReplProgress::Complete { repl, value } => Pause::Complete(Box::new(repl), value),
        }
    }

    fn failed(failure: Box<ReplStartError>) -> (Box<MontyRepl>, MontyException) {
        let ReplStartError { repl, error } = *failure;
        (Box::new(repl), error)
    }
}

/// What a run or a feed keeps across an advance, as `drive` needs it.
pub(crate) trait Driver {
    /// The script's source and the name Monty runs it under, when known (a run restored
    /// from bytes does not know it).
    fn source(&self) -> Option<(&str, &str)>;
    /// Whether the call expression at `at` is one the script awaits.
    fn defers(&self, at: &SourceRange) -> bool;
    /// Records a call the script started without waiting for it.
    fn start_call(&mut self, call: PendingTool);
    /// Whether every id is a call the script started.
    fn started(&self, ids: &[u32]) -> bool;
    /// Counts one more OS call; the run's count so far.
    fn count_os_call(&mut self) -> u64;
    /// The clock reads made so far, for `f` to advance.
    fn clock_reads<R>(&mut self, f: impl FnOnce(&mut u64) -> R) -> R;
    /// The text fed back for an uncaught exception.
    fn raised(&self, exc: MontyException) -> String;
}

/// Where a drive ended.
pub(crate) enum Driven<I: Interp> {
    /// At a tool call, already checked.
    Call(I::Call, ToolRequest),
    /// Every task waits on these started calls (sorted call ids). Boxed, as a tool call
    /// is: a drive's result moves a few times on its way out (`?`, the stop), and the
    /// paused state is about 1.7 KB.
    Gather(Box<I::Futures>, Vec<u32>),
    /// The script ended: its value, or the text of its uncaught exception.
    Done(I::Rest, Result<MontyObject, String>),
}

/// Whether the name at `at` is called (`name(`), read from the script's source; true when
/// the source is unknown (a run restored from bytes, code run by `eval`/`exec`, a function
/// an earlier feed defined).
pub(crate) fn is_called(source: Option<(&str, &str)>, at: &SourceRange) -> bool {
    if crate::traceback::unknown_position(&at.filename) {
        return false; // an augmented assignment's target (`counter += 1`)
    }
    let Some((script, name)) = source else {
        return true;
    };
    if at.filename != name && !name.ends_with(&format!("/{}", at.filename)) {
        return true;
    }
    script
        .get(at.end as usize..)
        .is_none_or(|rest| rest.trim_start().starts_with('('))
}

/// The uncatchable error that ends a run at its OS call number `made` when that is past
/// `limit` (`max_os_calls`); None within it.
pub(crate) fn os_calls_over(made: u64, limit: Option<u64>) -> Option<MontyException> {
    let limit = limit?;
    (made > limit).then(|| {
        MontyException::new(
            ExcType::RuntimeError,
            Some(format!(
                "OS call limit exceeded: the script made more than max_os_calls={limit} file, \
                 clock, environment and sleep calls in this run; read fewer files or ask a \
                 tool for the data"
            )),
        )
    })
}

/// Runs from `progress` until a tool call, a gather, completion or an uncaught exception.
/// Every other pause is answered here: OS calls (within `max_os_calls` and the advance's
/// time budget), name lookups, awaited calls (started as futures in the driver's table).
/// A tool call it stops at is boxed in `spare` when there is one (see [`Interp::Spare`]).
pub(crate) fn drive<I: Interp>(
    cfg: &EngineConfig,
    progress: Progress<I>,
    out: &mut CappedOutput,
    journal: &mut Journal,
    state: &mut impl Driver,
    spare: I::Spare,
) -> Result<Driven<I>, HostError> {
    let mut table = None;
    let driven = drive_with(cfg, progress, out, journal, state, spare, &mut table);
    // The session's file layer, as the overlays left it (crate::files): handed back to the
    // host in the advance's log.
    if let Some(table) = &table
        && journal.files.is_some()
    {
        journal.files = Some(crate::files::export(table));
        journal.files_touched = true;
    }
    driven
}

/// [`drive`], with the advance's mount table (built at its first filesystem call) in `table`.
fn drive_with<I: Interp>(
    cfg: &EngineConfig,
    mut progress: Progress<I>,
    out: &mut CappedOutput,
    journal: &mut Journal,
    state: &mut impl Driver,
    mut spare: I::Spare,
    table: &mut Option<MountTable>,
) -> Result<Driven<I>, HostError> {
    loop {
        // The host has the turn (a pause to answer, or the advance's stop): what the script
        // printed so far goes to the live listener, before a sleep or the step.
        out.release();
        // The advance's time budget, charged at each pause the advance answers itself
        // (`os_policy::AdvanceClock`; a tool call returned to the host ends the advance).
        let over_budget = match &progress {
            Ok(p) => I::tracker(p).and_then(|tracker| match I::os_call(p) {
                Some(call) => journal.clock.charge(call, tracker),
                None => journal.clock.charge_turn(tracker),
            }),
            Err(_) => None,
        };
        // Split where it lies: the paused state is moved once, into its box.
        let pause = match progress {
            Ok(p) => I::split(p, &mut spare),
            Err(failure) => {
                let (rest, exc) = I::failed(failure);
                return Ok(Driven::Done(rest, Err(state.raised(exc))));
            }
        };
        progress = match pause {
            Pause::Complete(rest, value) => {
                let result = match check_plain(&value, "the result") {
                    Ok(()) => Ok(value),
                    Err(e) => Err(format!(
                        "TypeError: the script's last expression must be plain data: {}",
                        e.describe()
                    )),
                };
                return Ok(Driven::Done(rest, result));
            }
            Pause::Call(mut call) => match call.request(cfg) {
                Ok(req) if !call.eager() && state.defers(call.position()) => {
                    // An awaited call that competes with other work: start it as a future and
                    // run on; the host runs it when every task waits (`ResolveFutures`).
                    match over_budget {
                        Some(exc) => call.abort(exc, out),
                        None => {
                            let args = call.take_args();
                            state.start_call(PendingTool { args, req });
                            call.resume_pending(out)
                        }
                    }
                }
                Ok(req) => return Ok(Driven::Call(call, req)),
                Err(exc) => match over_budget {
                    Some(timeout) => call.abort(timeout, out),
                    None => call.resume(ExtFunctionResult::Error(exc), out),
                },
            },
            Pause::Os(call) => {
                let made = state.count_os_call();
                if let Some(exc) = os_calls_over(made, cfg.limits.max_os_calls) {
                    progress = call.abort(exc, out);
                    continue;
                }
                if let Some(exc) = over_budget {
                    progress = call.abort(exc, out);
                    continue;
                }
                if call.function_call().fs_primary_path().is_some()
                    && table.is_none()
                    && !cfg.os.mounts.is_empty()
                {
                    *table = Some(cfg.os.mount_table(journal.files.as_ref())?);
                }
                let answered = state.clock_reads(|reads| {
                    cfg.os
                        .nondeterministic(call.function_call(), journal, reads)
                })?;
                match answered {
                    Some(answer) => call.resume(answer, out),
                    None => {
                        let os = &cfg.os;
                        let t = table.as_mut();
                        call.resume_with(out, |c| os.service(c, t))
                    }
                }
            }
            Pause::Lookup(lookup) => {
                if let Some(exc) = over_budget {
                    progress = lookup.abort(exc, out);
                    continue;
                }
                let called = is_called(state.source(), lookup.position());
                let answer = name_answer(cfg.tool_style, lookup.name(), called);
                lookup.resume(answer, out)
            }
            Pause::Futures(futures) => {
                let mut ids = futures.pending_call_ids().to_vec();
                ids.sort_unstable();
                if state.started(&ids) {
                    return Ok(Driven::Gather(Box::new(futures), ids));
                }
                // A future the host did not start (never expected): fail it in the script.
                let answers = ids
                    .into_iter()
                    .filter(|id| !state.started(std::slice::from_ref(id)))
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
                futures.resume(answers, out)
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        Advance, EngineConfig, Held, Limits, Outcome, Stop, ToolStyle, resume, resume_gather, start,
    };
    use super::*;
    use crate::os_policy::OsPolicy;

    fn config(style: ToolStyle, max_os_calls: Option<u64>) -> EngineConfig {
        EngineConfig {
            limits: Limits {
                max_duration: None,
                max_memory: None,
                max_recursion_depth: 200,
                max_os_calls,
            },
            os: OsPolicy::new(Vec::new(), Vec::new(), false, "UTC", None).unwrap(),
            tool_style: style,
            max_stdout: 1 << 20,
            snapshot_key: None,
        }
    }

    fn run(cfg: &EngineConfig, script: &str, deferred: Vec<u32>) -> Advance {
        start(
            cfg,
            script.to_owned(),
            "main.py",
            Journal::new(Vec::new()),
            deferred,
            None,
        )
        .unwrap()
    }

    fn raised(advance: Advance) -> String {
        match advance.stop {
            Stop::Raised(message) => message,
            _ => panic!("expected the script to raise"),
        }
    }

    fn range(filename: &str, start: u32, end: u32) -> SourceRange {
        SourceRange {
            filename: filename.into(),
            start,
            end,
        }
    }

    #[test]
    fn a_name_is_called_only_when_a_parenthesis_follows_it() {
        let source = Some(("x = tool (1)\ny = tool\n", "main.py"));
        assert!(is_called(source, &range("main.py", 4, 8)));
        assert!(!is_called(source, &range("main.py", 17, 21)));
        // Another file (a function an earlier feed defined, `eval`): assumed called.
        assert!(is_called(source, &range("<python-input-0>", 17, 21)));
        // A script named by a path matches its file name.
        assert!(!is_called(
            Some(("y = tool\n", "dir/main.py")),
            &range("main.py", 4, 8)
        ));
        // A restored run does not know its source.
        assert!(is_called(None, &range("main.py", 0, 1)));
    }

    #[test]
    fn drive_stops_at_a_tool_call_and_runs_on_to_completion() {
        let cfg = config(ToolStyle::CallTool, None);
        let advance = run(
            &cfg,
            "print('hi')\nx = call_tool('t', {'a': 1})\nx + 1",
            Vec::new(),
        );
        assert_eq!(advance.stdout, "hi\n");
        let Stop::Call(Held::RunCall(paused), req) = advance.stop else {
            panic!("expected a tool call");
        };
        let arena = paused.arena();
        assert_eq!(req.name(arena), "t");
        let keyword = req.keyword_list(arena);
        assert_eq!(keyword.len(), 1);
        assert_eq!(keyword[0].0, "a");
        assert_eq!(arena.value(keyword[0].1).py_repr(), "1");
        let done = resume(
            &cfg,
            paused,
            Outcome::Value(MontyObject::int(41)),
            Journal::new(Vec::new()),
        )
        .unwrap();
        assert!(matches!(done.stop, Stop::Complete(ref v) if v.py_repr() == "42"));
    }

    #[test]
    fn drive_refuses_call_forms_the_style_does_not_serve_in_the_script() {
        let cfg = config(ToolStyle::CallTool, None);
        let message = raised(run(&cfg, "call_tool(1, {})", Vec::new()));
        assert!(message.contains("TypeError"), "{message}");
        let message = raised(run(&cfg, "search_web('x')", Vec::new()));
        assert!(message.contains("NameError"), "{message}");
        let cfg = config(ToolStyle::Functions, None);
        let Stop::Call(Held::RunCall(paused), req) =
            run(&cfg, "search_web('x', n=2)", Vec::new()).stop
        else {
            panic!("the functions style serves any undefined called name");
        };
        let arena = paused.arena();
        assert_eq!(
            (
                req.name(arena),
                req.positional.len(),
                req.keyword_list(arena).len()
            ),
            ("search_web", 1, 1)
        );
    }

    #[test]
    fn drive_answers_name_lookups_and_bounds_os_calls() {
        let cfg = config(ToolStyle::CallTool, Some(3));
        let message = raised(run(&cfg, "call_tool", Vec::new()));
        assert!(message.contains("NameError"), "{message}");
        let message = raised(run(
            &cfg,
            "import os\nfor _ in range(10):\n    os.getenv('X')",
            Vec::new(),
        ));
        assert!(message.contains("max_os_calls"), "{message}");
    }

    #[test]
    fn drive_starts_awaited_calls_as_futures_and_stops_at_the_gather() {
        let cfg = config(ToolStyle::CallTool, None);
        let script = "import asyncio\nasync def main():\n    return await asyncio.gather(call_tool('a', {}), call_tool('b', {}))\nasyncio.run(main())";
        let offsets = ["call_tool('a'", "call_tool('b'"]
            .iter()
            .map(|s| u32::try_from(script.find(s).unwrap()).unwrap())
            .collect();
        let Stop::Gather(Held::RunGather(paused), ids) = run(&cfg, script, offsets).stop else {
            panic!("expected a gather");
        };
        assert_eq!(ids.len(), 2);
        let outcomes = ids
            .iter()
            .map(|id| (*id, Outcome::Value(MontyObject::int(i64::from(*id)))))
            .collect();
        let done = resume_gather(&cfg, *paused, outcomes, Journal::new(Vec::new())).unwrap();
        let Stop::Complete(value) = done.stop else {
            panic!("expected completion");
        };
        let want: Vec<String> = ids.iter().map(ToString::to_string).collect();
        assert_eq!(value.py_repr(), format!("[{}]", want.join(", ")));
    }

    #[test]
    fn an_unplain_result_is_raised_as_a_type_error() {
        let cfg = config(ToolStyle::CallTool, None);
        let message = raised(run(&cfg, "def f():\n    pass\nf", Vec::new()));
        assert!(
            message.starts_with("TypeError: the script's last expression must be plain data"),
            "{message}"
        );
    }
}
