//! The Python-facing classes: `MontyEngine` (start / resume from bytes) and
//! `MontyPendingCall` (a live, single-use continuation).
//!
//! Step objects are the pure-Python seam types of `codeact.runtime`, registered once
//! with [`register_seam_types`], so every runtime hands back the same classes; the outcome
//! classes `ResumeValue` / `ResumeError` are native ([`crate::seam`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};

use crate::convert::{V, monty_to_py, py_to_monty, ref_to_py};
use crate::engine::{
    self, Advance, DEFAULT_MAX_OS_CALLS, EngineConfig, Limits, Outcome, Paused, Stop, ToolStyle,
};
use crate::errors::{CodeRuntimeError, HostError};
use crate::journal::{JVal, Journal, OsLog};
use crate::os_policy::{FixedClock, MountSpec, OsPolicy};
use crate::seam::{StepClass, native_error, native_value};
use crate::stack::{run_interpreter, stack_needed, with_stack};
use crate::worker::{self, Slot};

pub(crate) struct SeamTypes {
    pub(crate) call: StepClass,
    pub(crate) complete: StepClass,
    pub(crate) raised: StepClass,
    resume_value: Py<PyType>,
    resume_error: Py<PyType>,
}

static SEAM: PyOnceLock<SeamTypes> = PyOnceLock::new();

pub(crate) fn seam(py: Python<'_>) -> PyResult<&SeamTypes> {
    SEAM.get(py)
        .ok_or_else(|| PyRuntimeError::new_err("codeact.runtime has not registered its seam types"))
}

/// Registers the seam classes `Call`, `Complete`, `Raised`, `ResumeValue`, `ResumeError`.
#[pyfunction]
pub fn register_seam_types(
    py: Python<'_>,
    call: Py<PyType>,
    complete: Py<PyType>,
    raised: Py<PyType>,
    resume_value: Py<PyType>,
    resume_error: Py<PyType>,
) -> PyResult<()> {
    let types = SeamTypes {
        call: StepClass::new(py, call, ["call", "stdout", "os_log", "stderr"])?,
        complete: StepClass::new(py, complete, ["value", "stdout", "os_log", "stderr"])?,
        raised: StepClass::new(py, raised, ["message", "stdout", "os_log", "stderr"])?,
        resume_value,
        resume_error,
    };
    let _ = SEAM.set(py, types);
    Ok(())
}

/// Stack a start needs: the recursion allowance plus room for the parser and compiler to
/// follow long flat chains in the source.
fn start_stack(cfg: &EngineConfig, script: &str) -> usize {
    stack_needed(cfg.limits.max_recursion_depth)
        + script.len().min(engine::MAX_SCRIPT_BYTES) * engine::STACK_PER_SOURCE_BYTE
}

/// Bytes of native stack left on the calling thread, or None when unknown.
#[pyfunction]
pub fn remaining_stack() -> Option<usize> {
    stacker::remaining_stack()
}

fn value_outcome(value: &Bound<'_, PyAny>) -> PyResult<Outcome> {
    py_to_monty(value, "value")
        .map(Outcome::Value)
        .map_err(|e| {
            HostError::Conversion(format!(
                "cannot resume the script with this value: {}",
                e.describe()
            ))
            .into()
        })
}

pub(crate) fn outcome_from_py(py: Python<'_>, outcome: &Bound<'_, PyAny>) -> PyResult<Outcome> {
    // The native outcome classes (what `codeact.runtime` exports) are read in place.
    if let Some(value) = native_value(outcome) {
        return value_outcome(&value);
    }
    if let Some(error) = native_error(outcome) {
        let (message, exc_type) = error?;
        return Ok(Outcome::Error { exc_type, message });
    }
    let types = seam(py)?;
    if outcome.is_instance(types.resume_value.bind(py))? {
        return value_outcome(&outcome.getattr("value")?);
    }
    if outcome.is_instance(types.resume_error.bind(py))? {
        let message: String = outcome.getattr("message")?.extract()?;
        let exc_type: String = outcome.getattr("exc_type")?.extract()?;
        return Ok(Outcome::Error { exc_type, message });
    }
    Err(PyTypeError::new_err(format!(
        "resume() takes ResumeValue(value) or ResumeError(message), got {}",
        outcome.get_type().name()?
    )))
}

