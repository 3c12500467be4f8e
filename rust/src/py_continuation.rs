//! The one paused-script type: [`MontyContinuation`], a script run or a namespace session's
//! feed paused at one tool call or at a gather, held live behind one single-use latch; and
//! [`MontyCall`], one call it awaits. [`build_step`] turns any advance into the seam's step.
//!
//! Step objects are the pure-Python seam types of `codeact.runtime` (`Call`, `Gather`,
//! `Complete`, `Raised`), registered once: a `Call` step's `call` is the continuation itself
//! (its `name`, `positional_args`, `keyword_args`, `call_id` are the call's), a `Gather`
//! step holds the continuation and its `calls`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::engine::interp::unstable;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::convert::monty_to_py;
use crate::engine::session::{self, DUMP_STACK, Inner};
use crate::engine::{self, Advance, EngineConfig, Held, Outcome, PendingTool, Stop};
use crate::errors::{CodeRuntimeError, HostError};
use crate::journal::Journal;
use crate::live::LiveOutput;
use crate::py_api::{
    call_args_to_py, journal_from_py, name_to_py, os_log_to_py, outcome_from_py, seam,
};
use crate::py_repl::MontySession;
use crate::stack::{run_interpreter, stack_needed, submit_interpreter};
use crate::worker::Slot;

static GATHER: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Registers the seam class `Gather(calls, stdout, os_log, continuation, stderr)`.
#[pyfunction]
pub fn register_gather_type(py: Python<'_>, gather: Py<PyType>) -> PyResult<()> {
    let _ = GATHER.set(py, gather);
    Ok(())
}

/// What a continuation runs under: a run's configuration, or the namespace session whose
/// feed it pauses.
#[derive(Clone)]
pub(crate) enum Owner {
    Run(Arc<EngineConfig>),
    Session(Arc<Inner>),
}

impl Owner {
    fn cfg(&self) -> &EngineConfig {
        match self {
            Owner::Run(cfg) => cfg,
            Owner::Session(inner) => &inner.cfg,
        }
    }
}

const CALL_RESUMED: &str = "this PendingCall was already resumed; a PendingCall is single use";
const GATHER_RESUMED: &str = "this Gather was already resumed; a Gather is single use";
const NOT_ALONE: &str = "a call of a Gather is not resumed by itself: resume the Gather step \
     with {call_id: outcome} for the calls that finished";

/// One awaited call as Python sees it: `(name, positional_args, keyword_args, call_id)`.
pub(crate) type CallInfo = (Py<PyString>, Py<PyTuple>, Py<PyDict>, u32);

/// The calls `ids` of a pending-call table, in the order of `ids`.
fn calls_in(
    py: Python<'_>,
    table: &BTreeMap<u32, PendingTool>,
    ids: &[u32],
) -> PyResult<Vec<CallInfo>> {
    ids.iter()
        .map(|id| {
            let p = table.get(id).ok_or_else(|| {
                HostError::Internal(format!("the gather awaits an unknown call {id}"))
            })?;
            let arena = unstable::call_args_parts(&p.args).0;
            let (positional, keyword) = call_args_to_py(py, arena, &p.req)?;
            Ok((
                name_to_py(py, p.req.name(arena)).unbind(),
                positional.unbind(),
                keyword.unbind(),
                *id,
            ))
        })
        .collect()
}

/// The calls a held continuation awaits, in call order.
pub(crate) fn held_calls(py: Python<'_>, held: &Held, ids: &[u32]) -> PyResult<Vec<CallInfo>> {
    match held {
        Held::RunGather(paused) => paused.ctx().with_pending(|t| calls_in(py, t, ids)),
        Held::SessionGather(_, feed) => calls_in(py, &feed.pending, ids),
        Held::RunCall(_) | Held::SessionCall(..) => {
            Err(HostError::Internal("a paused call read as a gather".into()).into())
        }
    }
}

