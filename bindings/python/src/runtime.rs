//! The process's tokio runtimes, recreated in a forked child: one for the
//! blocking calls (`Client`), one for the awaitables (`AsyncClient`).
//!
//! A blocking call runs its future on the calling thread ([`block_on`]);
//! the multi-thread runtime's workers drive the sockets, and with several
//! Python threads contending for one name two workers serve them better
//! than one. An awaitable runs on a single-thread runtime of its own (as in
//! the Node addon): an event loop is one thread, and a second worker only
//! added wake-ups (asyncio S3: 5,000 acquisitions/s on two workers, 5,800
//! on one, at less CPU each; `bench/README.md`).
//!
//! tokio's threads do not survive `fork()`: a child that kept using the
//! parent's runtime would hang on its first call. So each runtime is stored
//! together with the pid that built it; a call from another pid (the child)
//! abandons the parent's runtime (leaked, never dropped: dropping it would
//! try to join threads that do not exist in the child) and builds a fresh one.
//! `os.register_at_fork(after_in_child=...)` does the same eagerly.
//!
//! The slots' mutexes are only ever locked by threads attached to Python
//! (they hold the GIL). `os.fork()` also holds the GIL, so no thread can be
//! inside one at the moment of the fork and the child never finds it locked.
//! Code running on tokio threads uses `Handle::try_current()` instead.
//!
//! Asyncio awaitables ([`future_into_py`]) start in batches per turn of
//! their loop and deliver their results through a per-loop completion queue
//! and one wake-up socket: no thread hop, no GIL taken off the loop thread.
//! Loops without `add_reader` fall back to `pyo3_async_runtimes::generic`,
//! whose `tokio` module keeps its runtime in a `OnceLock` that cannot be
//! replaced after a fork, hence the small [`ForkSafeRuntime`] below that
//! plugs this runtime in.

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock::{Submissions, Submitted};
use futures_util::future::{abortable, AbortHandle};
use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};
use pyo3::{intern, BoundObject};
use pyo3_async_runtimes::generic::{ContextExt, Runtime as GenericRuntime};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::{Builder, Handle, Runtime};

use crate::interpreter;
use crate::process_local::ProcessLocal;

static RUNTIME: Mutex<Option<ProcessLocal<Arc<Runtime>>>> = Mutex::new(None);
static LOOP_RUNTIME: Mutex<Option<ProcessLocal<Handle>>> = Mutex::new(None);

/// The blocking calls' runtime, built on first use (and again after a fork).
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

/// Where awaitables run: the current runtime when called from one of its
/// threads, otherwise the awaitables' runtime (one thread, built on first
/// use and again after a fork). Called by the event loop's thread.
pub fn loop_handle() -> Handle {
    if let Ok(current) = Handle::try_current() {
        return current;
    }
    let mut slot = LOOP_RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(handle) = slot.as_ref().and_then(ProcessLocal::get) {
        return handle.clone();
    }
    let handle = fencelock::runtime_thread("fencelock-asyncio");
    *slot = Some(ProcessLocal::new(handle.clone()));
    handle
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
    drop(
        LOOP_RUNTIME
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

/// `pyo3_async_runtimes` glue that spawns on [`loop_handle()`].
#[derive(Debug)]
pub struct ForkSafeRuntime;

impl GenericRuntime for ForkSafeRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle = tokio::task::JoinHandle<()>;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        loop_handle().spawn(fut)
    }

    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        // pyo3_async_runtimes delivers results from here with
        // `Python::attach`: skip that once the interpreter is going away.
        loop_handle().spawn_blocking(move || interpreter::guarded(f))
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

/// Turn a Rust future into a Python awaitable on the awaitables' runtime.
/// Cancelling the awaitable drops the future.
///
/// The future starts at once if none of the loop's calls is in flight;
/// otherwise it joins the calls this turn of the loop makes, and a `Flush`
/// scheduled with `loop.call_soon` starts them together (`Submissions`).
/// The result reaches the event loop through the loop's [`Completions`]: the
/// tokio task pushes it there without the GIL and wakes the loop through a
/// socket the loop watches (`loop.add_reader`), at most once per batch; the
/// loop thread converts it (exceptions included) and sets the asyncio
/// future's result. A loop that does not implement `add_reader` gets
/// `pyo3_async_runtimes`' path: one `call_soon_threadsafe` per result from a
/// blocking-pool thread.
pub fn future_into_py<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = pyo3_async_runtimes::get_running_loop(py)?;
    let Some(completions) = completions(&event_loop)? else {
        return pyo3_async_runtimes::generic::future_into_py::<ForkSafeRuntime, F, T>(py, fut);
    };
    let future = event_loop.call_method0(intern!(py, "create_future"))?;
    let pending = Pending {
        future: Some(future.clone().unbind()),
        completions: Arc::clone(&completions),
    };
    let (call, abort) = abortable(async move {
        let result = fut.await;
        pending.complete(Box::new(move |py| {
            result.and_then(|value| {
                value
                    .into_pyobject(py)
                    .map(BoundObject::into_any)
                    .map(BoundObject::into_bound)
                    .map_err(Into::into)
            })
        }));
    });
    let submitted = completions.calls.submit(async move {
        let _ = call.await;
    });
    if submitted == (Submitted::Queued { first: true }) {
        // After the calls this turn of the loop makes: one hand-over.
        let flush = Flush(ProcessLocal::new(Arc::clone(&completions)));
        if let Err(err) = event_loop.call_method1(intern!(py, "call_soon"), (flush,)) {
            // No later turn to wait for.
            completions.calls.flush();
            return Err(err);
        }
    }
    future.call_method1(intern!(py, "add_done_callback"), (Cancel(abort),))?;
    Ok(future)
}

