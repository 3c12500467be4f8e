//! The Python-facing engine: `MontyEngine` (start, resume from bytes, restore any bytes into
//! their live continuation), and the conversions of outcomes, OS journals and call arguments.
//!
//! Step objects are the pure-Python seam types of `codeact.runtime`, registered once
//! with [`register_seam_types`], so every runtime hands back the same classes; the outcome
//! classes `ResumeValue` / `ResumeError` are native ([`crate::seam`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use crate::convert::{V, py_to_monty, ref_to_py};
use crate::engine::interp;
use crate::engine::{
    self, Advance, DEFAULT_MAX_OS_CALLS, EngineConfig, Held, Limits, Outcome, Stop, ToolStyle,
};
use crate::errors::HostError;
use crate::journal::{JVal, Journal, OsLog};
use crate::live::{LiveOutput, PyListener};
use crate::os_policy::{FixedClock, MountSpec, OsPolicy};
use crate::py_continuation::{
    CallInfo, MontyContinuation, Owner, StepTicket, build_step, held_calls,
};
use crate::py_repl::MontySession;
use crate::seam::{StepClass, native_error, native_value};
use crate::stack::{run_interpreter, stack_needed, submit_interpreter};

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

/// Wakes a step worker ahead of a `start_async` / `resume_async` (see `worker::wake`).
#[pyfunction]
pub fn wake_step_worker() {
    crate::worker::wake();
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
            JVal::Bytes(b) => pyo3::types::PyBytes::new(py, b).into_any(),
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
    let mut files = None;
    for item in replay.try_iter()? {
        let (kind, value): (String, Bound<'_, PyAny>) = item?
            .extract()
            .map_err(|_| PyTypeError::new_err("os_replay entries must be (kind, value) pairs"))?;
        if kind == crate::files::FILES {
            // the session's file layer (crate::files), not a journaled answer
            let bytes = value.cast::<pyo3::types::PyBytes>().map_err(|_| {
                PyTypeError::new_err("os_replay's 'files' entry must be the layer's bytes")
            })?;
            files = Some(crate::files::decode(bytes.as_bytes()).map_err(PyErr::from)?);
            continue;
        }
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
    let mut journal = Journal::new(entries);
    journal.files = files;
    Ok(journal)
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
    arena: &interp::unstable::MontyGraph,
    req: &crate::engine::ToolRequest,
) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
    let mut items = Vec::with_capacity(req.positional.len());
    for (i, v) in req.positional.iter().enumerate() {
        items.push(
            ref_to_py(py, V::at(arena, *v), &format!("argument {i}"))
                .map_err(|e| HostError::Internal(e.describe()))?,
        );
    }
    let dict = PyDict::new(py);
    req.try_keywords(arena, |k, v| {
        dict.set_item(
            name_to_py(py, k),
            ref_to_py(py, V::at(arena, v), k).map_err(|e| HostError::Internal(e.describe()))?,
        )
    })?;
    Ok((PyTuple::new(py, items)?, dict))
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
        mounts: Vec<(String, PathBuf, bool, Option<u64>)>,
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
            .map(
                |(virtual_path, host_path, read_write, overlay_budget)| MountSpec {
                    virtual_path,
                    host_path,
                    read_write,
                    overlay_budget,
                },
            )
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
    /// `on_output`: called as `on_output(stream, text)` (`"stdout"` / `"stderr"`) with what
    /// the run prints while it runs, in this and its later advances (see `crate::live`).
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None, on_output=None))]
    fn start(
        &self,
        py: Python<'_>,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
        on_output: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        let needed = start_stack(&self.cfg, &script);
        let deferred = deferred.unwrap_or_default();
        let live = listener(py, on_output)?;
        let to_run = live.clone();
        let advance = run_interpreter(py, needed, move || {
            engine::start(&cfg, script, &script_name, journal, deferred, to_run)
        })?;
        build_step(py, &self.owner(), advance, live.as_ref())
    }

    /// Like `start`, but runs on a native worker; returns a `StepTicket` to wait on.
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None, on_output=None))]
    fn start_async(
        &self,
        py: Python<'_>,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
        on_output: Option<Py<PyAny>>,
    ) -> PyResult<StepTicket> {
        let journal = journal_from_py(os_replay)?;
        let cfg = Arc::clone(&self.cfg);
        let needed = start_stack(&self.cfg, &script);
        let deferred = deferred.unwrap_or_default();
        let live = listener(py, on_output)?;
        let to_run = live.clone();
        let slot = submit_interpreter(needed, move || {
            engine::start(&cfg, script, &script_name, journal, deferred, to_run)
        });
        Ok(StepTicket::new(&self.owner(), slot, live))
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
        let slot = submit_interpreter(stack_needed(depth), move || {
            let (paused, _req) = engine::load(&cfg, &snapshot)?;
            engine::resume(&cfg, paused, outcome, journal)
        });
        Ok(StepTicket::new(&self.owner(), slot, None))
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
        let advance = run_interpreter(py, stack_needed(depth), move || {
            let (paused, _req) = engine::load(&cfg, &snapshot)?;
            engine::resume(&cfg, paused, outcome, journal)
        })?;
        build_step(py, &self.owner(), advance, None)
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
        let gather = self.restored_gather(py, snapshot)?;
        gather.call_method1(py, "resume", (outcomes, os_replay))
    }

    /// Opens any snapshot bytes into the step they paused at, without resuming: a `Call`
    /// or a `Gather` whose continuation is live (`session`: its `MontySession` for a
    /// namespace session's feed). `session`: None takes a paused script or a paused
    /// session; False only a paused script, True only a paused session (other bytes raise
    /// `SnapshotError` saying what they are and what takes them). `on_output`: the live
    /// output listener of the continuation's later advances (as for `start`).
    #[pyo3(signature = (snapshot, session=None, on_output=None))]
    fn restore(
        &self,
        py: Python<'_>,
        snapshot: Vec<u8>,
        session: Option<bool>,
        on_output: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let live = listener(py, on_output)?;
        let is_session = match session {
            Some(s) => s,
            None => crate::snapshot::is_session(&snapshot, self.cfg.snapshot_key.as_deref())?,
        };
        let step = if is_session {
            let (_session, step) = MontySession::load(py, self, snapshot.clone(), live)?;
            step.ok_or_else(|| {
                HostError::Snapshot(
                    "the session is idle, not paused at a tool call; load it with load_session"
                        .into(),
                )
            })?
        } else {
            let cfg = Arc::clone(&self.cfg);
            let depth = engine::snapshot_depth(&snapshot)?;
            let bytes = snapshot.clone();
            let loaded = run_interpreter(py, stack_needed(depth), move || {
                engine::load_any(&cfg, &bytes)
            })?;
            let mut advance = restored(loaded);
            if let Some(live) = &live {
                advance.listen(Arc::clone(live));
            }
            build_step(py, &self.owner(), advance, live.as_ref())?
        };
        MontyContinuation::restored_from(py, &step, snapshot)?;
        Ok(step)
    }

    /// The calls a snapshot paused at a gather awaits, in call order, each as
    /// `(name, positional_args, keyword_args, call_id)`; one entry for a paused call.
    fn inspect_gather(&self, py: Python<'_>, snapshot: Vec<u8>) -> PyResult<Py<PyAny>> {
        let cfg = Arc::clone(&self.cfg);
        let loaded = run_interpreter(py, stack_needed(engine::RECURSION_CEILING), move || {
            engine::load_any(&cfg, &snapshot)
        })?;
        let entries: Vec<CallInfo> = match loaded {
            engine::Loaded::Gather(paused, ids) => held_calls(py, &Held::RunGather(paused), &ids)?,
            engine::Loaded::Call(paused, req) => {
                let arena = paused.arena();
                let (positional, keyword) = call_args_to_py(py, arena, &req)?;
                vec![(
                    name_to_py(py, req.name(arena)).unbind(),
                    positional.unbind(),
                    keyword.unbind(),
                    req.call_id,
                )]
            }
        };
        Ok(PyTuple::new(py, entries)?.into_any().unbind())
    }

    /// Reads the tool call a snapshot is paused at, without resuming it:
    /// `(name, positional_args, keyword_args, call_id)` (for a gather: its first call).
    fn inspect(&self, py: Python<'_>, snapshot: Vec<u8>) -> PyResult<Py<PyAny>> {
        let calls = self.inspect_gather(py, snapshot)?;
        let first = calls
            .bind(py)
            .cast::<PyTuple>()?
            .get_item(0)
            .map_err(|_| HostError::Snapshot("snapshot awaits no call".into()))?;
        Ok(first.unbind())
    }
}

