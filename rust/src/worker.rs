//! Native step workers: interpreter advances run on threads that never take the GIL.
//!
//! The Python side submits an advance and gets a [`Slot`] back; it waits on it with the GIL
//! released (spinning briefly first, since most advances take microseconds) and builds the
//! step object itself. Compared with a Python thread pool this removes every GIL hand-off
//! from the round trip. Workers have large stacks, so the stack policy's fast path always
//! holds on them. After a `fork`, the child starts its own workers on first use.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, unbounded};

use crate::errors::HostError;

/// Stack of each worker thread, in bytes (virtual; pages are touched only when used). It
/// covers `stack_needed(RECURSION_CEILING)` with room to spare.
const WORKER_STACK: usize = 64 * 1024 * 1024;
/// How long a waiter spins before sleeping on the condition variable.
const SPIN: Duration = Duration::from_micros(50);
/// How long a worker keeps polling for the next job before parking.
const WORKER_LINGER: Duration = Duration::from_micros(250);

type Job = Box<dyn FnOnce() + Send>;

static POOL: Mutex<Option<(u32, Sender<Job>)>> = Mutex::new(None);

fn sender() -> Sender<Job> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if let Some((owner, tx)) = pool.as_ref()
        && *owner == pid
    {
        return tx.clone();
    }
    let (tx, rx) = unbounded::<Job>();
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 16)
        * 4;
    for i in 0..threads {
        let rx = rx.clone();
        std::thread::Builder::new()
            .name(format!("codeact-step-{i}"))
            .stack_size(WORKER_STACK)
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                    // An agent resumes the same script again within microseconds of a
                    // step: stay awake briefly so the next step skips a thread wake-up.
                    let idle = Instant::now();
                    while idle.elapsed() < WORKER_LINGER {
                        match rx.try_recv() {
                            Ok(next) => {
                                next();
                                continue;
                            }
                            Err(crossbeam_channel::TryRecvError::Disconnected) => return,
                            Err(crossbeam_channel::TryRecvError::Empty) => std::hint::spin_loop(),
                        }
                    }
                }
            })
            .expect("cannot start a codeact step worker thread");
    }
    *pool = Some((pid, tx.clone()));
    tx
}

/// The result of one submitted job, filled in once.
///
/// Hand-off protocol: the worker stores the value and raises `done` while holding the
/// lock; `done` is never lowered. So whoever sees `done` (by the atomic or under the lock)
/// finds the value there until it is taken, and a waiter that wakes from the condition
/// variable tests the same flag `result()` tests. (0.1.0 raised `done` after releasing
/// the lock while waiters woke on the value: `wait()` could return True before `done`
/// was set, and `result()` then refused.)
pub struct Slot<T> {
    done: AtomicBool,
    value: Mutex<Option<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Self {
            done: AtomicBool::new(false),
            value: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    /// Fills the slot (once) and wakes every waiter.
    pub fn set(&self, value: T) {
        let mut guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
        *guard = Some(value);
        self.done.store(true, Ordering::Release);
        drop(guard);
        self.ready.notify_all();
    }

    /// Whether the job has finished.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Waits up to `timeout` (forever when None); returns whether the job finished.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let start = Instant::now();
        while start.elapsed() < SPIN {
            if self.is_done() {
                return true;
            }
            std::hint::spin_loop();
        }
        let guard = self.value.lock().unwrap_or_else(|e| e.into_inner());
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

/// Runs `job` on a worker; its result lands in the returned slot. A panic that escapes the
/// job becomes a `HostError::Internal` (the worker lives on).
pub fn submit<R: Send + 'static>(
    job: impl FnOnce() -> Result<R, HostError> + Send + 'static,
) -> Arc<Slot<Result<R, HostError>>> {
    let slot = Arc::new(Slot::new());
    let out = Arc::clone(&slot);
    let task: Job = Box::new(move || {
        let result = catch_unwind(AssertUnwindSafe(job))
            .unwrap_or_else(|_| Err(HostError::Internal("a step worker panicked".to_string())));
        out.set(result);
    });
    if let Err(err) = sender().send(task) {
        // The workers are gone (cannot happen while the process lives): run in place.
        (err.into_inner())();
    }
    slot
}
