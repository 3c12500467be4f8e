//! The current process's id, cached: the start seed and the step-worker pool both ask for it
//! on every start or hand-off, and a forked child must see its own.

/// The process id, read from the OS once per process: `getpid` is a system call (about a
/// twentieth of starting `1 + 1`, and one more per step handed to the worker pool). On Unix
/// a fork handler forgets it in the child, which so reads its own id at its first start: it
/// draws other seeds than its parent and builds its own worker pool.
pub(crate) fn process_id() -> u32 {
    #[cfg(unix)]
    {
        use std::sync::Once;
        use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
        static PID: AtomicU32 = AtomicU32::new(0);
        static HOOKED: AtomicBool = AtomicBool::new(false);
        static FORK_HOOK: Once = Once::new();
        extern "C" fn forget_pid() {
            PID.store(0, Ordering::Relaxed);
        }
        let pid = PID.load(Ordering::Relaxed);
        if pid != 0 {
            return pid;
        }
        FORK_HOOK.call_once(|| {
            // SAFETY: registers a child handler that only stores to an atomic. When the
            // registration fails the id is read anew at every call instead.
            let rc = unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) };
            HOOKED.store(rc == 0, Ordering::Relaxed);
        });
        let pid = std::process::id();
        if HOOKED.load(Ordering::Relaxed) {
            PID.store(pid, Ordering::Relaxed);
        }
        pid
    }
    #[cfg(not(unix))]
    {
        std::process::id()
    }
}
