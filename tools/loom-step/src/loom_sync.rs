//! The `sync` module `rust/src/slot.rs` sees under `--cfg loom`: loom's primitives, plus
//! what loom lacks.
//!
//! - `Condvar::wait_while` / `wait_timeout_while` (same contract as the standard library's:
//!   test the condition under the lock, sleep while it holds).
//! - Time. Loom has no clock and its timed waits never time out, so the model has one:
//!   every `Instant::elapsed()` is a step of 25 µs (the slot's 50 µs spin phase therefore
//!   makes exactly one `is_done()` check), until a test's timer thread calls [`expire`];
//!   from then on every deadline has passed, and a timed wait that finds the condition
//!   still holding returns "timed out" instead of sleeping. A timed waiter already asleep
//!   when the timer fires is woken only by the producer's notify: the outcome the real
//!   timeout would give there (wake, re-test, return) is the one the schedule where the
//!   timer fires just before it sleeps gives, which the model explores.

use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::sync::LockResult;
use std::time::Duration;

pub use loom::hint::spin_loop;
pub use loom::sync::Mutex;
pub use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, MutexGuard};

thread_local! {
    // Loom runs an execution's threads as coroutines on one OS thread, so this is one clock
    // per execution (loom's own `lazy_static` kept stale objects across executions). Never
    // dropped by the thread-local itself: a clock left by a failed execution is leaked, since
    // loom objects cannot be dropped outside their execution.
    static EXPIRED: RefCell<Option<ManuallyDrop<Arc<AtomicBool>>>> = const { RefCell::new(None) };
}

/// Starts this execution's clock (call first thing inside `loom::model`).
pub fn start_clock() {
    let clock = Arc::new(AtomicBool::new(false));
    EXPIRED.with(|c| *c.borrow_mut() = Some(ManuallyDrop::new(clock)));
}

/// Stops this execution's clock (call last thing inside `loom::model`).
pub fn stop_clock() {
    if let Some(clock) = EXPIRED.with(|c| c.borrow_mut().take()) {
        drop(ManuallyDrop::into_inner(clock));
    }
}

fn clock() -> Arc<AtomicBool> {
    EXPIRED.with(|c| Arc::clone(c.borrow().as_ref().expect("start_clock() first")))
}

/// Makes every deadline of this execution pass (a test's timer thread calls it).
pub fn expire() {
    clock().store(true, Ordering::SeqCst);
}

fn expired() -> bool {
    clock().load(Ordering::SeqCst)
}

/// A model clock reading: 25 µs per `elapsed()` call until [`expire`], then `Duration::MAX`.
pub struct Instant {
    reads: Cell<u32>,
}

impl Instant {
    pub fn now() -> Self {
        Self {
            reads: Cell::new(0),
        }
    }

    pub fn elapsed(&self) -> Duration {
        if expired() {
            return Duration::MAX;
        }
        self.reads.set(self.reads.get() + 1);
        Duration::from_micros(25 * u64::from(self.reads.get()))
    }
}

/// `std::sync::WaitTimeoutResult` (which cannot be built outside std).
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// Loom's condition variable with the standard library's `*_while` methods.
pub struct Condvar(loom::sync::Condvar);

impl Default for Condvar {
    fn default() -> Self {
        Self::new()
    }
}

impl Condvar {
    pub fn new() -> Self {
        Self(loom::sync::Condvar::new())
    }

    pub fn notify_all(&self) {
        self.0.notify_all();
    }

    pub fn wait_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.0.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
        Ok(guard)
    }

    pub fn wait_timeout_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        loop {
            if !condition(&mut *guard) {
                return Ok((guard, WaitTimeoutResult(false)));
            }
            if dur.is_zero() || expired() {
                return Ok((guard, WaitTimeoutResult(true)));
            }
            guard = self.0.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}
