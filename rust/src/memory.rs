//! Per-run memory accounting: a global allocator that charges each allocation to the run
//! being advanced on the calling thread, and the probe Monty reads its `max_memory` from.
//!
//! Monty 1.4 measures memory with one process-wide counter, so two runs advancing at once
//! would share a budget (ADR 0003). codeact instead installs [`CountingAlloc`] and, through
//! our patch of `monty-types` (`rust/patches/`), a probe that reads the counter of the run
//! the current thread is advancing. An advance runs on one thread from start to stop (a
//! step worker or the caller's thread), so the run is known per thread without locks and
//! runs on different threads never wait for each other.
//!
//! What a run is charged: bytes allocated minus bytes freed on its thread while it is
//! being advanced (including loading its snapshot). Memory a run frees outside an advance
//! (a dropped continuation) is not credited back; the run is over by then.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

/// One run's live bytes.
#[derive(Debug, Default)]
pub struct RunMemory {
    bytes: AtomicIsize,
}

impl RunMemory {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Bytes currently charged to the run.
    pub fn used(&self) -> usize {
        self.bytes.load(Ordering::Relaxed).max(0) as usize
    }
}

thread_local! {
    static CURRENT: Cell<*const RunMemory> = const { Cell::new(ptr::null()) };
}

/// Charges allocations made on this thread to `run` until dropped.
pub struct Charging {
    _run: Arc<RunMemory>,
    previous: *const RunMemory,
}

/// Starts charging this thread's allocations to `run` (nested scopes restore the outer one).
pub fn charge_to(run: &Arc<RunMemory>) -> Charging {
    let run = Arc::clone(run);
    let previous = CURRENT.with(|c| c.replace(Arc::as_ptr(&run)));
    Charging {
        _run: run,
        previous,
    }
}

impl Drop for Charging {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

fn add(delta: isize) {
    // `try_with`: during thread teardown the slot may be gone; such frees are not a run's.
    let _ = CURRENT.try_with(|c| {
        let run = c.get();
        if !run.is_null() {
            // SAFETY: the pointer is set only by a live `Charging`, which holds an `Arc` to
            // the counter until it clears the pointer again.
            unsafe { &*run }.bytes.fetch_add(delta, Ordering::Relaxed);
        }
    });
}

/// The memory probe Monty reads (installed with [`install_probe`]): the bytes of the run
/// this thread is advancing, 0 outside an advance.
fn probe() -> usize {
    CURRENT
        .try_with(|c| {
            let run = c.get();
            if run.is_null() {
                0
            } else {
                // SAFETY: as in `add`.
                unsafe { &*run }.used()
            }
        })
        .unwrap_or(0)
}

/// Points Monty's memory checks at the per-run counters (idempotent).
pub fn install_probe() {
    let _ = monty_types::MEMORY_PROBE.set(probe);
}

/// The system allocator, counting each allocation for the run being advanced.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` unchanged; the bookkeeping only touches a
// thread-local pointer and an atomic counter, and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        q
    }
}

/// Physical memory of the machine in bytes, when known.
pub fn physical_memory() -> Option<usize> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf has no preconditions.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            return (pages as usize).checked_mul(size as usize);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_charged_to_the_current_run_only() {
        install_probe();
        let a = RunMemory::new();
        let b = RunMemory::new();
        let kept = {
            let _g = charge_to(&a);
            let v = vec![0u8; 1 << 20];
            assert!(probe() >= 1 << 20);
            v
        };
        assert_eq!(probe(), 0);
        assert!(a.used() >= 1 << 20 && b.used() == 0);
        {
            let _g = charge_to(&b);
            let t = std::thread::spawn(|| vec![0u8; 1 << 20]);
            let other = t.join().expect("thread");
            assert!(b.used() < 1 << 16, "another thread's allocation is not b's");
            drop(other);
        }
        {
            let _g = charge_to(&a);
            drop(kept);
        }
        assert!(a.used() < 1 << 16);
    }
}
