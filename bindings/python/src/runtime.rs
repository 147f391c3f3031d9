//! One process-wide tokio runtime, recreated in a forked child.
//!
//! tokio's worker threads do not survive `fork()`: a child that kept using the
//! parent's runtime would hang on its first call. So the runtime is stored
//! together with the pid that built it; a call from another pid (the child)
//! abandons the parent's runtime (leaked, never dropped: dropping it would
//! try to join threads that do not exist in the child) and builds a fresh one.
//! `os.register_at_fork(after_in_child=...)` does the same eagerly.
//!
//! The slot's mutex is only ever locked by threads attached to Python (they
//! hold the GIL). `os.fork()` also holds the GIL, so no thread can be inside
//! the mutex at the moment of the fork and the child never finds it locked.
//! Code running on tokio threads uses `Handle::try_current()` instead.
//!
//! `pyo3_async_runtimes::tokio` keeps its runtime in a `OnceLock` that cannot
//! be replaced after a fork, hence the small [`ForkSafeRuntime`] below that
//! plugs this runtime into `pyo3_async_runtimes::generic`.

use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{ContextExt, Runtime as GenericRuntime};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Builder, Handle, Runtime};

use crate::interpreter;
use crate::process_local::ProcessLocal;

static RUNTIME: Mutex<Option<ProcessLocal<Arc<Runtime>>>> = Mutex::new(None);

/// The runtime of this process, built on first use (and again after a fork).
/// Call only while attached to Python (see the module docs).
pub fn runtime() -> Arc<Runtime> {
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(runtime) = slot.as_ref().and_then(ProcessLocal::get) {
        return runtime.clone();
    }
    let runtime = Arc::new(
        Builder::new_multi_thread()
            .enable_all()
            .thread_name("fencelock-tokio")
            .build()
            .expect("fencelock: cannot start the tokio runtime"),
    );
    // Replacing a parent's runtime forgets it (ProcessLocal's drop).
    *slot = Some(ProcessLocal::new(runtime.clone()));
    runtime
}

/// A handle to spawn on: the current runtime when called from one of its
/// threads, otherwise this process's runtime.
pub fn handle() -> Handle {
    Handle::try_current().unwrap_or_else(|_| runtime().handle().clone())
}

/// Called by `os.register_at_fork(after_in_child=...)`: forget the parent's
/// runtime at once (the next call builds a new one).
#[pyfunction]
pub fn _after_fork_in_child() {
    // Dropped in the child: forgotten, never torn down.
    drop(
        RUNTIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take(),
    );
}

/// How long a blocking call sleeps between checks for Ctrl-C.
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// Run `fut` to completion with the GIL released. Between slices the calling
/// thread checks for signals; if a handler raises (Ctrl-C ->
/// `KeyboardInterrupt`), the future is dropped inside the runtime (the driver
/// then cleans up, e.g. a compensating release) and the exception returned.
pub fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<Result<T, fencelock::Error>>
where
    F: Future<Output = Result<T, fencelock::Error>> + Send + 'static,
    T: Send + 'static,
{
    let runtime = runtime();
    let mut fut = Box::pin(fut);
    loop {
        let done = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_SLICE, &mut fut).await.ok() })
        });
        if let Some(result) = done {
            return Ok(result);
        }
        if let Err(interrupted) = py.check_signals() {
            let _entered = runtime.enter();
            drop(fut);
            return Err(interrupted);
        }
    }
}

tokio::task_local! {
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

/// `pyo3_async_runtimes` glue that spawns on [`handle()`].
#[derive(Debug)]
pub struct ForkSafeRuntime;

impl GenericRuntime for ForkSafeRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = tokio::task::JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        handle().spawn(fut)
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        // pyo3_async_runtimes delivers results from here with
        // `Python::attach`: skip that once the interpreter is going away.
        handle().spawn_blocking(move || interpreter::guarded(f))
    }
}

impl ContextExt for ForkSafeRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|cell| cell.get().cloned())
            .unwrap_or_default()
    }
}

/// Turn a Rust future into a Python awaitable on this process's runtime.
/// Cancelling the awaitable drops the future.
pub fn future_into_py<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    pyo3_async_runtimes::generic::future_into_py::<ForkSafeRuntime, F, T>(py, fut)
}
