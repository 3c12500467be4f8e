//! 0.1.0's step hand-off (codeact before the Monty 1.4 port), kept only so the model can
//! show it catches the race issue 10 reported: `set` raised `done` after releasing the
//! lock, and waiters slept until the *value* appeared, so `wait()` could return true while
//! `result()` (which tests `done`) still refused. Same primitives as the real slot.
//!
//! `HalfFixedSlot` is the fix done by halves: waiters test the flag, as now, but `set`
//! still raises it after releasing the lock. The model finds its lost wake-up (a waiter
//! that tested the flag under the lock sleeps after the notify went out): both halves of
//! the fix are needed.

use std::time::Duration;

use crate::HandOff;
use crate::loom_sync::{self as sync, AtomicBool, Condvar, Instant, Mutex, Ordering};

const SPIN: Duration = Duration::from_micros(50);

pub struct OldSlot<T> {
    done: AtomicBool,
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T: Send> HandOff<T> for OldSlot<T> {
    fn fresh() -> Self {
        Self {
            done: AtomicBool::new(false),
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    fn set(&self, value: T) {
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
        self.done.store(true, Ordering::Release);
        self.ready.notify_all();
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        while start.elapsed() < SPIN {
            if self.is_done() {
                return true;
            }
            sync::spin_loop();
        }
        let guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        let pending = |v: &mut Option<T>| v.is_none();
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

    fn take(&self) -> Option<T> {
        self.value.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// 0.1.0's `set` with today's waiter (tests the flag): loses a wake-up.
pub struct HalfFixedSlot<T>(OldSlot<T>);

impl<T: Send> HandOff<T> for HalfFixedSlot<T> {
    fn fresh() -> Self {
        Self(OldSlot::fresh())
    }

    fn set(&self, value: T) {
        self.0.set(value);
    }

    fn is_done(&self) -> bool {
        self.0.is_done()
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        let slot = &self.0;
        let start = Instant::now();
        while start.elapsed() < SPIN {
            if slot.is_done() {
                return true;
            }
            sync::spin_loop();
        }
        let guard = slot.value.lock().unwrap_or_else(|e| e.into_inner());
        let pending = |_: &mut Option<T>| !slot.done.load(Ordering::Acquire);
        match timeout {
            None => {
                let _guard = slot
                    .ready
                    .wait_while(guard, pending)
                    .unwrap_or_else(|e| e.into_inner());
                true
            }
            Some(t) => {
                let left = t.saturating_sub(start.elapsed());
                let (_guard, result) = slot
                    .ready
                    .wait_timeout_while(guard, left, pending)
                    .unwrap_or_else(|e| e.into_inner());
                !result.timed_out()
            }
        }
    }

    fn take(&self) -> Option<T> {
        self.0.take()
    }
}