/// How a continuation is settled.
enum Settle {
    /// The one call's outcome.
    One(Outcome),
    /// Some (or all) of a gather's calls' outcomes.
    Some(Vec<(u32, Outcome)>),
}

/// `{call_id: outcome}` checked against the calls the gather awaits.
fn outcomes_from_py(
    py: Python<'_>,
    outcomes: &Bound<'_, PyAny>,
    ids: &[u32],
) -> PyResult<Vec<(u32, Outcome)>> {
    let dict = outcomes.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "a Gather resumes with a dict {{call_id: ResumeValue | ResumeError}}, got {}",
            outcomes
                .get_type()
                .name()
                .map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })?;
    if dict.is_empty() {
        return Err(PyValueError::new_err(
            "settle at least one call of the Gather: {call_id: outcome}",
        ));
    }
    let mut out = Vec::with_capacity(dict.len());
    for (k, v) in dict.iter() {
        if !k.is_instance_of::<pyo3::types::PyInt>() {
            return Err(PyTypeError::new_err(
                "Gather outcomes are keyed by the calls' call_id (int)",
            ));
        }
        // An int out of u32's range is no call this Gather awaits either.
        let id: u32 = k.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "call_id {k} is not a call this Gather awaits (it awaits {ids:?})"
            ))
        })?;
        if !ids.contains(&id) {
            return Err(PyValueError::new_err(format!(
                "call_id {id} is not a call this Gather awaits (it awaits {ids:?})"
            )));
        }
        out.push((id, outcome_from_py(py, &v)?));
    }
    Ok(out)
}

/// Runs a held continuation on: resumes it with `settle` and drives it to its next stop.
fn advance(
    owner: &Owner,
    held: Held,
    settle: Settle,
    journal: Journal,
) -> Result<Advance, HostError> {
    let one = |settle: Settle| match settle {
        Settle::One(outcome) => Ok(outcome),
        Settle::Some(mut outcomes) if outcomes.len() == 1 => Ok(outcomes.remove(0).1),
        Settle::Some(_) => Err(HostError::Internal(
            "a paused call settled with several outcomes".into(),
        )),
    };
    let some = |settle: Settle| match settle {
        Settle::Some(outcomes) => Ok(outcomes),
        Settle::One(_) => Err(HostError::Internal(
            "a gather settled with one bare outcome".into(),
        )),
    };
    match (owner, held) {
        (Owner::Run(cfg), Held::RunCall(paused)) => {
            engine::resume(cfg, paused, one(settle)?, journal)
        }
        (Owner::Run(cfg), Held::RunGather(paused)) => {
            engine::resume_gather(cfg, *paused, some(settle)?, journal)
        }
        (Owner::Session(inner), Held::SessionCall(call, feed)) => {
            session::resume(inner, *call, feed, one(settle)?, journal)
        }
        (Owner::Session(inner), Held::SessionGather(futures, feed)) => {
            session::resume_gather(inner, *futures, feed, some(settle)?, journal)
        }
        _ => Err(HostError::Internal(
            "a continuation held under the wrong owner".into(),
        )),
    }
}

/// Serializes a held continuation into sealed snapshot bytes; hands it back.
fn dump_held(owner: &Owner, held: Held) -> (Result<Vec<u8>, HostError>, Held) {
    let cfg = owner.cfg();
    match held {
        Held::RunCall(paused) => {
            let (bytes, paused) = engine::dump(cfg, paused);
            (bytes, Held::RunCall(paused))
        }
        Held::RunGather(paused) => {
            let (bytes, paused) = engine::dump_gather(cfg, *paused);
            (bytes, Held::RunGather(Box::new(paused)))
        }
        Held::SessionCall(call, feed) => {
            let (bytes, call) = session::dump_call(cfg, *call, &feed);
            (bytes, Held::SessionCall(Box::new(call), feed))
        }
        Held::SessionGather(futures, feed) => {
            let (bytes, futures) = session::dump_gather(cfg, *futures, &feed);
            (bytes, Held::SessionGather(Box::new(futures), feed))
        }
    }
}

