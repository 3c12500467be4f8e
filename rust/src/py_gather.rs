//! The Python-facing side of a script awaiting several tool calls at once
//! (`await asyncio.gather(call_tool(...), ...)`): `MontyGather`, the live continuation
//! behind a `Gather` step, and `MontyGatherCall`, one of the calls it awaits.
//!
//! The step object is the pure-Python seam type `codeact.runtime.Gather`, registered once
//! with [`register_gather_type`]; it holds the calls and this continuation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use monty_types::unstable;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyTuple, PyType};

use crate::engine::{self, EngineConfig, Outcome, PausedGather, PendingTool};
use crate::errors::{CodeRuntimeError, HostError};
use crate::py_api::{StepTicket, build_step, call_args_to_py, journal_from_py, outcome_from_py};
use crate::stack::{run_interpreter, stack_needed, with_stack};
use crate::worker;

static GATHER: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Registers the seam class `Gather(calls, stdout, os_log, continuation, stderr)`.
#[pyfunction]
pub fn register_gather_type(py: Python<'_>, gather: Py<PyType>) -> PyResult<()> {
    let _ = GATHER.set(py, gather);
    Ok(())
}

const ALREADY_RESUMED: &str = "this Gather was already resumed; a Gather is single use";
const NOT_ALONE: &str = "a call of a Gather is not resumed by itself: resume the Gather step \
     with {call_id: outcome} for the calls that finished";

/// The call's arguments as Python values: `(positional, keyword)`.
pub(crate) fn call_parts(py: Python<'_>, p: &PendingTool) -> PyResult<(Py<PyTuple>, Py<PyDict>)> {
    let arena = unstable::call_args_parts(&p.args).0;
    let (positional, keyword) = call_args_to_py(py, arena, &p.req.positional, &p.req.keyword)?;
    Ok((positional.unbind(), keyword.unbind()))
}

/// One awaited call as Python sees it: `(name, positional_args, keyword_args, call_id)`.
pub(crate) type CallInfo = (String, Py<PyTuple>, Py<PyDict>, u32);

/// The calls `ids` of a pending-call table, in the order of `ids`.
pub(crate) fn calls_in(
    py: Python<'_>,
    table: &BTreeMap<u32, PendingTool>,
    ids: &[u32],
) -> PyResult<Vec<CallInfo>> {
    ids.iter()
        .map(|id| {
            let p = table.get(id).ok_or_else(|| {
                HostError::Internal(format!("the gather awaits an unknown call {id}"))
            })?;
            let (positional, keyword) = call_parts(py, p)?;
            Ok((p.req.name.clone(), positional, keyword, *id))
        })
        .collect()
}

fn calls_of(py: Python<'_>, paused: &PausedGather, ids: &[u32]) -> PyResult<Vec<CallInfo>> {
    paused.ctx().with_pending(|t| calls_in(py, t, ids))
}

