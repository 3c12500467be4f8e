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
//! What a run is charged: the live bytes of every block allocated while it was being
//! advanced (snapshot loads included), wherever and whenever the block is freed: each block
//! records its owner in a 16-byte header. Blocks allocated outside any run (values built
//! by the host) are never charged.

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

/// The run this thread is advancing, or null.
fn current() -> *const RunMemory {
    // `try_with`: during thread teardown the slot may be gone; no run is advancing then.
    CURRENT.try_with(|c| c.get()).unwrap_or(ptr::null())
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

/// Bytes in front of every block: the owning run's counter (or null), right before the
/// block, at an offset that keeps the block's alignment.
const HEADER: usize = 16;

/// The block as the system allocator sees it: header room plus the caller's layout.
fn outer(layout: Layout) -> Option<(Layout, usize)> {
    let offset = layout.align().max(HEADER);
    let size = layout.size().checked_add(offset)?;
    Layout::from_size_align(size, offset)
        .ok()
        .map(|l| (l, offset))
}

/// The system allocator, charging each block to the run advancing on the thread that
/// allocated it. The owner is recorded in a header, so a block is credited back to the
/// same run wherever it is freed (another worker, the Python thread), and a block
/// allocated outside any run is never charged nor credited.
pub struct CountingAlloc;

impl CountingAlloc {
    unsafe fn finish(base: *mut u8, offset: usize, size: usize) -> *mut u8 {
        if base.is_null() {
            return base;
        }
        let run = current();
        // SAFETY: `base` has `offset >= 16` bytes of header room, aligned to at least 16.
        unsafe {
            let p = base.add(offset);
            (p.sub(8) as *mut *const RunMemory).write(run);
            if !run.is_null() {
                // The block keeps its run's counter alive until it is freed.
                Arc::increment_strong_count(run);
                (*run).bytes.fetch_add(size as isize, Ordering::Relaxed);
            }
            p
        }
    }
}

// SAFETY: every block is a system block with `offset` header bytes in front; the pointer
// handed out is `offset` bytes in and keeps the requested alignment (offset is a multiple
// of it). The bookkeeping never allocates through this allocator while a header is being
// read or written (dropping the last counter reference frees a block allocated outside any
// run, which has no owner to update).
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some((full, offset)) = outer(layout) else {
            return ptr::null_mut();
        };
        unsafe { Self::finish(System.alloc(full), offset, layout.size()) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let Some((full, offset)) = outer(layout) else {
            return ptr::null_mut();
        };
        unsafe { Self::finish(System.alloc_zeroed(full), offset, layout.size()) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let (full, offset) = outer(layout).expect("the layout was accepted at allocation");
        unsafe {
            let run = (p.sub(8) as *const *const RunMemory).read();
            System.dealloc(p.sub(offset), full);
            if !run.is_null() {
                (*run)
                    .bytes
                    .fetch_sub(layout.size() as isize, Ordering::Relaxed);
                Arc::decrement_strong_count(run);
            }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (full, offset) = outer(layout).expect("the layout was accepted at allocation");
        let Some(new_full) = new_size.checked_add(offset) else {
            return ptr::null_mut();
        };
        unsafe {
            let base = System.realloc(p.sub(offset), full, new_full);
            if base.is_null() {
                return base;
            }
            let q = base.add(offset);
            // The header moved with the block; the owner stays the same.
            let run = (q.sub(8) as *const *const RunMemory).read();
            if !run.is_null() {
                (*run).bytes.fetch_add(
                    new_size as isize - layout.size() as isize,
                    Ordering::Relaxed,
                );
            }
            q
        }
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
        // Freed on another thread, outside any run: still credited to its owner.
        std::thread::spawn(move || drop(kept))
            .join()
            .expect("thread");
        assert!(a.used() < 1 << 16);
        // Reallocation moves the charge with the block.
        let grown = {
            let _g = charge_to(&b);
            let mut v: Vec<u8> = Vec::with_capacity(16);
            v.resize(1 << 20, 1);
            v
        };
        assert!(b.used() >= 1 << 20);
        drop(grown);
        assert!(b.used() < 1 << 16);
    }
}
