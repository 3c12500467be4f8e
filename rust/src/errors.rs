//! Host failures, mapped to Python exceptions in one place.
//!
//! The exception classes are defined once, in `codeact.exceptions` (root `CodeActError`);
//! the native module imports them. Script mistakes never become exceptions here: they
//! come back as `Raised` steps.

use pyo3::import_exception;
use pyo3::prelude::*;

import_exception!(codeact.exceptions, CodeRuntimeError);
import_exception!(codeact.exceptions, SnapshotError);
import_exception!(codeact.exceptions, ValueConversionError);
import_exception!(codeact.runtime._seam, ReplayDivergenceError);

/// A failure on the host side of the boundary.
#[derive(Debug)]
pub enum HostError {
    /// Snapshot bytes that cannot be loaded (truncated, altered, foreign, other version or key).
    Snapshot(String),
    /// An interpreter bug or a host misconfiguration found while running.
    Internal(String),
    /// A host value that cannot cross into the script.
    Conversion(String),
    /// Invalid runtime configuration (raised as `ValueError` when the runtime is built).
    Config(String),
    /// The script's nondeterministic requests no longer match the journal being replayed.
    ReplayDivergence(String),
}

impl From<HostError> for PyErr {
    fn from(err: HostError) -> Self {
        match err {
            HostError::Snapshot(msg) => SnapshotError::new_err(format!("snapshot error: {msg}")),
            HostError::Internal(msg) => {
                CodeRuntimeError::new_err(format!("interpreter error: {msg}"))
            }
            HostError::Conversion(msg) => ValueConversionError::new_err(msg),
            HostError::Config(msg) => pyo3::exceptions::PyValueError::new_err(msg),
            HostError::ReplayDivergence(msg) => ReplayDivergenceError::new_err(msg),
        }
    }
}