/// A script (or a namespace session's feed) paused at one tool call or at a gather of
/// several, held live in memory. Single use: `resume` (or `resume_async`) it once; `dump`
/// may be called any number of times before.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyContinuation {
    owner: Owner,
    /// Whether it awaits a gather (settled with `{call_id: outcome}`).
    gather: bool,
    /// The ids of the calls it awaits, in call order.
    ids: CallIds,
    /// The first call: the whole of a paused call.
    name: Py<PyString>,
    positional: Py<PyTuple>,
    keyword: Py<PyDict>,
    /// A gather's calls, in call order (empty for a paused call: its one call is the above).
    /// Kept as parts: `MontyCall`s name the continuation, so holding them here would make a
    /// cycle the collector cannot see.
    gathered: Vec<CallInfo>,
    /// The byte range `(start, end)` of a paused call's expression in the script's own
    /// source, when known (see [`Held::call_range`]).
    range: Option<(u32, u32)>,
    /// The bytes it was restored from, if it was: its dump until it is resumed.
    origin: OnceLock<Vec<u8>>,
    /// The latch: the held continuation until it is resumed. Boxed inside: the paused
    /// interpreter state is large and moves several times per resume.
    held: Mutex<Option<Held>>,
    /// The run's live output listener, flushed when a later advance returns its step.
    live: Option<Arc<LiveOutput>>,
}

/// The ids of the calls a continuation awaits: a paused call's one id is kept inline (a
/// continuation is made at every tool call; the allocation of a one-element list was a
/// measurable part of a round trip, issue 21).
enum CallIds {
    One(u32),
    Many(Vec<u32>),
}

impl CallIds {
    fn get(&self) -> &[u32] {
        match self {
            Self::One(id) => std::slice::from_ref(id),
            Self::Many(ids) => ids,
        }
    }
}

impl MontyContinuation {
    /// Notes the bytes the continuation of `step` (a `Call` or `Gather`) was restored from:
    /// they are its dump until it is resumed.
    pub(crate) fn restored_from(py: Python<'_>, step: &Py<PyAny>, bytes: Vec<u8>) -> PyResult<()> {
        let step = step.bind(py);
        let continuation = match step.getattr(intern!(py, "call")) {
            Ok(call) => call,
            Err(_) => step.getattr(intern!(py, "continuation"))?,
        };
        let continuation = continuation.cast_into::<MontyContinuation>()?;
        let _ = continuation.get().origin.set(bytes);
        Ok(())
    }

    fn take(&self) -> PyResult<Held> {
        self.held
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("continuation lock poisoned"))?
            .take()
            .ok_or_else(|| {
                CodeRuntimeError::new_err(if self.gather {
                    GATHER_RESUMED
                } else {
                    CALL_RESUMED
                })
            })
    }

    fn settle(&self, py: Python<'_>, outcome: &Bound<'_, PyAny>) -> PyResult<Settle> {
        if self.gather || outcome.is_instance_of::<PyDict>() {
            return outcomes_from_py(py, outcome, self.ids.get()).map(Settle::Some);
        }
        outcome_from_py(py, outcome).map(Settle::One)
    }

    fn depth(&self) -> usize {
        self.owner.cfg().limits.max_recursion_depth
    }
}

#[pymethods]
impl MontyContinuation {
    /// The tool name the script called (a gather's: its first call's).
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
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

    /// The interpreter's call counter for this call (unique within one script run).
    #[getter]
    fn call_id(&self) -> u32 {
        self.ids.get()[0]
    }

    /// The ids of the calls it awaits, in call order.
    #[getter]
    fn call_ids(&self) -> Vec<u32> {
        self.ids.get().to_vec()
    }

