//! The GIL and stack policy: every entry into Monty goes through [`run_interpreter`].
//!
//! Inputs are copied into Rust before the call; the GIL is released while Monty runs so
//! other Python threads (and other scripts) proceed in parallel.
//!
//! Monty guards recursion (Python frames and nested data alike) with the script's
//! recursion limit, but each guarded level still costs host stack. Python threads may
//! have small stacks (musl: 128 KiB), so before entering Monty we make sure the
//! current thread has room for the deepest recursion the limit allows; when it does not,
//! the advance runs on a fresh stack segment of that size (`stacker`). The check is a
//! few nanoseconds; the segment is only allocated when needed.

use pyo3::prelude::*;

use crate::errors::HostError;

/// Host stack reserved per allowed recursion level, in bytes (measured: deep data
/// recursion at 10,000 levels overflows a 4 MiB stack, fits in 8 MiB).
const STACK_PER_LEVEL: usize = 2 * 1024;
/// Fixed headroom on top, in bytes (parser, compiler, conversion).
const STACK_BASE: usize = 2 * 1024 * 1024;

/// Host stack, in bytes, an advance needs for a recursion limit of `depth` frames.
pub fn stack_needed(depth: usize) -> usize {
    STACK_BASE + depth.saturating_mul(STACK_PER_LEVEL)
}

/// Runs `f` (an advance of the interpreter) with the GIL released and at least
/// `stack_needed(depth)` bytes of stack.
pub fn run_interpreter<T, F>(py: Python<'_>, depth: usize, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T, HostError> + Send,
    T: Send,
{
    let needed = stack_needed(depth);
    py.detach(move || stacker::maybe_grow(needed, needed, f))
        .map_err(PyErr::from)
}
