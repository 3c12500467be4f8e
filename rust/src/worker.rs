//! Native step workers: interpreter advances run on threads that never take the GIL.
//!
//! The Python side submits an advance and gets a [`Slot`] back; it waits on it with the GIL
//! released (spinning briefly first when spinning can pay, since most advances take
//! microseconds: `crate::spin`) and builds the
//! step object itself. Compared with a Python thread pool this removes every GIL hand-off
//! from the round trip. Workers have large stacks, so the stack policy's fast path always
//! holds on them. After a `fork`, the child starts its own workers on first use.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, unbounded};

use crate::errors::HostError;
pub use crate::slot::Slot;
use crate::spin::{self, Role};

/// Stack of each worker thread, in bytes (virtual; pages are touched only when used). It
/// covers `stack_needed(RECURSION_CEILING)` with room to spare.
const WORKER_STACK: usize = 64 * 1024 * 1024;
/// How long a worker busy-polls for the next job after one ends.
const WORKER_SPIN: Duration = Duration::from_micros(250);
/// How long a worker keeps polling for the next job before parking: past `WORKER_SPIN` it
/// yields its CPU between polls, so a runnable thread (a database server on the same host,
/// the caller waiting for its store) is not kept off it. A parked worker costs a wake-up on
/// the next job, which on a virtual machine is an inter-processor interrupt to an idle CPU
/// on each side (measured here: about 300 us per advance when a PostgreSQL journal write,
/// about 0.3-0.6 ms per record, separates two advances; a few microseconds while lingering).
const WORKER_LINGER: Duration = Duration::from_micros(1500);

type Job = Box<dyn FnOnce() + Send>;

/// Where a lingering worker takes its next job from: a job handed to it directly, without
/// the channel. (Through the channel, each job would also wake a parked worker whenever one
/// is parked, a `futex` call on the submitting side and a third runnable thread on two
/// CPUs, only for it to find the job already taken.)
#[derive(Default)]
struct Mailbox {
    full: AtomicBool,
    job: Mutex<Option<Job>>,
}

/// The mailboxes of one pool's workers lingering now (the one that lingered last is taken
/// first: its caches are the warmest). Each pool has its own: a `fork` child starts a pool
/// of its own and never takes a lock a parent's worker may have held at the fork.
type Lingering = Arc<Mutex<Vec<Arc<Mailbox>>>>;

/// Hands `job` to a lingering worker; gives it back when none lingers.
fn hand_to_lingering(lingering: &Lingering, job: Job) -> Result<(), Job> {
    let mut idle = lingering.lock().unwrap_or_else(|e| e.into_inner());
    match idle.pop() {
        Some(mailbox) => {
            // Filled before the list's lock is released: a worker that finds its mailbox
            // gone from the list finds the job in it.
            *mailbox.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
            mailbox.full.store(true, Ordering::Release);
            Ok(())
        }
        None => Err(job),
    }
}