impl MontyEngine {
    pub(crate) fn owner(&self) -> Owner {
        Owner::Run(Arc::clone(&self.cfg))
    }

    /// The live continuation of a script paused at a gather, restored from `snapshot`.
    fn restored_gather(&self, py: Python<'_>, snapshot: Vec<u8>) -> PyResult<Py<PyAny>> {
        let cfg = Arc::clone(&self.cfg);
        let depth = engine::snapshot_depth(&snapshot)?;
        let loaded = run_interpreter(py, stack_needed(depth), move || {
            engine::load_any(&cfg, &snapshot)
        })?;
        if let engine::Loaded::Call(..) = loaded {
            return Err(HostError::Snapshot(
                "snapshot is paused at one tool call, not at a gather: resume it with resume"
                    .into(),
            )
            .into());
        }
        let step = build_step(py, &self.owner(), restored(loaded), None)?;
        Ok(step.bind(py).getattr(intern!(py, "continuation"))?.unbind())
    }
}

/// `on_output` as a run's live output listener. Raises `TypeError` for one that cannot be
/// called.
pub(crate) fn listener(
    py: Python<'_>,
    on_output: Option<Py<PyAny>>,
) -> PyResult<Option<Arc<LiveOutput>>> {
    match on_output {
        Some(f) if f.is_none(py) => Ok(None),
        Some(f) if !f.bind(py).is_callable() => Err(PyTypeError::new_err(format!(
            "on_output must be callable as on_output(stream, text), got {}",
            f.bind(py).get_type().name()?
        ))),
        Some(f) => Ok(Some(LiveOutput::new(PyListener::boxed(f)))),
        None => Ok(None),
    }
}

/// A restored continuation as the advance that paused it (nothing printed, nothing read).
fn restored(loaded: engine::Loaded) -> Advance {
    let stop = match loaded {
        engine::Loaded::Call(paused, req) => Stop::Call(Held::RunCall(paused), req),
        engine::Loaded::Gather(paused, ids) => Stop::Gather(Held::RunGather(paused), ids),
    };
    Advance {
        stop,
        stdout: String::new(),
        stderr: String::new(),
        os_log: Vec::new(),
    }
}