/// Builds a result on the loop thread.
type Deliver = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>> + Send>;

/// A finished future's result, waiting for the loop thread.
struct Completion {
    future: Py<PyAny>,
    deliver: Deliver,
}

/// The results on their way to one event loop, and the socket that wakes
/// it. Tokio threads only lock `queue` (never while attached to Python, and
/// the loop thread holds it only to take the batch) and write one byte.
struct Completions {
    queue: Mutex<Vec<Completion>>,
    wake: UnixStream,
    readable: UnixStream,
    /// The loop's calls on their way to the runtime, in batches.
    calls: Submissions,
}

impl Completions {
    /// Queue a result; the first of a batch wakes the loop.
    fn push(&self, completion: Completion) {
        let first = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.push(completion);
            queue.len() == 1
        };
        if first {
            // Non-blocking: a full buffer means a wake-up is pending anyway.
            let _ = (&self.wake).write(&[1]);
        }
    }
}

/// The loop's reader callback (`loop.add_reader`): set the results of the
/// batch, on the loop thread.
#[pyclass(frozen)]
struct Drain(ProcessLocal<Arc<Completions>>);

#[pymethods]
impl Drain {
    fn __call__(&self, py: Python<'_>) {
        // After a fork inside a running loop the child's copy shares the
        // parent's socket: never steal the parent's wake-ups.
        let Some(completions) = self.0.get() else {
            return;
        };
        // Empty the socket before taking the batch: a result queued after
        // the take writes a new byte, so it is never left waiting.
        let mut bytes = [0u8; 256];
        while matches!((&completions.readable).read(&mut bytes), Ok(n) if n == bytes.len()) {}
        let batch =
            std::mem::take(&mut *completions.queue.lock().unwrap_or_else(|p| p.into_inner()));
        for Completion { future, deliver } in batch {
            let future = future.bind(py);
            // Cancelled meanwhile: the result (a Grant releases its lock) is dropped.
            if !matches!(
                future
                    .call_method0(intern!(py, "done"))
                    .and_then(|d| d.is_truthy()),
                Ok(false)
            ) {
                continue;
            }
            let outcome = match deliver(py) {
                Ok(value) => future.call_method1(intern!(py, "set_result"), (value,)),
                Err(err) => {
                    future.call_method1(intern!(py, "set_exception"), (err.into_value(py),))
                }
            };
            if let Err(err) = outcome {
                err.write_unraisable(py, Some(future));
            }
        }
    }
}

/// Scheduled with `loop.call_soon` by the first call of a batch: starts the
/// batch on the runtime, on the loop thread.
#[pyclass(frozen)]
struct Flush(ProcessLocal<Arc<Completions>>);

#[pymethods]
impl Flush {
    fn __call__(&self) {
        // A forked child never starts its parent's calls.
        if let Some(completions) = self.0.get() {
            completions.calls.flush();
        }
    }
}