    /// Where the paused call is in the script: `(start, end)`, the byte offsets (UTF-8,
    /// end exclusive) of its call expression in the source the interpreter was given for
    /// this run or feed (after the host's rewrites). None for a gather, when the position is
    /// not known, or when the call sits in code of another source (a function an earlier
    /// feed of a namespace session defined).
    #[getter]
    fn position(&self) -> Option<(u32, u32)> {
        self.range
    }

    /// Whether it awaits a gather of calls (resumed with `{call_id: outcome}`).
    #[getter]
    fn is_gather(&self) -> bool {
        self.gather
    }

    /// The calls it awaits, in call order, as `MontyCall`s.
    #[getter]
    fn calls(slf: &Bound<'_, Self>) -> PyResult<Py<PyTuple>> {
        let py = slf.py();
        let this = slf.get();
        let parts = if this.gathered.is_empty() {
            vec![(
                this.name.clone_ref(py),
                this.positional.clone_ref(py),
                this.keyword.clone_ref(py),
                this.ids.get()[0],
            )]
        } else {
            this.gathered
                .iter()
                .map(|(n, p, k, id)| (n.clone_ref(py), p.clone_ref(py), k.clone_ref(py), *id))
                .collect()
        };
        call_views(py, slf.clone().into_any().unbind(), parts)
    }

    /// The namespace session the paused feed belongs to (`MontySession`), None for a run.
    #[getter]
    fn session(&self) -> Option<MontySession> {
        match &self.owner {
            Owner::Run(_) => None,
            Owner::Session(inner) => Some(MontySession::of(inner)),
        }
    }

    /// Serializes the live continuation into sealed snapshot bytes (may be called
    /// repeatedly before `resume`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if let Some(origin) = self.origin.get() {
            let held = self
                .held
                .lock()
                .map_err(|_| CodeRuntimeError::new_err("continuation lock poisoned"))?;
            if held.is_some() {
                return Ok(PyBytes::new(py, origin));
            }
        }
        let held = self.take()?;
        let owner = self.owner.clone();
        let (bytes, held) = run_interpreter(py, DUMP_STACK, move || Ok(dump_held(&owner, held)))?;
        *self
            .held
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("continuation lock poisoned"))? = Some(held);
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Resumes the script in place and runs it to its next stop: a paused call with its
    /// `outcome` (`ResumeValue` or `ResumeError`), a gather with `{call_id: outcome}` for
    /// some or all of its calls.
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let settle = self.settle(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let held = self.take()?;
        let owner = self.owner.clone();
        let advance = run_interpreter(py, stack_needed(self.depth()), move || {
            advance(&owner, held, settle, journal)
        })?;
        build_step(py, &self.owner, advance, self.live.as_ref())
    }

    /// Like `resume`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume_async(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StepTicket> {
        let settle = self.settle(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let held = self.take()?;
        let owner = self.owner.clone();
        let slot = submit_interpreter(stack_needed(self.depth()), move || {
            advance(&owner, held, settle, journal)
        });
        Ok(StepTicket::new(&self.owner, slot, self.live.clone()))
    }

    /// `resume_async`, then waits up to `timeout` seconds with the GIL released: the step
    /// when the advance finished by then, else the `StepTicket` to wait on (one call for
    /// the usual short advance instead of `resume_async`, `wait` and `result`).
    ///
    /// Raises:
    ///     ValueError: `timeout` is negative or not finite.
    #[pyo3(signature = (outcome, timeout, os_replay=None))]
    fn resume_within(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        timeout: f64,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let timeout = wait_timeout(Some(timeout))?;
        let ticket = self.resume_async(py, outcome, os_replay)?;
        if ticket.wait_released(py, timeout) {
            return ticket.result(py);
        }
        Ok(Py::new(py, ticket)?.into_any())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        if self.gather {
            return Ok(format!("MontyContinuation(call_ids={:?})", self.ids.get()));
        }
        Ok(format!(
            "MontyContinuation(name={}, keyword_args={}, call_id={})",
            self.name.bind(py).repr()?,
            self.keyword.bind(py).repr()?,
            self.ids.get()[0]
        ))
    }
}

