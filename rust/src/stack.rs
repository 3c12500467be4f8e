//! The GIL and stack policy: every entry into Monty goes through [`run_interpreter`] (or
//! its twin on a step worker, [`submit_interpreter`]).
//!
//! Inputs are copied into Rust before the call; the GIL is released while Monty runs so
//! other Python threads (and other scripts) proceed in parallel.
//!
//! Monty guards recursion (Python frames and nested data alike) with the script's
//! recursion limit, but each guarded level still costs host stack. Python threads may
//! have small stacks (musl: 128 KiB), so before entering Monty we make sure the current
//! thread has room for the deepest recursion the limit allows. When it does not, the
//! advance runs on a separate stack segment of that size. On Unix the segment is kept
//! per thread and reused, so only a thread's first short-of-stack advance pays for the
//! mapping (measured: about 20 µs for 4 MiB, 35 µs for 22 MiB); elsewhere `stacker`
//! maps a fresh segment each time. The check itself costs a few nanoseconds.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::slot::Slot;

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

/// Runs `f` with at least `needed` bytes of stack: on the current stack when it has
/// room, else on a (cached, on Unix) separate segment.
pub fn with_stack<R>(needed: usize, f: impl FnOnce() -> R) -> R {
    if stacker::remaining_stack().is_some_and(|left| left >= needed) {
        return f();
    }
    #[cfg(unix)]
    {
        segment::run_on_segment(needed, f)
    }
    #[cfg(not(unix))]
    {
        stacker::grow(needed, f)
    }
}

/// Runs `f` (an entry into the interpreter: an advance, a load, a dump) with the GIL
/// released and at least `needed` bytes of stack ([`stack_needed`] of the recursion limit
/// for an advance). One of the two entries into Monty, with [`submit_interpreter`].
pub fn run_interpreter<T, F>(py: Python<'_>, needed: usize, f: F) -> PyResult<T>
where
    F: FnOnce() -> Result<T, HostError> + Send,
    T: Send,
{
    py.detach(move || with_stack(needed, f))
        .map_err(PyErr::from)
}

/// Like [`run_interpreter`], on a native step worker that never takes the GIL: the result
/// lands in the returned slot (`StepTicket`).
pub fn submit_interpreter<T, F>(needed: usize, f: F) -> Arc<Slot<Result<T, HostError>>>
where
    F: FnOnce() -> Result<T, HostError> + Send + 'static,
    T: Send + 'static,
{
    crate::worker::submit(move || with_stack(needed, f))
}

#[cfg(unix)]
mod segment {
    use std::cell::RefCell;
    use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

    /// A mapped stack with a guard page below it (stacks grow down on every platform
    /// Monty wheels target).
    struct Segment {
        map: *mut u8,
        total: usize,
        page: usize,
    }

    impl Segment {
        fn new(size: usize) -> Option<Segment> {
            // SAFETY: plain anonymous mapping; checked for failure.
            unsafe {
                let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE))
                    .ok()
                    .filter(|p| *p > 0)?;
                let usable = size.checked_add(page - 1)? / page * page;
                let total = usable.checked_add(page)?;
                let map = libc::mmap(
                    std::ptr::null_mut(),
                    total,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANON,
                    -1,
                    0,
                );
                if map == libc::MAP_FAILED {
                    return None;
                }
                let map = map.cast::<u8>();
                if libc::mprotect(
                    map.add(page).cast(),
                    usable,
                    libc::PROT_READ | libc::PROT_WRITE,
                ) != 0
                {
                    libc::munmap(map.cast(), total);
                    return None;
                }
                Some(Segment { map, total, page })
            }
        }

        fn usable(&self) -> usize {
            self.total - self.page
        }
    }

    impl Drop for Segment {
        fn drop(&mut self) {
            // SAFETY: the mapping was created by `new` and is no longer in use.
            unsafe {
                libc::munmap(self.map.cast(), self.total);
            }
        }
    }

    thread_local! {
        static CACHE: RefCell<Option<Segment>> = const { RefCell::new(None) };
    }

    pub fn run_on_segment<R>(needed: usize, f: impl FnOnce() -> R) -> R {
        // Take the cached segment out while it runs, so a nested call maps its own.
        let cached = CACHE
            .with(|c| c.borrow_mut().take())
            .filter(|s| s.usable() >= needed);
        let Some(segment) = cached.or_else(|| Segment::new(needed)) else {
            return stacker::grow(needed, f);
        };
        // SAFETY: the segment is mapped read-write for `usable()` bytes above its guard
        // page and outlives the call; the callback never unwinds across `on_stack` (panics
        // are caught and resumed after switching back).
        let outcome = unsafe {
            psm::on_stack(segment.map.add(segment.page), segment.usable(), || {
                catch_unwind(AssertUnwindSafe(f))
            })
        };
        CACHE.with(|c| *c.borrow_mut() = Some(segment));
        match outcome {
            Ok(r) => r,
            Err(panic) => resume_unwind(panic),
        }
    }
}