pub(crate) fn os_log_to_py<'py>(py: Python<'py>, log: &OsLog) -> PyResult<Bound<'py, PyTuple>> {
    if log.is_empty() {
        return Ok(PyTuple::empty(py));
    }
    let mut items = Vec::with_capacity(log.len());
    for (kind, value) in log {
        let v: Bound<'py, PyAny> = match value {
            JVal::Int(i) => i.into_pyobject(py)?.into_any(),
            JVal::Float(f) => f.into_pyobject(py)?.into_any(),
            JVal::Str(s) => s.into_pyobject(py)?.into_any(),
        };
        items.push(PyTuple::new(py, [kind.into_pyobject(py)?.into_any(), v])?);
    }
    PyTuple::new(py, items)
}

/// Reads `os_replay`: a sequence of `(kind, value)` pairs, values int, float or str.
pub(crate) fn journal_from_py(replay: Option<&Bound<'_, PyAny>>) -> PyResult<Journal> {
    let Some(replay) = replay else {
        return Ok(Journal::default());
    };
    let mut entries = Vec::new();
    for item in replay.try_iter()? {
        let (kind, value): (String, Bound<'_, PyAny>) = item?
            .extract()
            .map_err(|_| PyTypeError::new_err("os_replay entries must be (kind, value) pairs"))?;
        let value = if value.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "os_replay value for {kind:?} must be an int, float or str"
            )));
        } else if let Ok(i) = value.extract::<i64>() {
            JVal::Int(i)
        } else if let Ok(f) = value.cast::<pyo3::types::PyFloat>() {
            JVal::Float(f.value())
        } else if let Ok(s) = value.extract::<String>() {
            JVal::Str(s)
        } else {
            return Err(PyTypeError::new_err(format!(
                "os_replay value for {kind:?} must be an int, float or str"
            )));
        };
        entries.push((kind, value));
    }
    Ok(Journal::new(entries))
}

/// Most names [`name_to_py`] keeps per thread, and the longest it keeps (bytes).
const NAMES_KEPT: usize = 16;
const NAME_KEPT_BYTES: usize = 64;

