//! The GIL and stack policy: every entry into Monty goes through [`run_interpreter`].
//!
//! Inputs are copied into Rust before the call; the GIL is released while Monty runs so
//! other Python threads (and other scripts) proceed in parallel.

use pyo3::prelude::*;

use crate::errors::HostError;

/// Runs `f` (an advance of the interpreter) with the GIL released.
pub fn run_interpreter<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T, HostError> + Send,
    T: Send,
{
    py.detach(f).map_err(PyErr::from)
}
