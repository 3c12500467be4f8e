//! Printed output delivered while a script runs: a run's `on_output` listener.
//!
//! A run started with a listener (`MontyEngine.start(..., on_output=f)`, a session feed, the
//! continuations of either) hands what it prints to `f(stream, text)` as it goes, besides
//! collecting it on the step as always. The interpreter thread never calls Python: the
//! capture ([`crate::output::CappedOutput`]) hands what it keeps (within `max_stdout`, the
//! truncation marker included, once) to the run's [`LiveOutput`] between whole prints (at
//! the interpreter's periodic checkpoint, every 255 instructions, and whenever the host
//! answers a pause: a sleep, any OS call, the end of the advance), and one process-wide
//! delivery thread calls the listener, with the GIL, when the run's next delivery is due:
//!
//! - the first delivery of a run is due at once (within milliseconds of the print, also
//!   while the interpreter computes or sleeps inside one advance);
//! - later ones start at least [`SPACING`] (100 ms) after the previous one; what is printed
//!   meanwhile is coalesced, so a run gets at most 10 deliveries a second;
//! - at a step boundary the caller's thread flushes what is left before the step is returned:
//!   always when the run ended (`Complete`, `Raised`), and at a pause (`Call`, `Gather`) when
//!   the run's next delivery is due by then; otherwise the delivery thread delivers it when it
//!   is due (the interpreter is paused, so nothing is added meanwhile).
//!
//! A delivery calls the listener once per stream change in what it carries (one call for a
//! script that prints only to stdout); deliveries of one run never overlap and keep the
//! print order. An exception the listener raises is swallowed (the script and the host go
//! on) and the first one of a run is logged (`codeact.runtime`, warning). No lock of this
//! module is held while Python runs, and a caller that holds the GIL waits for a delivery in
//! flight with the GIL released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use pyo3::intern;
use pyo3::prelude::*;

/// Least time between the starts of two deliveries of one run (10 a second at most).
pub const SPACING: Duration = Duration::from_millis(100);

/// Which stream a chunk was printed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One run's listener and what it printed that was not delivered yet.
pub struct LiveOutput {
    listener: Py<PyAny>,
    state: Mutex<State>,
    /// Signalled when a delivery ends.
    idle: Condvar,
    /// Whether a failure of the listener was reported (once per run).
    reported: AtomicBool,
}

#[derive(Default)]
struct State {
    /// Chunks not yet delivered, consecutive chunks of one stream joined.
    pending: Vec<(Stream, String)>,
    /// Whether the delivery thread holds an entry for this run. Invariant: pending output
    /// with no delivery in flight is scheduled.
    scheduled: bool,
    /// Whether a delivery is running (its chunks already taken out of `pending`).
    in_flight: bool,
    /// When the last delivery started (called the listener, the GIL held).
    last: Option<Instant>,
}

impl State {
    /// When the next delivery may start.
    fn due(&self) -> Instant {
        let now = Instant::now();
        self.last.map_or(now, |last| (last + SPACING).max(now))
    }

    /// Takes the pending chunks for a delivery starting now.
    fn start_delivery(&mut self) -> Vec<(Stream, String)> {
        self.in_flight = true;
        self.last = Some(Instant::now());
        std::mem::take(&mut self.pending)
    }
}

