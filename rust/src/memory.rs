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
//! records its owner in a header of 16 bytes (of the block's alignment when that is more). Blocks allocated outside any run (values built
//! by the host) are never charged.
//!
//! The thread advancing a run keeps that run's byte count changes in a plain thread-local
//! cell and adds them to the shared atomic counter when it stops charging the run: an
//! advance allocates and frees dozens of blocks per tool round trip, and the atomic byte
//! updates were a measurable part of the round trip (issue 10, "binding cost"). The
//! reference each block holds on its run's counter is counted the same way: a charging
//! scope reserves a large number of references up front ([`RESERVE`]), counts the blocks it
//! allocates and frees in a cell, and settles the difference when it ends (issue 21: two
//! atomic updates per block were about 2.7 % of the instructions of a start, more in
//! cycles). A block freed on another thread, or outside its run's scope, updates its
//! owner's counter directly. The probe adds the cell, so Monty's checks see the exact
//! figure; the counter is freed when its last handle, block and scope are gone.

use crate::engine::interp;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering, fence};

/// One run's live bytes and the references that keep the counter alive.
#[derive(Debug)]
struct Counter {
    bytes: AtomicIsize,
    /// Handles ([`RunMemory`]) + live blocks charged to the run + [`RESERVE`] for each
    /// active charging scope. The counter is freed when it reaches zero.
    refs: AtomicUsize,
}

/// References a charging scope takes on its counter up front, so the blocks it allocates
/// and frees on its own thread are counted in a plain thread-local cell instead of with an
/// atomic each. The scope settles the difference when it ends; a thread frees at most as
/// many of the scope's blocks as the scope allocated, fewer than this by far (the cell is
/// settled early past [`SETTLE_AT`]), so the counter stays alive while the scope lasts.
const RESERVE: usize = if usize::BITS >= 64 { 1 << 40 } else { 1 << 24 };
/// Blocks a scope may allocate before its pending references are settled early.
const SETTLE_AT: isize = (RESERVE >> 10) as isize;

/// A handle on one run's memory counter: clones share the counter.
#[derive(Debug)]
pub struct RunMemory {
    counter: NonNull<Counter>,
}

// SAFETY: the counter is only read and updated through atomics; its lifetime is managed by
// the reference count.
unsafe impl Send for RunMemory {}
unsafe impl Sync for RunMemory {}

impl RunMemory {
    pub fn new() -> Self {
        let counter = Box::new(Counter {
            bytes: AtomicIsize::new(0),
            refs: AtomicUsize::new(1),
        });
        Self {
            counter: NonNull::from(Box::leak(counter)),
        }
    }

    fn counter(&self) -> &Counter {
        // SAFETY: this handle holds a reference, so the counter is alive.
        unsafe { self.counter.as_ref() }
    }

    /// Bytes charged to the run, as of the last time a thread stopped advancing it (the
    /// probe gives the exact figure on the thread advancing it).
    pub fn used(&self) -> usize {
        self.counter().bytes.load(Ordering::Relaxed).max(0) as usize
    }

    /// References held on the counter (handles, settled blocks, scope reservations); for tests.
    #[cfg(test)]
    fn refs(&self) -> usize {
        self.counter().refs.load(Ordering::Relaxed)
    }
}

impl Clone for RunMemory {
    fn clone(&self) -> Self {
        self.counter().refs.fetch_add(1, Ordering::Relaxed);
        Self {
            counter: self.counter,
        }
    }
}

impl Drop for RunMemory {
    fn drop(&mut self) {
        // SAFETY: this handle's reference is given back exactly once.
        unsafe { release(self.counter.as_ptr(), 1) };
    }
}