impl Drop for MontyContinuation {
    /// A session's feed dropped without a resume: the session goes back to the feed's start.
    fn drop(&mut self) {
        let Owner::Session(inner) = &self.owner else {
            return;
        };
        let held = self
            .held
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match held {
            Some(Held::SessionCall(call, feed)) => {
                session::drop_paused(inner, move || drop(call), feed)
            }
            Some(Held::SessionGather(futures, feed)) => {
                session::drop_paused(inner, move || drop(futures), feed);
            }
            _ => {}
        }
    }
}

/// `MontyCall`s over `calls`, each naming the continuation that settles it.
fn call_views(
    py: Python<'_>,
    continuation: Py<PyAny>,
    calls: Vec<CallInfo>,
) -> PyResult<Py<PyTuple>> {
    let mut items = Vec::with_capacity(calls.len());
    for (name, positional, keyword, call_id) in calls {
        items.push(Py::new(
            py,
            MontyCall {
                name,
                positional,
                keyword,
                call_id,
                continuation: continuation.clone_ref(py),
            },
        )?);
    }
    Ok(PyTuple::new(py, items)?.unbind())
}

/// One call a continuation awaits. Not resumed by itself: the continuation settles it.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyCall {
    name: Py<PyString>,
    positional: Py<PyTuple>,
    keyword: Py<PyDict>,
    call_id: u32,
    continuation: Py<PyAny>,
}

#[pymethods]
impl MontyCall {
    /// The tool name the script called.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
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

    /// The interpreter's call counter for this call: its key in `Gather.resume`.
    #[getter]
    fn call_id(&self) -> u32 {
        self.call_id
    }

    /// The whole continuation's snapshot bytes (the same as `Gather.dump()`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(self
            .continuation
            .bind(py)
            .call_method0("dump")?
            .cast_into::<PyBytes>()?)
    }

    /// Always raises `CodeRuntimeError`: resume the `Gather` instead.
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume(
        &self,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (outcome, os_replay);
        Err(CodeRuntimeError::new_err(NOT_ALONE))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "MontyCall(name={}, keyword_args={}, call_id={})",
            self.name.bind(py).repr()?,
            self.keyword.bind(py).repr()?,
            self.call_id
        ))
    }
}

