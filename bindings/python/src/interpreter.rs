//! The interpreter's lifetime as seen from threads Python did not start
//! (tokio's, the log thread): whether it may still be entered, and waiting
//! at exit for those inside it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pyo3::prelude::*;

static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);
/// Closures on our threads that are (or may be about to be) attached to
/// Python.
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

struct Leave;

impl Drop for Leave {
    fn drop(&mut self) {
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Run `f` attached to Python from one of our threads, unless the
/// interpreter is shutting down. A thread that takes the GIL while the
/// interpreter is finalizing is killed mid-way (pthread_exit) and crashes
/// the process, so [`shut_down`] (atexit) waits for these to finish first.
pub fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let _leave = Leave;
    if SHUTTING_DOWN.load(Ordering::SeqCst) {
        return None;
    }
    Python::try_attach(f)
}

/// The same for a closure that attaches by itself (pyo3_async_runtimes).
pub fn guarded(f: impl FnOnce()) {
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let _leave = Leave;
    if !SHUTTING_DOWN.load(Ordering::SeqCst) {
        f();
    }
}

pub fn shutting_down() -> bool {
    SHUTTING_DOWN.load(Ordering::Relaxed)
}

/// From now on our threads never enter Python; wait (GIL released, at most
/// 2 s) for those that already do.
pub fn shut_down(py: Python<'_>) {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while IN_PYTHON.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}