/// Gives back `n` references on `counter`; frees it when they were the last.
///
/// # Safety
/// The caller holds `n` references on the live `counter`.
unsafe fn release(counter: *const Counter, n: usize) {
    // SAFETY: the caller's references keep the counter alive until this subtraction.
    if unsafe { &*counter }.refs.fetch_sub(n, Ordering::Release) == n {
        // Every other release happened before this one: nothing else reads the counter.
        fence(Ordering::Acquire);
        // SAFETY: the last reference is gone; the counter was allocated by `Box`.
        drop(unsafe { Box::from_raw(counter as *mut Counter) });
    }
}

/// The run this thread is charging, and its changes not yet added to its counter.
struct Local {
    run: Cell<*const Counter>,
    /// Bytes allocated minus bytes freed on this thread for `run` since the last flush.
    bytes: Cell<isize>,
    /// Blocks allocated minus blocks freed on this thread for `run` since the last flush:
    /// references on the counter still to be settled.
    refs: Cell<isize>,
}

thread_local! {
    // Plain cells with const initialisers: no destructor, so the slot is usable for the
    // whole life of the thread, allocator calls during teardown included.
    static LOCAL: Local = const {
        Local {
            run: Cell::new(ptr::null()),
            bytes: Cell::new(0),
            refs: Cell::new(0),
        }
    };
}

impl Local {
    /// Adds the pending changes to the current run's counter (the run stays current).
    fn flush(&self) {
        let run = self.run.get();
        let bytes = self.bytes.replace(0);
        let refs = self.refs.replace(0);
        if run.is_null() {
            return;
        }
        // SAFETY: `run` is the counter of an active `Charging` scope on this thread, whose
        // reservation keeps it alive; the total stays at least that reservation, so a
        // negative `refs` (blocks of earlier scopes freed here) cannot take it to zero.
        let counter = unsafe { &*run };
        counter.bytes.fetch_add(bytes, Ordering::Relaxed);
        counter.refs.fetch_add(refs as usize, Ordering::Relaxed); // wraps for a negative count
    }
}

/// Charges allocations made on this thread to a run until dropped.
pub struct Charging {
    run: *const Counter,
    previous: *const Counter,
}

/// Starts charging this thread's allocations to `run` (nested scopes restore the outer one).
pub fn charge_to(run: &RunMemory) -> Charging {
    run.counter().refs.fetch_add(RESERVE, Ordering::Relaxed);
    let counter = run.counter.as_ptr() as *const Counter;
    let previous = LOCAL.with(|l| {
        l.flush();
        l.run.replace(counter)
    });
    Charging {
        run: counter,
        previous,
    }
}

impl Drop for Charging {
    fn drop(&mut self) {
        LOCAL.with(|l| {
            // Scopes end in the reverse order of their start: the thread charges this one.
            debug_assert_eq!(l.run.get(), self.run, "charging scopes ended out of order");
            l.flush();
            l.run.set(self.previous);
        });
        // SAFETY: the scope's reservation, taken in `charge_to`, is given back once.
        unsafe { release(self.run, RESERVE) };
    }
}

/// The memory probe Monty reads (installed with [`install_probe`]): the bytes of the run
/// this thread is advancing, 0 outside an advance.
fn probe() -> usize {
    LOCAL
        .try_with(|l| {
            let run = l.run.get();
            if run.is_null() {
                0
            } else {
                // SAFETY: as in `Local::flush`.
                let shared = unsafe { &*run }.bytes.load(Ordering::Relaxed);
                shared.saturating_add(l.bytes.get()).max(0) as usize
            }
        })
        .unwrap_or(0)
}

/// Points Monty's memory checks at the per-run counters (idempotent).
pub fn install_probe() {
    let _ = interp::MEMORY_PROBE.set(probe);
}

