//! The step hand-off: a one-shot result slot filled by a worker and waited on by Python.
//!
//! This file is also compiled, unchanged, by the loom model in `tools/loom-step` (with
//! `--cfg loom`): there `sync` is that crate's `loom_sync`, which supplies loom's mutex,
//! condition variable and atomics and a model clock. Keep every synchronisation primitive
//! and every clock read behind `sync`.

#[cfg(loom)]
use crate::loom_sync as sync;

#[cfg(not(loom))]
mod sync {
    /// One turn of a waiter's spin: nothing. A `pause` instruction here made the hand-off
    /// several times slower on virtual machines: a vCPU looping on `pause` is taken for a
    /// waiter on a lock held by a descheduled vCPU (pause-loop exiting), and the exit costs
    /// microseconds (measured here: a tool round trip through a worker at 7.1 µs with it,
    /// 3.7 µs without, against 3.1 µs in place; issue 21). Each turn reads the clock, which
    /// paces the loop, and the spin is bounded by `SPIN`. (The loom model yields here.)
    #[inline(always)]
    pub fn spin_loop() {}
    pub use std::sync::atomic::{AtomicBool, Ordering};
    pub use std::sync::{Condvar, Mutex};
    pub use std::time::Instant;
}

use std::time::Duration;

use sync::{AtomicBool, Condvar, Instant, Mutex, Ordering};

/// How long [`Slot::wait`] spins before sleeping on the condition variable.
#[cfg_attr(not(loom), allow(dead_code))] // the product waits through `crate::spin::wait`
const SPIN: Duration = Duration::from_micros(50);

/// The result of one submitted job, filled in once.
///
/// Hand-off protocol: the worker stores the value and raises `done` while holding the
/// lock; `done` is never lowered. So whoever sees `done` (by the atomic or under the lock)
/// finds the value there until it is taken, and a waiter that wakes from the condition
/// variable tests the same flag `result()` tests. (0.1.0 raised `done` after releasing
/// the lock while waiters woke on the value: `wait()` could return True before `done`
/// was set, and `result()` then refused.) A waiter about to sleep raises `sleeping` under
/// the lock, and the worker reads it under the lock: it wakes waiters only when one may be
/// asleep, so the usual hand-off (the waiter still spinning) makes no `futex` system call.
/// Model-checked by `make loom`.
pub struct Slot<T> {
    done: AtomicBool,
    sleeping: AtomicBool,
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            done: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    /// Fills the slot (once) and wakes every waiter that went to sleep.
    pub fn set(&self, value: T) {
        let mut guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        *guard = Some(value);
        self.done.store(true, Ordering::Release);
        // Read under the lock: a waiter raises it under the lock before it sleeps, so either
        // it is seen here or that waiter sees `done` before it sleeps.
        let wake = self.sleeping.load(Ordering::Relaxed);
        drop(guard);
        if wake {
            self.ready.notify_all();
        }
    }

    /// Whether the job has finished.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits up to `timeout` (forever when None); returns whether the job finished. The
    /// loom model's wait; the product waits through `crate::spin::wait`, which decides the
    /// spin phase of [`wait_spinning`](Self::wait_spinning).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        self.wait_spinning(timeout, &start, || start.elapsed() < SPIN)
    }

    /// [`wait`](Self::wait) with the spin phase decided by the caller: spins while `spin`
    /// says so and the job is not done, then sleeps; `timeout` counts from `start`. The
    /// product's waiter (`crate::spin::wait`) spins only while spinning can pay: bounded
    /// by the cores the process may use, and not at all while other threads or processes
    /// keep them busy.
    pub fn wait_spinning(
        &self,
        timeout: Option<Duration>,
        start: &Instant,
        mut spin: impl FnMut() -> bool,
    ) -> bool {
        while spin() {
            if self.is_done() {
                return true;
            }
            sync::spin_loop();
        }
        let guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        self.sleeping.store(true, Ordering::Relaxed);
        // The flag, not the value: a value already taken by `take` must not make a
        // waiter sleep forever, and a value present means the flag is up (set under lock).
        let pending = |_: &mut Option<T>| !self.done.load(Ordering::Acquire);
        match timeout {
            None => {
                let _guard = self
                    .ready
                    .wait_while(guard, pending)
                    .unwrap_or_else(|e| e.into_inner());
                true
            }
            Some(t) => {
                let left = t.saturating_sub(start.elapsed());
                let (_guard, result) = self
                    .ready
                    .wait_timeout_while(guard, left, pending)
                    .unwrap_or_else(|e| e.into_inner());
                !result.timed_out()
            }
        }
    }

    /// Takes the value once the job is done (None before, or when already taken).
    pub fn take(&self) -> Option<T> {
        self.value.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}