/// The `Gather` step for a paused gather.
pub fn build_gather(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    paused: PausedGather,
    ids: Vec<u32>,
    output: [Bound<'_, PyAny>; 2],
    os_log: Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let calls = calls_of(py, &paused, &ids)?;
    let handle = Py::new(
        py,
        MontyGather {
            cfg: Arc::clone(cfg),
            ids,
            paused: Mutex::new(Some(paused)),
        },
    )?;
    gather_step(py, handle.into_any(), calls, output, os_log)
}

/// A `Gather` step over `calls` whose continuation is `handle` (a `MontyGather`, or a
/// namespace session's `MontySessionGather`).
pub(crate) fn gather_step(
    py: Python<'_>,
    handle: Py<PyAny>,
    calls: Vec<CallInfo>,
    [stdout, stderr]: [Bound<'_, PyAny>; 2],
    os_log: Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let gather_type = GATHER
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("codeact.runtime has not registered Gather"))?;
    let mut items = Vec::with_capacity(calls.len());
    for (name, positional, keyword, call_id) in calls {
        items.push(Py::new(
            py,
            MontyGatherCall {
                name,
                positional,
                keyword,
                call_id,
                gather: handle.clone_ref(py),
            },
        )?);
    }
    let calls = PyTuple::new(py, items)?;
    gather_type.call1(py, (calls, stdout, os_log, handle, stderr))
}

/// The first call of a paused gather as `inspect` gives a call.
pub fn first_call(py: Python<'_>, paused: &PausedGather, ids: &[u32]) -> PyResult<Py<PyAny>> {
    let calls = calls_of(py, paused, &ids[..1.min(ids.len())])?;
    let (name, positional, keyword, call_id) = calls
        .into_iter()
        .next()
        .ok_or_else(|| HostError::Snapshot("snapshot awaits no call".into()))?;
    Ok((name, positional, keyword, call_id)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

/// `{call_id: outcome}` checked against the calls the gather awaits.
pub(crate) fn outcomes_from_py(
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

/// `MontyEngine.resume_gather`: restores a paused gather and settles `outcomes`.
pub fn resume_gather_bytes(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    snapshot: Vec<u8>,
    outcomes: &Bound<'_, PyAny>,
    os_replay: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let journal = journal_from_py(os_replay)?;
    let depth = engine::snapshot_depth(&snapshot)?;
    let (paused, ids) = load_gather(py, cfg, snapshot, depth)?;
    let outcomes = outcomes_from_py(py, outcomes, &ids)?;
    let run_cfg = Arc::clone(cfg);
    let advance = run_interpreter(py, depth, move || {
        engine::resume_gather(&run_cfg, paused, outcomes, journal)
    })?;
    build_step(py, cfg, advance)
}

/// `MontyEngine.resume_gather_async`: the same on a native worker (the load included).
pub fn resume_gather_bytes_async(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    snapshot: Vec<u8>,
    outcomes: &Bound<'_, PyAny>,
    os_replay: Option<&Bound<'_, PyAny>>,
) -> PyResult<StepTicket> {
    let journal = journal_from_py(os_replay)?;
    let depth = engine::snapshot_depth(&snapshot)?;
    // The ids are checked against the snapshot, which only the load reads: load here.
    let (paused, ids) = load_gather(py, cfg, snapshot, depth)?;
    let outcomes = outcomes_from_py(py, outcomes, &ids)?;
    let run_cfg = Arc::clone(cfg);
    let slot = worker::submit(move || {
        with_stack(stack_needed(depth), || {
            engine::resume_gather(&run_cfg, paused, outcomes, journal)
        })
    });
    Ok(StepTicket::new(cfg, slot))
}

fn load_gather(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    snapshot: Vec<u8>,
    depth: usize,
) -> PyResult<(PausedGather, Vec<u32>)> {
    let load_cfg = Arc::clone(cfg);
    let loaded = run_interpreter(py, depth, move || engine::load_any(&load_cfg, &snapshot))?;
    match loaded {
        engine::Loaded::Gather(paused, ids) => Ok((paused, ids)),
        engine::Loaded::Call(..) => Err(HostError::Snapshot(
            "snapshot is paused at one tool call, not at a gather: resume it with resume".into(),
        )
        .into()),
    }
}

/// `MontyEngine.inspect_gather`: the calls a snapshot awaits.
pub fn inspect_bytes(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    snapshot: Vec<u8>,
) -> PyResult<Py<PyAny>> {
    let load_cfg = Arc::clone(cfg);
    let loaded = run_interpreter(py, engine::RECURSION_CEILING, move || {
        engine::load_any(&load_cfg, &snapshot)
    })?;
    let entries: Vec<Py<PyAny>> = match loaded {
        engine::Loaded::Gather(paused, ids) => calls_of(py, &paused, &ids)?
            .into_iter()
            .map(|c| Ok(c.into_pyobject(py)?.into_any().unbind()))
            .collect::<PyResult<_>>()?,
        engine::Loaded::Call(paused, req) => {
            let arena = paused.arena();
            let tool = PendingTool {
                args: Default::default(),
                req,
            };
            let (positional, keyword) =
                call_args_to_py(py, arena, &tool.req.positional, &tool.req.keyword)?;
            vec![
                (tool.req.name, positional, keyword, tool.req.call_id)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind(),
            ]
        }
    };
    Ok(PyTuple::new(py, entries)?.into_any().unbind())
}

/// Stack a dump needs, in bytes (the heap serializes flat; this is headroom).
const DUMP_STACK: usize = 2 * 1024 * 1024;

/// A script whose tasks all wait on started tool calls, held live; resume it once.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyGather {
    cfg: Arc<EngineConfig>,
    ids: Vec<u32>,
    paused: Mutex<Option<PausedGather>>,
}

impl MontyGather {
    fn take(&self) -> PyResult<PausedGather> {
        self.paused
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("gather lock poisoned"))?
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(ALREADY_RESUMED))
    }
}

#[pymethods]
impl MontyGather {
    /// The call ids the script awaits, in call order.
    #[getter]
    fn call_ids(&self) -> Vec<u32> {
        self.ids.clone()
    }

    /// Serializes the live continuation into snapshot bytes (may be called repeatedly).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let cfg = Arc::clone(&self.cfg);
        let paused = self.take()?;
        let (bytes, paused) =
            py.detach(move || with_stack(DUMP_STACK, || engine::dump_gather(&cfg, paused)));
        *self.paused.lock().expect("gather lock") = Some(paused);
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Settles the calls in `outcomes` ({call_id: `ResumeValue` | `ResumeError`}, a subset
    /// allowed) and runs to the next stop (another `Gather` while the script still waits).
    #[pyo3(signature = (outcomes, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        outcomes: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let outcomes = outcomes_from_py(py, outcomes, &self.ids)?;
        let journal = journal_from_py(os_replay)?;
        let paused = self.take()?;
        let cfg = Arc::clone(&self.cfg);
        let advance = run_interpreter(py, self.cfg.limits.max_recursion_depth, move || {
            engine::resume_gather(&cfg, paused, outcomes, journal)
        })?;
        build_step(py, &self.cfg, advance)
    }

    /// Like `resume`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (outcomes, os_replay=None))]
    fn resume_async(
        &self,
        py: Python<'_>,
        outcomes: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StepTicket> {
        let outcomes = outcomes_from_py(py, outcomes, &self.ids)?;
        let journal = journal_from_py(os_replay)?;
        let paused = self.take()?;
        let cfg = Arc::clone(&self.cfg);
        let needed = stack_needed(cfg.limits.max_recursion_depth);
        let slot = worker::submit(move || {
            with_stack(needed, || {
                engine::resume_gather(&cfg, paused, outcomes, journal)
            })
        });
        Ok(StepTicket::new(&self.cfg, slot))
    }

    fn __repr__(&self) -> String {
        format!("MontyGather(call_ids={:?})", self.ids)
    }
}

/// One call a `Gather` awaits. Not resumed by itself: the `Gather` settles it.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyGatherCall {
    name: String,
    positional: Py<PyTuple>,
    keyword: Py<PyDict>,
    call_id: u32,
    /// The gather's continuation (`MontyGather` or `MontySessionGather`).
    gather: Py<PyAny>,
}

#[pymethods]
impl MontyGatherCall {
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

    /// The interpreter's call counter for this call: its key in `Gather.resume`.
    #[getter]
    fn call_id(&self) -> u32 {
        self.call_id
    }

    /// The whole gather's snapshot bytes (the same as `Gather.dump()`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(self
            .gather
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
            "MontyGatherCall(name={:?}, keyword_args={}, call_id={})",
            self.name,
            self.keyword.bind(py).repr()?,
            self.call_id
        ))
    }
}