/// A worker's linger after a job: takes jobs from its mailbox (listed in its pool's `Lingering`) or
/// the channel, busy-polling for `WORKER_SPIN` and yielding its CPU between polls until
/// `WORKER_LINGER` passes with no job; then it leaves the list and returns, to park on the
/// channel. It lingers only with a spin permit (`crate::spin`: at most one worker per core
/// but one, none while the cores are contended) and stops at the first sign of contention.
fn linger(rx: &Receiver<Job>, mailbox: &Arc<Mailbox>, lingering: &Lingering) {
    let list = || lingering.lock().unwrap_or_else(|e| e.into_inner());
    // Takes the mailbox off the list; false when a submitter took it off first (then its
    // job is in the mailbox: it was filled before the list's lock was released).
    let unlist = || {
        let mut idle = list();
        let at = idle.iter().position(|m| Arc::ptr_eq(m, mailbox));
        at.map(|at| idle.swap_remove(at)).is_some()
    };
    let run_mailbox = || {
        let job = mailbox.job.lock().unwrap_or_else(|e| e.into_inner()).take();
        mailbox.full.store(false, Ordering::Relaxed);
        if let Some(job) = job {
            job();
        }
    };
    // Lingering is spinning: only with a permit (bounded by the cores, off while they are
    // contended; crate::spin). Without one the worker parks at once.
    let Some(mut permit) = spin::permit(Role::Worker) else {
        return;
    };
    list().push(Arc::clone(mailbox));
    let mut idle = Instant::now();
    loop {
        if mailbox.full.load(Ordering::Acquire) {
            run_mailbox();
            idle = permit.restart();
            list().push(Arc::clone(mailbox)); // the submitter took it off the list
            continue;
        }
        match rx.try_recv() {
            Ok(next) => {
                // Off the list while it runs a job from the channel (which may be long): a
                // step handed over meanwhile goes to another worker, not behind this job.
                if !unlist() {
                    run_mailbox(); // handed over just now: it runs first
                }
                next();
                idle = permit.restart();
                list().push(Arc::clone(mailbox));
                continue;
            }
            Err(TryRecvError::Disconnected) => {}
            Err(TryRecvError::Empty) => {
                // A turn that finds the worker was kept off its core (by a yield too: then
                // another thread wanted this core) ends every spin of the process a while.
                let now = Instant::now();
                if permit.turn(now) {
                    let waited = now.saturating_duration_since(idle);
                    if waited < WORKER_SPIN {
                        // No `pause` here, as in the slot's spin (slot.rs): on a virtual
                        // machine a loop of them exits to the hypervisor, and the next job
                        // waits microseconds.
                        continue;
                    }
                    if waited < WORKER_LINGER {
                        std::thread::yield_now();
                        continue;
                    }
                }
            }
        }
        // Leave the list and park; a job handed over meanwhile runs first.
        if unlist() {
            return;
        }
        run_mailbox();
        idle = permit.restart();
        list().push(Arc::clone(mailbox));
    }
}

/// The process's step workers: the process they belong to, their channel and their
/// lingering list.
static POOL: Mutex<Option<(u32, Sender<Job>, Lingering)>> = Mutex::new(None);

fn pool() -> (Sender<Job>, Lingering) {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pid = crate::process::process_id();
    if let Some((owner, tx, lingering)) = pool.as_ref()
        && *owner == pid
    {
        return (tx.clone(), Arc::clone(lingering));
    }
    let (tx, rx) = unbounded::<Job>();
    let lingering: Lingering = Arc::default();
    // Bounded by the cores the process may use (affinity mask, cgroup quota): a worker per
    // step in flight, four per core, since a step may sleep (a script's `time.sleep`).
    let threads = spin::cores().clamp(2, 16) * 4;
    for i in 0..threads {
        let rx = rx.clone();
        let list = Arc::clone(&lingering);
        std::thread::Builder::new()
            .name(format!("codeact-step-{i}"))
            .stack_size(WORKER_STACK)
            .spawn(move || {
                let mailbox = Arc::new(Mailbox::default());
                while let Ok(job) = rx.recv() {
                    job();
                    // An agent resumes the same script again within microseconds of a
                    // step: stay awake briefly so the next step skips a thread wake-up.
                    linger(&rx, &mailbox, &list);
                }
            })
            .expect("cannot start a codeact step worker thread");
    }
    *pool = Some((pid, tx.clone(), Arc::clone(&lingering)));
    (tx, lingering)
}

/// Wakes a step worker ahead of a step: hands the pool an empty job, which a parked worker
/// takes, so it is still lingering (`WORKER_LINGER`) when the step itself is handed over.
/// A parked worker's wake-up costs the step that finds it asleep a thread wake-up (measured
/// here: about 0.2 ms on a virtual machine, against tens of microseconds for the step).
/// Nothing is sent when a worker lingers already: the step will be handed to it; nor while
/// the cores are contended (`crate::spin`), when a woken worker would park again at once.
pub fn wake() {
    let (tx, lingering) = pool();
    if spin::contended()
        || !lingering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    {
        return;
    }
    let _ = tx.send(Box::new(|| {}));
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
    let (tx, lingering) = pool();
    let Err(task) = hand_to_lingering(&lingering, task) else {
        return slot;
    };
    if let Err(err) = tx.send(task) {
        // The workers are gone (cannot happen while the process lives): run in place.
        (err.into_inner())();
    }
    slot
}