impl LiveOutput {
    /// A run's live output. Called on the host's thread, outside any run's memory charge:
    /// the delivery thread is started here the first time, so no run pays for it.
    pub fn new(listener: Py<PyAny>) -> Arc<Self> {
        deliverer();
        Arc::new(Self {
            listener,
            state: Mutex::default(),
            idle: Condvar::new(),
            reported: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds printed text (what the capture kept) for delivery. Called on the interpreter
    /// thread: takes one short lock, never the GIL.
    pub fn push(self: &Arc<Self>, stream: Stream, text: &str) {
        if text.is_empty() {
            return;
        }
        let due = {
            let mut s = self.lock();
            match s.pending.last_mut() {
                Some((last, buf)) if *last == stream => buf.push_str(text),
                _ => s.pending.push((stream, text.to_owned())),
            }
            if s.scheduled || s.in_flight {
                return;
            }
            s.scheduled = true;
            s.due()
        };
        deliverer().schedule(due, Arc::clone(self));
    }

    /// The flush at a step boundary, on the thread that builds the step (holding the GIL):
    /// delivers what is left when the run `ended`, or at a pause when a delivery is due.
    pub fn flush(self: &Arc<Self>, py: Python<'_>, ended: bool) {
        let batch = loop {
            {
                let mut s = self.lock();
                if !s.in_flight {
                    if s.pending.is_empty() || (!ended && s.due() > Instant::now()) {
                        // Not due yet: it is scheduled, the delivery thread delivers it.
                        return;
                    }
                    break s.start_delivery();
                }
            }
            // A delivery in flight needs the GIL to finish: wait for it without the GIL.
            py.detach(|| {
                let mut s = self.lock();
                while s.in_flight {
                    s = self.idle.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            });
        };
        self.call(py, &batch);
        self.finish();
    }

    /// The delivery thread's turn for this run.
    fn deliver_due(self: &Arc<Self>) {
        let batch = {
            let mut s = self.lock();
            s.scheduled = false;
            if s.in_flight || s.pending.is_empty() {
                // Whoever delivers now schedules what remains when done.
                return;
            }
            let due = s.due();
            if due > Instant::now() {
                s.scheduled = true;
                drop(s);
                deliverer().schedule(due, Arc::clone(self));
                return;
            }
            s.start_delivery()
        };
        // Without an interpreter to attach to (it is shutting down) the chunks are dropped;
        // the steps still carry them. The spacing counts from the call itself, once the GIL
        // is held (waiting for it may take a switch interval or more).
        let _ = Python::try_attach(|py| {
            self.lock().last = Some(Instant::now());
            self.call(py, &batch);
        });
        self.finish();
    }

    /// Ends a delivery: wakes a flush waiting for it, schedules what was printed meanwhile.
    fn finish(self: &Arc<Self>) {
        let due = {
            let mut s = self.lock();
            s.in_flight = false;
            self.idle.notify_all();
            if s.pending.is_empty() || s.scheduled {
                return;
            }
            s.scheduled = true;
            s.due()
        };
        deliverer().schedule(due, Arc::clone(self));
    }

    /// Calls the listener with each chunk; swallows what it raises, logs the run's first.
    fn call(&self, py: Python<'_>, batch: &[(Stream, String)]) {
        for (stream, text) in batch {
            let name = match stream {
                Stream::Stdout => intern!(py, "stdout"),
                Stream::Stderr => intern!(py, "stderr"),
            };
            if let Err(err) = self.listener.call1(py, (name, text.as_str()))
                && !self.reported.swap(true, Ordering::Relaxed)
            {
                report(py, err);
            }
        }
    }
}

/// Logs a listener's failure (warning on `codeact.runtime`, with its traceback); through
/// `sys.unraisablehook` when logging fails too.
fn report(py: Python<'_>, err: PyErr) {
    let logged = (|| -> PyResult<()> {
        let logger = py
            .import(intern!(py, "logging"))?
            .call_method1(intern!(py, "getLogger"), ("codeact.runtime",))?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("exc_info", err.value(py))?;
        logger.call_method(
            intern!(py, "warning"),
            (
                "the on_output listener raised; the script goes on (later failures of this run \
                 are not logged)",
            ),
            Some(&kwargs),
        )?;
        Ok(())
    })();
    if logged.is_err() {
        err.write_unraisable(py, None);
    }
}

/// The process-wide delivery thread and the runs it will deliver, each with when.
struct Deliverer {
    queue: Mutex<Vec<(Instant, Arc<LiveOutput>)>>,
    wake: Condvar,
}

fn deliverer() -> &'static Deliverer {
    static DELIVERER: OnceLock<&'static Deliverer> = OnceLock::new();
    DELIVERER.get_or_init(|| {
        let d: &'static Deliverer = Box::leak(Box::new(Deliverer {
            queue: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("codeact-output".into())
            .spawn(move || d.run())
            .expect("cannot start the output delivery thread");
        d
    })
}

impl Deliverer {
    fn schedule(&self, due: Instant, live: Arc<LiveOutput>) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((due, live));
        self.wake.notify_one();
    }

    fn run(&self) {
        loop {
            let live = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    let next = queue
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (due, _))| *due)
                        .map(|(i, (due, _))| (i, *due));
                    let now = Instant::now();
                    match next {
                        Some((i, due)) if due <= now => break queue.swap_remove(i).1,
                        Some((_, due)) => {
                            queue = self
                                .wake
                                .wait_timeout(queue, due - now)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0;
                        }
                        None => {
                            queue = self
                                .wake
                                .wait(queue)
                                .unwrap_or_else(PoisonError::into_inner);
                        }
                    }
                }
            };
            live.deliver_due();
        }
    }
}
