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
//!   waits on them the feed stops at a `Gather` (a `MontyContinuation`), whose dump carries
//!   the started calls' arguments like a run's (`engine::seal`).
//!
//! The session engine (feeds, dumps, loads, the envelope section) is `crate::engine::session`;
//! this file is its Python face.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::engine::session::{self, DUMP_STACK, Inner, LoadedSession};
use crate::engine::{Advance, Held, MAX_SCRIPT_BYTES, STACK_PER_SOURCE_BYTE, Stop};
use crate::errors::CodeRuntimeError;
use crate::live::LiveOutput;
use crate::py_api::{MontyEngine, journal_from_py, listener};
use crate::py_continuation::{Owner, build_step};
use crate::stack::{run_interpreter, stack_needed};

/// A namespace session: a Monty REPL whose globals carry from feed to feed.
#[pyclass(frozen, module = "codeact._monty")]
pub struct MontySession {
    inner: Arc<Inner>,
}

impl MontySession {
    /// The session behind `inner` (a paused feed's continuation names its session so).
    pub(crate) fn of(inner: &Arc<Inner>) -> Self {
        Self {
            inner: Arc::clone(inner),
        }
    }

    fn owner(&self) -> Owner {
        Owner::Session(Arc::clone(&self.inner))
    }

    /// Restores `snapshot` into a new session: `(session, step)`, `step` None for an idle
    /// session, else the `Call` or `Gather` the paused feed waits at.
    pub(crate) fn load(
        py: Python<'_>,
        engine: &MontyEngine,
        snapshot: Vec<u8>,
        live: Option<Arc<LiveOutput>>,
    ) -> PyResult<(Self, Option<Py<PyAny>>)> {
        let session = Self {
            inner: Inner::new(Arc::clone(&engine.cfg)),
        };
        let cfg = Arc::clone(&session.inner.cfg);
        let memory = session.inner.memory.clone();
        let depth = crate::engine::snapshot_depth(&snapshot)?;
        let (loaded, awaits) = run_interpreter(py, stack_needed(depth), move || {
            session::load_session(&cfg, &memory, &snapshot)
        })?;
        *session.inner.awaits() = Arc::new(awaits);
        let stop = match loaded {
            LoadedSession::Idle(repl) => {
                *session.inner.repl() = Some(*repl);
                return Ok((session, None));
            }
            LoadedSession::Call(call, req, feed) => Stop::Call(Held::SessionCall(call, feed), req),
            LoadedSession::Gather(futures, ids, feed) => {
                Stop::Gather(Held::SessionGather(futures, feed), ids)
            }
        };
        let mut advance = Advance {
            stop,
            stdout: String::new(),
            stderr: String::new(),
            os_log: Vec::new(),
        };
        if let Some(live) = &live {
            advance.listen(Arc::clone(live));
        }
        let step = build_step(py, &session.owner(), advance, live.as_ref())?;
        Ok((session, Some(step)))
    }
}

const BUSY: &str = "the session is running a script or paused at a tool call; \
                    resume that call before feeding another script";

#[pymethods]
impl MontySession {
    /// A new, empty session under `engine`'s limits and OS policy.
    #[staticmethod]
    fn start(engine: &MontyEngine) -> Self {
        let inner = Inner::new(Arc::clone(&engine.cfg));
        session::start(&inner);
        Self { inner }
    }

    /// Restores a session from bytes of `dump()` (idle), of a paused feed's call `dump()`
    /// or of a paused feed's gather `dump()`. Returns `(session, step)`: `step` is None for
    /// an idle session, else the `Call` or `Gather` step the paused feed waits at (resume
    /// its continuation to go on).
    #[staticmethod]
    #[pyo3(name = "load")]
    fn load_py(
        py: Python<'_>,
        engine: &MontyEngine,
        snapshot: Vec<u8>,
    ) -> PyResult<(Self, Option<Py<PyAny>>)> {
        Self::load(py, engine, snapshot, None)
    }

    /// Runs `script` in the session to its first stop; returns a `Call`, `Gather`,
    /// `Complete` or `Raised`. After `Complete` the script's globals stay; after `Raised`
    /// the session is as it was before the script. `deferred`: byte offsets of the call
    /// expressions the script awaits (as for `MontyEngine.start`). `on_output`: the feed's
    /// live output listener, `on_output(stream, text)` (as for `MontyEngine.start`).
    #[pyo3(signature = (script, script_name, os_replay=None, deferred=None, on_output=None))]
    fn feed(
        &self,
        py: Python<'_>,
        script: String,
        script_name: String,
        os_replay: Option<&Bound<'_, PyAny>>,
        deferred: Option<Vec<u32>>,
        on_output: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let journal = journal_from_py(os_replay)?;
        let live = listener(py, on_output)?;
        let to_run = live.clone();
        let repl = self
            .inner
            .repl()
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(BUSY))?;
        let inner = Arc::clone(&self.inner);
        let needed = stack_needed(inner.cfg.limits.max_recursion_depth)
            + script.len().min(MAX_SCRIPT_BYTES) * STACK_PER_SOURCE_BYTE;
        let deferred = deferred.unwrap_or_default();
        let advance = run_interpreter(py, needed, move || {
            session::feed(&inner, repl, script, script_name, journal, deferred, to_run)
        })?;
        build_step(py, &self.owner(), advance, live.as_ref())
    }

    /// Sealed bytes of the idle session (load them with `MontySession.load`).
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let repl = self
            .inner
            .repl()
            .take()
            .ok_or_else(|| CodeRuntimeError::new_err(BUSY))?;
        let inner = Arc::clone(&self.inner);
        let (bytes, repl) = run_interpreter(py, DUMP_STACK, move || {
            Ok(session::dump_idle_session(&inner, repl))
        })?;
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
