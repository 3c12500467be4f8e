//! Loom model of codeact's step hand-off (`rust/src/slot.rs`, behind `StepTicket`).
//!
//! Built with `RUSTFLAGS="--cfg loom"` (`make loom`), this crate compiles the product's
//! `rust/src/slot.rs` itself, unchanged, with `loom_sync` standing in for the standard
//! library's mutex, condition variable, atomics and clock: loom then runs the real `set`,
//! `is_done`, `wait` and `take` under every interleaving (up to `LOOM_MAX_PREEMPTIONS`
//! preemptions). `old_slot` is 0.1.0's ordering, kept to show the model catches its race.
//! Not a member of the product's workspace: `make build` and the wheel never see it.

pub mod loom_sync;
pub mod old_slot;

#[path = "../../../rust/src/slot.rs"]
pub mod slot;

use std::time::Duration;

/// What `StepTicket` needs from a slot; implemented by the product's slot and by 0.1.0's.
pub trait HandOff<T>: Send + Sync {
    fn fresh() -> Self;
    fn set(&self, value: T);
    fn is_done(&self) -> bool;
    fn wait(&self, timeout: Option<Duration>) -> bool;
    fn take(&self) -> Option<T>;
}

impl<T: Send> HandOff<T> for slot::Slot<T> {
    fn fresh() -> Self {
        slot::Slot::new()
    }
    fn set(&self, value: T) {
        slot::Slot::set(self, value)
    }
    fn is_done(&self) -> bool {
        slot::Slot::is_done(self)
    }
    fn wait(&self, timeout: Option<Duration>) -> bool {
        slot::Slot::wait(self, timeout)
    }
    fn take(&self) -> Option<T> {
        slot::Slot::take(self)
    }
}

/// Why `StepTicket.result()` refused (the two `CodeRuntimeError`s of `rust/src/py_api.rs`).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// "the step has not finished; wait() for it first"
    NotFinished,
    /// "this StepTicket's result was already taken"
    AlreadyTaken,
}

/// `StepTicket.wait(timeout)` as `py_api.rs` writes it: the flag first, then the slot's wait
/// (the GIL release around it changes nothing for the hand-off).
pub fn ticket_wait<T, H: HandOff<T>>(slot: &H, timeout: Option<Duration>) -> bool {
    if slot.is_done() {
        return true;
    }
    slot.wait(timeout)
}

/// `StepTicket.result()` as `py_api.rs` writes it: refuse before the flag, then take once.
pub fn ticket_result<T, H: HandOff<T>>(slot: &H) -> Result<T, Refused> {
    if !slot.is_done() {
        return Err(Refused::NotFinished);
    }
    slot.take().ok_or(Refused::AlreadyTaken)
}