thread_local! {
    /// Recently converted tool and argument names with their Python strings: a loop of
    /// tool calls converts the same few names every step (measured: about 40 ns a name).
    static NAMES: std::cell::RefCell<Vec<(Box<str>, Py<PyString>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` as a Python str; names seen recently on this thread reuse their str object.
pub(crate) fn name_to_py<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyString> {
    if text.len() > NAME_KEPT_BYTES {
        return PyString::new(py, text);
    }
    NAMES.with(|k| {
        let mut k = k.borrow_mut();
        if let Some((_, s)) = k.iter().find(|(t, _)| &**t == text) {
            return s.bind(py).clone();
        }
        let s = PyString::new(py, text);
        if k.len() >= NAMES_KEPT {
            k.remove(0);
        }
        k.push((text.into(), s.clone().unbind()));
        s
    })
}

/// A tool call's arguments as Python values: `(positional, keyword)`.
pub(crate) fn call_args_to_py<'py>(
    py: Python<'py>,
    arena: &monty_types::unstable::MontyGraph,
    positional: &[monty_types::unstable::NodeId],
    keyword: &[(String, monty_types::unstable::NodeId)],
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
    let mut items = Vec::with_capacity(positional.len());
    for (i, v) in positional.iter().enumerate() {
        items.push(
            ref_to_py(py, V::at(arena, *v), &format!("argument {i}"))
                .map_err(|e| HostError::Internal(e.describe()))?,
        );
    }
    let dict = PyDict::new(py);
    for (k, v) in keyword {
        dict.set_item(
            name_to_py(py, k),
            ref_to_py(py, V::at(arena, *v), k).map_err(|e| HostError::Internal(e.describe()))?,
        )?;
    }
    Ok((PyTuple::new(py, items)?, dict))
}

pub(crate) fn build_step(
    py: Python<'_>,
    cfg: &Arc<EngineConfig>,
    advance: Advance,
) -> PyResult<Py<PyAny>> {
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
        Stop::Gather(paused, ids) => {
            crate::py_gather::build_gather(py, cfg, *paused, ids, [stdout, stderr], os_log)
        }
        Stop::Call(paused, req) => {
            let (positional, keyword) =
                call_args_to_py(py, paused.arena(), &req.positional, &req.keyword)?;
            let pending = MontyPendingCall {
                cfg: Arc::clone(cfg),
                name: name_to_py(py, &req.name).unbind(),
                positional: positional.unbind(),
                keyword: keyword.unbind(),
                call_id: req.call_id,
                paused: Mutex::new(Some(paused)),
            };
            let pending = Bound::new(py, pending)?.into_any();
            types.call.build(py, [pending, stdout, os_log, stderr])
        }
    }
}

/// The native engine behind `codeact.MontyRuntime`: configuration plus start/resume.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyEngine {
    pub(crate) cfg: Arc<EngineConfig>,
}

#[pymethods]
impl MontyEngine {
    #[new]
    #[pyo3(signature = (*, max_duration, max_memory, max_recursion_depth, mounts, environ, system_clock, tool_style, max_stdout, snapshot_key, max_os_calls=Some(DEFAULT_MAX_OS_CALLS), timezone="local", clock=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        max_duration: Option<f64>,
        max_memory: Option<usize>,
        max_recursion_depth: usize,
        mounts: Vec<(String, PathBuf, bool)>,
        environ: Vec<(String, String)>,
        system_clock: bool,
        tool_style: &str,
        max_stdout: usize,
        snapshot_key: Option<Vec<u8>>,
        max_os_calls: Option<u64>,
        timezone: &str,
        clock: Option<(f64, f64)>,
    ) -> PyResult<Self> {
        let max_duration = match max_duration {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => {
                return Err(PyValueError::new_err(format!(
                    "max_duration must be a positive number of seconds, got {s}"
                )));
            }
        };
        let tool_style = match tool_style {
            "call_tool" => ToolStyle::CallTool,
            "functions" => ToolStyle::Functions,
            other => {
                return Err(PyValueError::new_err(format!(
                    "tool_style must be 'call_tool' or 'functions', got {other:?}"
                )));
            }
        };
        let mounts = mounts
            .into_iter()
            .map(|(virtual_path, host_path, read_write)| MountSpec {
                virtual_path,
                host_path,
                read_write,
            })
            .collect();
        let clock = clock
            .map(|(start, step)| FixedClock::new(start, step))
            .transpose()?;
        let os = OsPolicy::new(mounts, environ, system_clock, timezone, clock)?;
        let cfg = EngineConfig {
            limits: Limits {
                max_duration,
                max_memory,
                max_recursion_depth,
                max_os_calls,
            },
            os,
            tool_style,
            max_stdout,
            snapshot_key,
        };
        Ok(Self { cfg: Arc::new(cfg) })
    }

    /// Compiles and runs `script` to its first stop; returns a `Call`, `Gather`, `Complete`
    /// or `Raised`. `deferred`: byte offsets of the call expressions the script awaits.
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None))]
    fn start(
        &self,
        py: Python<'_>,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
    ) -> PyResult<Py<PyAny>> {
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        let needed = start_stack(&self.cfg, &script);
        let deferred = deferred.unwrap_or_default();
        let advance = py
            .detach(move || {
                with_stack(needed, || {
                    engine::start(&cfg, script, &script_name, journal, deferred)
                })
            })
            .map_err(PyErr::from)?;
        build_step(py, &self.cfg, advance)
    }

    /// Like `start`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None))]
    fn start_async(
        &self,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
    ) -> PyResult<StepTicket> {
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        let needed = start_stack(&self.cfg, &script);
        let deferred = deferred.unwrap_or_default();
        let slot = worker::submit(move || {
            with_stack(needed, || {
                engine::start(&cfg, script, &script_name, journal, deferred)
            })
        });
        Ok(StepTicket::new(&self.cfg, slot))
    }

    /// Like `resume`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (snapshot, outcome, os_replay=None))]
    fn resume_async(
        &self,
        py: Python<'_>,
        snapshot: Vec<u8>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StepTicket> {
        let outcome = outcome_from_py(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        let depth = engine::snapshot_depth(&snapshot)?;
        let slot = worker::submit(move || {
            with_stack(stack_needed(depth), || {
                let (paused, _req) = engine::load(&cfg, &snapshot)?;
                engine::resume(&cfg, Box::new(paused), outcome, journal)
            })
        });
        Ok(StepTicket::new(&self.cfg, slot))
    }

    /// Restores a paused script from `snapshot` bytes and resumes it with `outcome`.
    #[pyo3(signature = (snapshot, outcome, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        snapshot: Vec<u8>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let outcome = outcome_from_py(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        // A snapshot carries its own limits: size the stack for the depth it records.
        let depth = engine::snapshot_depth(&snapshot)?;
        let advance = run_interpreter(py, depth, move || {
            let (paused, _req) = engine::load(&cfg, &snapshot)?;
            engine::resume(&cfg, Box::new(paused), outcome, journal)
        })?;
        build_step(py, &self.cfg, advance)
    }

    /// Restores a script paused at a gather from `snapshot` bytes and settles the calls in
    /// `outcomes` (call id -> `ResumeValue` / `ResumeError`, a subset allowed).
    #[pyo3(signature = (snapshot, outcomes, os_replay=None))]
    fn resume_gather(
        &self,
        py: Python<'_>,
        snapshot: Vec<u8>,
        outcomes: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        crate::py_gather::resume_gather_bytes(py, &self.cfg, snapshot, outcomes, os_replay)
    }

    /// Like `resume_gather`, but runs on a native worker; returns a `StepTicket`.
    #[pyo3(signature = (snapshot, outcomes, os_replay=None))]
    fn resume_gather_async(
        &self,
        py: Python<'_>,
        snapshot: Vec<u8>,
        outcomes: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StepTicket> {
        crate::py_gather::resume_gather_bytes_async(py, &self.cfg, snapshot, outcomes, os_replay)
    }

    /// The calls a snapshot paused at a gather awaits, in call order, each as
    /// `(name, positional_args, keyword_args, call_id)`; one entry for a paused call.
    fn inspect_gather(&self, py: Python<'_>, snapshot: Vec<u8>) -> PyResult<Py<PyAny>> {
        crate::py_gather::inspect_bytes(py, &self.cfg, snapshot)
    }

    /// Reads the tool call a snapshot is paused at, without resuming it:
    /// `(name, positional_args, keyword_args, call_id)` (for a gather: its first call).
    fn inspect(&self, py: Python<'_>, snapshot: Vec<u8>) -> PyResult<Py<PyAny>> {
        let cfg = Arc::clone(&self.cfg);
        let loaded = run_interpreter(py, engine::RECURSION_CEILING, move || {
            engine::load_any(&cfg, &snapshot)
        })?;
        let (paused, req) = match loaded {
            engine::Loaded::Call(paused, req) => (paused, req),
            engine::Loaded::Gather(paused, ids) => {
                return crate::py_gather::first_call(py, &paused, &ids);
            }
        };
        let (positional, keyword) =
            call_args_to_py(py, paused.arena(), &req.positional, &req.keyword)?;
        Ok((req.name, positional, keyword, req.call_id)
            .into_pyobject(py)?
            .into_any()
            .unbind())
    }
}

/// Stack a dump needs, in bytes (the heap serializes flat; this is headroom).
pub(crate) const DUMP_STACK: usize = 2 * 1024 * 1024;

const ALREADY_RESUMED: &str = "this PendingCall was already resumed; a PendingCall is single use";

/// A script paused at a tool call, held live in memory; resume it once.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontyPendingCall {
    cfg: Arc<EngineConfig>,
    name: Py<PyString>,
    positional: Py<PyTuple>,
    keyword: Py<PyDict>,
    call_id: u32,
    /// Boxed: the paused interpreter state is large and moves several times per resume.
    paused: Mutex<Option<Box<Paused>>>,
}

#[pymethods]
impl MontyPendingCall {
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

    /// The interpreter's call counter for this call (unique within one script run).
    #[getter]
    fn call_id(&self) -> u32 {
        self.call_id
    }

    /// Serializes the live continuation into snapshot bytes (may be called repeatedly).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let cfg = Arc::clone(&self.cfg);
        let paused = self.take()?;
        let (bytes, paused) =
            py.detach(move || with_stack(DUMP_STACK, || engine::dump(&cfg, *paused)));
        *self.paused.lock().expect("pending call lock") = Some(Box::new(paused));
        Ok(PyBytes::new(py, &bytes?))
    }

    /// Resumes the script in place with `outcome` (`ResumeValue` or `ResumeError`).
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let outcome = outcome_from_py(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let paused = self.take()?;
        let cfg = Arc::clone(&self.cfg);
        let advance = run_interpreter(py, self.cfg.limits.max_recursion_depth, move || {
            engine::resume(&cfg, paused, outcome, journal)
        })?;
        build_step(py, &self.cfg, advance)
    }

    /// Like `resume`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (outcome, os_replay=None))]
    fn resume_async(
        &self,
        py: Python<'_>,
        outcome: &Bound<'_, PyAny>,
        os_replay: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<StepTicket> {
        let outcome = outcome_from_py(py, outcome)?;
        let journal = journal_from_py(os_replay)?;
        let paused = self.take()?;
        let cfg = Arc::clone(&self.cfg);
        let needed = stack_needed(cfg.limits.max_recursion_depth);
        let slot = worker::submit(move || {
            with_stack(needed, || engine::resume(&cfg, paused, outcome, journal))
        });
        Ok(StepTicket::new(&self.cfg, slot))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "MontyPendingCall(name={}, keyword_args={}, call_id={})",
            self.name.bind(py).repr()?,
            self.keyword.bind(py).repr()?,
            self.call_id
        ))
    }
}

impl MontyPendingCall {
    fn take(&self) -> PyResult<Box<Paused>> {
        self.paused
            .lock()
            .map_err(|_| CodeRuntimeError::new_err("pending call lock poisoned"))?
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(ALREADY_RESUMED))
    }
}

/// An advance running on a native worker. Wait for it with the GIL released, then take its
/// step once with `result()`.
#[pyclass(frozen, module = "codeact._monty")]
pub struct StepTicket {
    cfg: Arc<EngineConfig>,
    slot: Arc<Slot<Result<Advance, HostError>>>,
}

impl StepTicket {
    pub(crate) fn new(
        cfg: &Arc<EngineConfig>,
        slot: Arc<Slot<Result<Advance, HostError>>>,
    ) -> Self {
        Self {
            cfg: Arc::clone(cfg),
            slot,
        }
    }
}

#[pymethods]
impl StepTicket {
    /// Waits up to `timeout` seconds (forever when None) with the GIL released; returns
    /// whether the advance finished.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let timeout = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be >= 0 seconds, got {t}"
                )));
            }
        };
        if self.slot.is_done() {
            return Ok(true);
        }
        let slot = Arc::clone(&self.slot);
        Ok(py.detach(move || slot.wait(timeout)))
    }

    /// Whether the advance has finished.
    #[getter]
    fn done(&self) -> bool {
        self.slot.is_done()
    }

    /// The step (`Call`, `Complete` or `Raised`); raises a host error when the advance
    /// failed, `CodeRuntimeError` before it finished or when taken twice.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if !self.slot.is_done() {
            return Err(CodeRuntimeError::new_err(
                "the step has not finished; wait() for it first",
            ));
        }
        let advance = self.slot.take().ok_or_else(|| {
            CodeRuntimeError::new_err("this StepTicket's result was already taken")
        })??;
        build_step(py, &self.cfg, advance)
    }
}