/// The seam step for an advance of a run or of a session's feed. `live`: the run's live
/// output listener, flushed here first (all of it when the run ended, else what is due).
pub(crate) fn build_step(
    py: Python<'_>,
    owner: &Owner,
    advance: Advance,
    live: Option<&Arc<LiveOutput>>,
) -> PyResult<Py<PyAny>> {
    if let Some(live) = live {
        let ended = matches!(advance.stop, Stop::Complete(_) | Stop::Raised(_));
        live.flush(py, ended);
    }
    let types = seam(py)?;
    let text = |s: &str| {
        if s.is_empty() {
            intern!(py, "").clone()
        } else {
            PyString::new(py, s)
        }
        .into_any()
    };
    let stdout = text(&advance.stdout);
    let stderr = text(&advance.stderr);
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
        Stop::Call(held, req) => {
            let arena = match &held {
                Held::RunCall(paused) => paused.arena(),
                Held::SessionCall(call, _) => unstable::call_args_parts(&call.args).0,
                Held::RunGather(_) | Held::SessionGather(..) => {
                    return Err(HostError::Internal("a gather read as a paused call".into()).into());
                }
            };
            let (positional, keyword) = call_args_to_py(py, arena, &req)?;
            let range = held.call_range();
            let continuation = MontyContinuation {
                owner: owner.clone(),
                gather: false,
                ids: CallIds::One(req.call_id),
                name: name_to_py(py, req.name(arena)).unbind(),
                positional: positional.unbind(),
                keyword: keyword.unbind(),
                gathered: Vec::new(),
                range,
                origin: OnceLock::new(),
                held: Mutex::new(Some(held)),
                live: live.cloned(),
            };
            let continuation = Bound::new(py, continuation)?.into_any();
            types.call.build(py, [continuation, stdout, os_log, stderr])
        }
        Stop::Gather(held, ids) => {
            let calls = held_calls(py, &held, &ids)?;
            let (name, positional, keyword, _) = calls
                .first()
                .ok_or_else(|| HostError::Internal("a gather that awaits no call".into()))?;
            let continuation = MontyContinuation {
                owner: owner.clone(),
                gather: true,
                name: name.clone_ref(py),
                positional: positional.clone_ref(py),
                keyword: keyword.clone_ref(py),
                ids: CallIds::Many(ids),
                gathered: calls
                    .iter()
                    .map(|(n, p, k, id)| (n.clone_ref(py), p.clone_ref(py), k.clone_ref(py), *id))
                    .collect(),
                range: None,
                origin: OnceLock::new(),
                held: Mutex::new(Some(held)),
                live: live.cloned(),
            };
            let continuation = Py::new(py, continuation)?;
            let views = call_views(py, continuation.clone_ref(py).into_any(), calls)?;
            let gather_type = GATHER.get(py).ok_or_else(|| {
                PyRuntimeError::new_err("codeact.runtime has not registered Gather")
            })?;
            gather_type.call1(py, (views, stdout, os_log, continuation, stderr))
        }
    }
}

/// An advance running on a native worker. Wait for it with the GIL released, then take its
/// step once with `result()`.
#[pyclass(frozen, module = "codeact._monty")]
pub struct StepTicket {
    owner: Owner,
    slot: Arc<Slot<Result<Advance, HostError>>>,
    live: Option<Arc<LiveOutput>>,
}

impl StepTicket {
    pub(crate) fn new(
        owner: &Owner,
        slot: Arc<Slot<Result<Advance, HostError>>>,
        live: Option<Arc<LiveOutput>>,
    ) -> Self {
        Self {
            owner: owner.clone(),
            slot,
            live,
        }
    }

    /// Waits up to `timeout` (forever when None) with the GIL released; whether the
    /// advance finished.
    fn wait_released(&self, py: Python<'_>, timeout: Option<Duration>) -> bool {
        if self.slot.is_done() {
            return true;
        }
        let slot = Arc::clone(&self.slot);
        // Not an entry into Monty: only waits for the worker's result.
        py.detach(move || crate::spin::wait(&slot, timeout))
    }
}

/// A `wait` timeout in seconds (None: forever) as a duration; one past what a duration
/// holds (about 5.8e11 years) is forever too.
fn wait_timeout(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Duration::try_from_secs_f64(t).ok()),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout must be >= 0 seconds, got {t}"
        ))),
    }
}

#[pymethods]
impl StepTicket {
    /// Waits up to `timeout` seconds (forever when None) with the GIL released; returns
    /// whether the advance finished.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        Ok(self.wait_released(py, wait_timeout(timeout)?))
    }

    /// Whether the advance has finished.
    #[getter]
    fn done(&self) -> bool {
        self.slot.is_done()
    }

    /// The step (`Call`, `Gather`, `Complete` or `Raised`); raises a host error when the
    /// advance failed, `CodeRuntimeError` before it finished or when taken twice.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if !self.slot.is_done() {
            return Err(CodeRuntimeError::new_err(
                "the step has not finished; wait() for it first",
            ));
        }
        let advance = self.slot.take().ok_or_else(|| {
            CodeRuntimeError::new_err("this StepTicket's result was already taken")
        })??;
        build_step(py, &self.owner, advance, self.live.as_ref())
    }
}