/// Bytes in front of every block: the owning run's counter (or null) in the last 8 of them,
/// right before the block. The offset is 16 (the block's alignment when that is more), so
/// every block starts on a 16-byte boundary as a block straight from `malloc` does, whatever
/// alignment its layout asks for. Code outside Rust's rules relies on that: the unwinder
/// zig links into the release wheel (LLVM's libunwind) stores into a panic's
/// `_Unwind_Exception` with 16-byte aligned moves, while Rust allocates it with an 8-byte
/// layout. With an 8-byte offset every caught panic of the release wheel was a segfault
/// (`movaps` to an address 8 past a 16-byte boundary), found by `fuzz/forged_snapshots.py`.
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
        let run = LOCAL
            .try_with(|l| {
                let run = l.run.get();
                if !run.is_null() {
                    // The block's reference on its counter, settled when the scope ends.
                    l.bytes.set(l.bytes.get() + size as isize);
                    let refs = l.refs.get() + 1;
                    l.refs.set(refs);
                    if refs >= SETTLE_AT {
                        l.flush();
                    }
                }
                run
            })
            .unwrap_or(ptr::null());
        // SAFETY: `base` has `offset >= 16` bytes of header room, and `offset` is a multiple of 8
        // (a power of two at least 16), so the owner slot at `p - 8` is aligned for a pointer.
        unsafe {
            let p = base.add(offset);
            (p.sub(8) as *mut *const Counter).write(run);
            p
        }
    }

    /// Credits `size` bytes back to `run`, and the block's reference when it was `freed`
    /// (not resized): in this thread's cells when `run` is the one it is charging, else on
    /// the run's counter.
    ///
    /// # Safety
    /// `run` is a live counter; the block held one reference on it.
    unsafe fn credit(run: *const Counter, size: isize, freed: bool) {
        let local = LOCAL
            .try_with(|l| {
                let mine = l.run.get() == run;
                if mine {
                    l.bytes.set(l.bytes.get() - size);
                    l.refs.set(l.refs.get() - isize::from(freed));
                }
                mine
            })
            .unwrap_or(false);
        if !local {
            unsafe {
                (*run).bytes.fetch_sub(size, Ordering::Relaxed);
                if freed {
                    release(run, 1);
                }
            }
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
            let run = (p.sub(8) as *const *const Counter).read();
            System.dealloc(p.sub(offset), full);
            if !run.is_null() {
                Self::credit(run, layout.size() as isize, true);
            }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (full, offset) = outer(layout).expect("the layout was accepted at allocation");
        // `System.realloc` asks for a size that stays a valid layout at the block's alignment.
        let Some(new_full) = new_size
            .checked_add(offset)
            .filter(|n| Layout::from_size_align(*n, offset).is_ok())
        else {
            return ptr::null_mut();
        };
        unsafe {
            let base = System.realloc(p.sub(offset), full, new_full);
            if base.is_null() {
                return base;
            }
            let q = base.add(offset);
            // The header moved with the block; the owner stays the same.
            let run = (q.sub(8) as *const *const Counter).read();
            if !run.is_null() {
                Self::credit(run, layout.size() as isize - new_size as isize, false);
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
    fn every_block_starts_on_a_16_byte_boundary_as_malloc_blocks_do() {
        // A panic's exception object is allocated with an 8-byte layout and written with
        // 16-byte aligned moves by LLVM's libunwind (the release wheel's unwinder).
        let run = RunMemory::new();
        {
            let _g = charge_to(&run);
            let cases = [
                (1, 1),
                (8, 8),
                (24, 8),
                (56, 8),
                (100, 4),
                (4096, 8),
                (48, 16),
                (64, 32),
                (8, 64),
                (24, 4096),
            ];
            for (size, align) in cases {
                let layout = Layout::from_size_align(size, align).expect("layout");
                // Grown past its size, and shrunk back below it.
                for new_size in [size * 3 + 8, size / 2 + 1] {
                    // SAFETY: a non-zero layout; each block is resized once and freed with
                    // the layout of its last size.
                    unsafe {
                        let p = CountingAlloc.alloc(layout);
                        assert!(!p.is_null());
                        assert_eq!(p as usize % 16, 0, "size {size}, align {align}");
                        assert_eq!(p as usize % align, 0);
                        let q = CountingAlloc.realloc(p, layout, new_size);
                        assert!(!q.is_null());
                        assert_eq!(
                            q as usize % 16,
                            0,
                            "size {size} -> {new_size}, align {align}"
                        );
                        assert_eq!(q as usize % align, 0);
                        let resized = Layout::from_size_align(new_size, align).expect("layout");
                        CountingAlloc.dealloc(q, resized);
                        let z = CountingAlloc.alloc_zeroed(layout);
                        assert!(!z.is_null());
                        assert_eq!(z as usize % 16, 0);
                        CountingAlloc.dealloc(z, layout);
                    }
                }
            }
        }
        // Every block was given back to the run it was charged to.
        assert_eq!(run.used(), 0);
    }

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

    #[test]
    fn blocks_freed_on_another_thread_mid_advance_keep_the_counter_alive() {
        install_probe();
        let run = RunMemory::new();
        for _ in 0..200 {
            let _g = charge_to(&run);
            // Allocated here (charged to `run`), freed on the other thread while this thread
            // still charges `run`: the counter must outlive every block.
            let blocks: Vec<Box<[u8; 64]>> = (0..64).map(|_| Box::new([0u8; 64])).collect();
            std::thread::spawn(move || drop(blocks))
                .join()
                .expect("thread");
        }
        assert!(run.used() < 1 << 16);
        assert_eq!(run.refs(), 1);
    }

    #[test]
    fn a_scope_keeps_its_counter_alive_after_the_last_handle_is_dropped() {
        install_probe();
        let run = RunMemory::new();
        let watcher = run.clone();
        let scope = charge_to(&run);
        let blocks: Vec<Box<[u8; 64]>> = (0..64).map(|_| Box::new([0u8; 64])).collect();
        drop(run);
        // Blocks of this scope, not yet settled on the counter, freed on another thread.
        std::thread::spawn(move || drop(blocks))
            .join()
            .expect("thread");
        let v = vec![0u8; 1 << 16];
        assert!(probe() >= 1 << 16);
        drop(v);
        // Mid-scope the count is short of the blocks freed elsewhere, within the reservation.
        assert!(watcher.refs() > RESERVE / 2);
        drop(scope);
        assert_eq!(watcher.refs(), 1);
        assert!(watcher.used() < 1 << 12);
    }

    #[test]
    fn pending_changes_reach_the_counter_and_release_every_reference() {
        install_probe();
        let run = RunMemory::new();
        let kept = {
            let _g = charge_to(&run);
            let freed = vec![0u8; 1 << 20];
            let kept = vec![0u8; 1 << 19];
            assert!(probe() >= (1 << 20) + (1 << 19));
            drop(freed);
            assert!(probe() >= 1 << 19 && probe() < 1 << 20);
            kept
        };
        assert!(run.used() >= 1 << 19 && run.used() < 1 << 20);
        // The kept block still holds its reference; freeing it in a later scope of the same
        // run is credited through that scope's cells, and every reference comes back.
        {
            let _g = charge_to(&run);
            drop(kept);
            assert!(probe() < 1 << 16);
        }
        assert!(run.used() < 1 << 16);
        assert_eq!(run.refs(), 1);
        // Nested scopes: the outer run's pending changes are flushed before the inner one.
        let other = RunMemory::new();
        {
            let _outer = charge_to(&run);
            let a = vec![0u8; 1 << 18];
            {
                let _inner = charge_to(&other);
                let b = vec![0u8; 1 << 18];
                assert!(probe() >= 1 << 18 && probe() < 1 << 19);
                drop(a);
                drop(b);
            }
            assert!(probe() < 1 << 16);
        }
        assert!(run.used() < 1 << 16 && other.used() < 1 << 16);
        assert_eq!((run.refs(), other.refs()), (1, 1));
    }
}