/// The asyncio future's done callback: a cancelled awaitable aborts its
/// call, which drops the Rust future at once on the runtime, or never runs
/// it if it was still queued (the driver then compensates).
#[pyclass(frozen)]
struct Cancel(AbortHandle);

#[pymethods]
impl Cancel {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future
            .call_method0(intern!(future.py(), "cancelled"))?
            .is_truthy()?
        {
            self.0.abort();
        }
        Ok(())
    }
}

/// The tokio task's hold on its asyncio future. Whatever ends the task
/// (the result, an abort, a panic), the future goes back to the loop
/// thread, so it is dropped there with the GIL; only a result is delivered
/// (an aborted one was cancelled: it is skipped).
struct Pending {
    future: Option<Py<PyAny>>,
    completions: Arc<Completions>,
}

impl Pending {
    fn complete(mut self, deliver: Deliver) {
        if let Some(future) = self.future.take() {
            self.completions.push(Completion { future, deliver });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            let deliver: Deliver =
                Box::new(|_| Err(PyRuntimeError::new_err("fencelock: the operation panicked")));
            self.completions.push(Completion { future, deliver });
        }
    }
}

/// The running loop this thread saw last (a thread runs one at a time) and
/// its completions; `None`: the loop has no `add_reader`.
struct LoopSlot {
    event_loop: LoopRef,
    completions: Option<Arc<Completions>>,
}

/// A weak reference when the loop type allows one, so the slot never keeps
/// a finished loop alive.
enum LoopRef {
    Weak(Py<PyWeakrefReference>),
    Strong(Py<PyAny>),
}

impl LoopRef {
    fn is(&self, event_loop: &Bound<'_, PyAny>) -> bool {
        match self {
            LoopRef::Weak(weak) => weak
                .bind(event_loop.py())
                .upgrade()
                .is_some_and(|alive| alive.is(event_loop)),
            LoopRef::Strong(strong) => strong.bind(event_loop.py()).is(event_loop),
        }
    }
}

thread_local! {
    /// Only touched while attached to Python. In a forked child the parent's
    /// slot is forgotten (it names the parent's socket and results).
    static LOOP: RefCell<Option<ProcessLocal<LoopSlot>>> = const { RefCell::new(None) };
}

/// The completions of `event_loop` (the running loop of this thread), made
/// and registered with `loop.add_reader` on first use.
fn completions(event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Completions>>> {
    let seen = LOOP.with(|slot| {
        let slot = slot.borrow();
        let seen = slot.as_ref().and_then(ProcessLocal::get)?;
        seen.event_loop
            .is(event_loop)
            .then(|| seen.completions.clone())
    });
    if let Some(completions) = seen {
        return Ok(completions);
    }
    // Python code runs below (and may come back here): no borrow held.
    let completions = register(event_loop)?;
    let event_loop = match PyWeakrefReference::new(event_loop) {
        Ok(weak) => LoopRef::Weak(weak.unbind()),
        Err(_) => LoopRef::Strong(event_loop.clone().unbind()),
    };
    let slot = ProcessLocal::new(LoopSlot {
        event_loop,
        completions: completions.clone(),
    });
    drop(LOOP.with(|cell| cell.replace(Some(slot))));
    Ok(completions)
}

fn register(event_loop: &Bound<'_, PyAny>) -> PyResult<Option<Arc<Completions>>> {
    let py = event_loop.py();
    let (wake, readable) = UnixStream::pair()
        .and_then(|(wake, readable)| {
            wake.set_nonblocking(true)?;
            readable.set_nonblocking(true)?;
            Ok((wake, readable))
        })
        .map_err(|e| PyRuntimeError::new_err(format!("fencelock: no wake-up socket: {e}")))?;
    let fd = readable.as_raw_fd();
    let completions = Arc::new(Completions {
        queue: Mutex::new(Vec::new()),
        wake,
        readable,
        calls: Submissions::new(loop_handle()),
    });
    let drain = Drain(ProcessLocal::new(completions.clone()));
    match event_loop.call_method1(intern!(py, "add_reader"), (fd, drain)) {
        Ok(_) => Ok(Some(completions)),
        Err(err) if err.is_instance_of::<PyNotImplementedError>(py) => Ok(None),
        Err(err) => Err(err),
    }
}
