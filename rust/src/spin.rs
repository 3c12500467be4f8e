//! When a thread of the step hand-off may busy-wait: the spin policy of the waiter
//! (`StepTicket.wait`, [`wait`]) and of the step workers' linger (`crate::worker`).
//!
//! Spinning pays only while the thread it waits for is running on another core: then the
//! hand-off costs a cache line instead of two thread wake-ups. When the cores are busy
//! (other processes: a co-located service, CI, a busy host; or many sessions of this one),
//! a spinning thread takes CPU time from the very thread it waits for, and the hand-off
//! degrades far more than a plain loop does (issue 54: 5.6x a plain Python agent's tool call
//! with two busy-loop processes on both cores, 1.56x on a quiet machine). So:
//!
//! - **Bounded by the cores the process may use** ([`cores`]: the affinity mask and the
//!   cgroup quota, `std::thread::available_parallelism`). At most `cores - 1` workers
//!   linger spinning at once (one core stays for the event loop); a waiter spins only while
//!   fewer than `cores` threads spin, and never on one core.
//! - **Off while the cores are contended.** A spinning thread reads the clock every turn; a
//!   gap of more than [`PREEMPTED`] between two turns means it was taken off its core for
//!   another runnable thread. Then no thread of the process spins for [`CONTENDED_FOR`]:
//!   waiters sleep at once and workers park after each job, so the hand-off costs wake-ups
//!   but burns nothing; past that the next spin probes again.
//! - **Off after failed spins.** A waiter whose spins kept missing the result (steps longer
//!   than the spin) stops spinning except for one probe in [`PROBE_EVERY`] waits, until a
//!   spin finds the result again.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::slot::Slot;

/// How long a waiter spins before sleeping on the slot's condition variable.
pub const WAITER_SPIN: Duration = Duration::from_micros(50);
/// A gap between two turns of a spin longer than this: the thread was preempted.
const PREEMPTED: Duration = Duration::from_micros(40);
/// How long no thread spins after a preemption was seen, in nanoseconds.
const CONTENDED_FOR: u64 = 20_000_000;
/// Failed waiter spins in a row after which waiters stop spinning.
const FAILED_SPINS: u32 = 8;
/// While waiters do not spin for failed spins, one wait in this many probes with a spin.
const PROBE_EVERY: u32 = 16;

/// Threads spinning now (waiters and lingering workers).
static SPINNING: AtomicUsize = AtomicUsize::new(0);
/// Until when (nanoseconds since [`epoch`]) spinning is off, for a preemption seen.
static CONTENDED_UNTIL: AtomicU64 = AtomicU64::new(0);
/// Waiter spins in a row that ended without the result.
static MISSES: AtomicU32 = AtomicU32::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

/// The cores this process may run on (affinity mask, cgroup quota), at least 1; read once.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether spinning is off for a preemption seen within [`CONTENDED_FOR`].
pub fn contended() -> bool {
    now_ns(Instant::now()) < CONTENDED_UNTIL.load(Ordering::Relaxed)
}

/// Who asks to spin.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A thread waiting for a step's result (the caller, GIL released).
    Waiter,
    /// A step worker lingering for its next job.
    Worker,
}

/// The right to spin; the count of spinning threads drops with it.
pub struct Permit {
    last: Instant,
}

impl Permit {
    /// One turn of a spin: false when the thread was preempted since the last turn (then
    /// spinning is off for every thread of the process for a while; stop now).
    /// Also false once another thread saw a preemption.
    pub fn turn(&mut self, now: Instant) -> bool {
        let gap = now.saturating_duration_since(self.last);
        self.last = now;
        let at = now_ns(now);
        if gap > PREEMPTED {
            CONTENDED_UNTIL.store(at + CONTENDED_FOR, Ordering::Relaxed);
            return false;
        }
        at >= CONTENDED_UNTIL.load(Ordering::Relaxed)
    }

    /// Starts the next spin now (after the spinning thread ran a job); returns now.
    pub fn restart(&mut self) -> Instant {
        self.last = Instant::now();
        self.last
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        SPINNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A permit to spin, or None when spinning cannot pay now (see the module's rules).
pub fn permit(role: Role) -> Option<Permit> {
    let cores = cores();
    let limit = match role {
        Role::Worker => cores - 1,
        Role::Waiter if cores > 1 => cores,
        Role::Waiter => 0,
    };
    if limit == 0 || contended() {
        return None;
    }
    if SPINNING.fetch_add(1, Ordering::Relaxed) >= limit {
        SPINNING.fetch_sub(1, Ordering::Relaxed);
        return None;
    }
    Some(Permit {
        last: Instant::now(),
    })
}

/// Waits for `slot` up to `timeout` (forever when None), spinning first only when the
/// policy allows; whether the job finished.
pub fn wait<T>(slot: &Slot<T>, timeout: Option<Duration>) -> bool {
    let start = Instant::now();
    let misses = MISSES.load(Ordering::Relaxed);
    let probe = misses < FAILED_SPINS || misses.is_multiple_of(PROBE_EVERY);
    let mut permit = if probe { permit(Role::Waiter) } else { None };
    if permit.is_none() {
        if misses >= FAILED_SPINS {
            MISSES.fetch_add(1, Ordering::Relaxed); // counts towards the next probe
        }
        return slot.wait_spinning(timeout, &start, || false);
    }
    let mut missed = false;
    let done = slot.wait_spinning(timeout, &start, || {
        let Some(p) = permit.as_mut() else {
            return false;
        };
        let now = Instant::now();
        if p.turn(now) && now.saturating_duration_since(start) < WAITER_SPIN {
            return true;
        }
        missed = true;
        permit = None;
        false
    });
    if missed {
        MISSES.fetch_add(1, Ordering::Relaxed);
    } else if misses != 0 {
        MISSES.store(0, Ordering::Relaxed);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_waiter_gets_the_result_with_or_without_spinning() {
        for delay in [Duration::ZERO, Duration::from_millis(2)] {
            let slot = Arc::new(Slot::new());
            let setter = Arc::clone(&slot);
            let t = std::thread::spawn(move || {
                std::thread::sleep(delay);
                setter.set(7u32);
            });
            assert!(wait(&slot, None));
            assert_eq!(slot.take(), Some(7));
            t.join().unwrap();
        }
        let empty: Slot<u32> = Slot::new();
        assert!(!wait(&empty, Some(Duration::from_millis(1))));
    }

    #[test]
    fn permits_are_bounded_by_the_cores() {
        let limit = cores().saturating_sub(1);
        let held: Vec<_> = (0..limit + 3)
            .filter_map(|_| permit(Role::Worker))
            .collect();
        // Other tests may hold permits meanwhile: never more than the limit.
        assert!(held.len() <= limit);
    }

    #[test]
    fn a_preempted_turn_turns_spinning_off() {
        let Some(mut p) = permit(Role::Waiter) else {
            return; // one core, or contended already: nothing to check
        };
        let later = p.last + PREEMPTED * 2;
        assert!(!p.turn(later));
        drop(p);
        assert!(contended());
        assert!(permit(Role::Waiter).is_none());
        assert!(permit(Role::Worker).is_none());
        CONTENDED_UNTIL.store(0, Ordering::Relaxed);
    }
}
