//! `fencelock.Lease` (blocking methods) and `fencelock.AsyncLease`
//! (awaitable methods) over one driver `fencelock::Lease`.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};
use tokio::task::AbortHandle;

use crate::convert::{self, Name};
use crate::errors;
use crate::runtime;

/// What both lease classes hold.
#[derive(Debug)]
pub struct LeaseCore {
    pub inner: Arc<fencelock::Lease>,
    pub name: Name,
    pid: u32,
    /// `on_lost` watcher tasks, aborted when the lease is released or freed.
    watchers: Mutex<Vec<AbortHandle>>,
}

impl LeaseCore {
    pub fn new(inner: fencelock::Lease, name: Name) -> Self {
        LeaseCore {
            inner: Arc::new(inner),
            name,
            pid: std::process::id(),
            watchers: Mutex::new(Vec::new()),
        }
    }

    fn same_process(&self) -> bool {
        self.pid == std::process::id()
    }

    /// Leases belong to the process that acquired them: after `os.fork()` the
    /// child does not hold the parent's locks.
    fn check_process(&self) -> PyResult<Arc<fencelock::Lease>> {
        if self.same_process() {
            Ok(self.inner.clone())
        } else {
            Err(PyRuntimeError::new_err(
                "this lease was acquired by another process (before os.fork()); \
                 a forked child must acquire its own",
            ))
        }
    }

    fn stop_watchers(&self) {
        let watchers =
            std::mem::take(&mut *self.watchers.lock().unwrap_or_else(|p| p.into_inner()));
        for watcher in watchers {
            watcher.abort();
        }
    }

    fn repr(&self, py: Python<'_>, class: &str) -> PyResult<String> {
        let name = self.name.to_object(py).repr()?;
        Ok(format!(
            "<fencelock.{class} name={name} fence={} valid_for={:.3} lost={}>",
            self.inner.fence(),
            self.inner.valid_for().as_secs_f64(),
            if self.inner.lost() { "True" } else { "False" },
        ))
    }

    /// Call `callback(lease)` once the lease is lost. `event_loop`: deliver
    /// through `loop.call_soon_threadsafe` (asyncio leases) instead of
    /// calling from a runtime thread.
    fn watch(
        &self,
        lease: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
        event_loop: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        if !callback.is_callable() {
            return Err(PyTypeError::new_err("on_lost must be callable"));
        }
        let inner = self.check_process()?;
        let weak = PyWeakrefReference::new(lease)?.unbind();
        let callback = callback.clone().unbind();
        let task = runtime::handle().spawn(async move {
            inner.lost_signal().await;
            drop(inner);
            // On a blocking-pool thread: waiting for the GIL, or a callback
            // that blocks (even calls back into fencelock), never stalls
            // the runtime's workers. Not once the interpreter is exiting.
            let _ = tokio::task::spawn_blocking(move || {
                crate::interpreter::with_python(move |py| {
                    let Some(lease) = weak.bind(py).upgrade() else {
                        return;
                    };
                    let outcome = match &event_loop {
                        Some(event_loop) => event_loop
                            .bind(py)
                            .call_method1("call_soon_threadsafe", (callback.bind(py), &lease))
                            .map(drop),
                        None => callback.bind(py).call1((&lease,)).map(drop),
                    };
                    if let Err(err) = outcome {
                        err.write_unraisable(py, Some(callback.bind(py)));
                    }
                })
            })
            .await;
        });
        self.watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
        Ok(())
    }
}

impl Drop for LeaseCore {
    fn drop(&mut self) {
        if self.same_process() {
            self.stop_watchers();
        } else {
            // The parent's runtime is gone in a forked child: touch nothing.
            let inner = self.inner.clone();
            std::mem::forget(inner);
            std::mem::forget(std::mem::take(&mut self.watchers));
        }
    }
}

/// `#[pymethods]` for a lease class, with the getters both classes share
/// (each reads the one driver lease in `self.core`).
macro_rules! lease_methods {
    (impl $class:ident { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            /// The lock name, as given (`str` or `bytes`).
            #[getter]
            fn name<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
                self.core.name.to_object(py)
            }

            /// The token stored in Redis. Readable on purpose; never in `repr`.
            #[getter]
            fn token(&self) -> String {
                self.core.inner.token().to_owned()
            }

            /// The fencing token: strictly increasing per lock name.
            #[getter]
            fn fence(&self) -> u64 {
                self.core.inner.fence()
            }

            /// The lease's TTL in seconds.
            #[getter]
            fn ttl(&self) -> f64 {
                self.core.inner.ttl().as_secs_f64()
            }

            /// Seconds left before the lease must be assumed lost.
            #[getter]
            fn valid_for(&self) -> f64 {
                self.core.inner.valid_for().as_secs_f64()
            }

            /// True once the lease is known to be lost.
            #[getter]
            fn lost(&self) -> bool {
                self.core.inner.lost()
            }

            $($methods)*
        }
    };
}

/// A held lock (blocking API).
#[pyclass(module = "fencelock", frozen, weakref)]
#[derive(Debug)]
pub struct Lease {
    pub core: LeaseCore,
}

lease_methods! {
impl Lease {
    /// Extend to `ttl` seconds from now (default: the lease's ttl).
    #[pyo3(signature = (ttl=None))]
    fn extend(&self, py: Python<'_>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        crate::logging::refresh(py);
        let ttl = convert::optional_ttl(ttl)?;
        let lease = self.core.check_process()?;
        let result = runtime::block_on(py, async move { lease.extend(ttl).await })?;
        result.map_err(|e| errors::to_py(py, e))
    }

    /// Release; `LockLost` if the lease was lost; a second call is a no-op.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        crate::logging::refresh(py);
        let lease = self.core.check_process()?;
        let result = runtime::block_on(py, async move { lease.release().await })?;
        if result.is_ok() {
            self.core.stop_watchers();
        }
        result.map_err(|e| errors::to_py(py, e))
    }

    /// Call `callback(lease)` (from a background thread) once the lease is
    /// lost: renewal failed or validity ran out. Not called after a release.
    fn on_lost(slf: &Bound<'_, Self>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        slf.get().core.watch(slf.as_any(), callback, None)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.core.repr(py, "Lease")
    }
}
}

/// A held lock (asyncio API): `extend` and `release` return awaitables.
#[pyclass(module = "fencelock", frozen, weakref)]
#[derive(Debug)]
pub struct AsyncLease {
    pub core: LeaseCore,
    event_loop: Py<PyAny>,
}

lease_methods! {
impl AsyncLease {
    #[pyo3(signature = (ttl=None))]
    fn extend<'py>(
        &self,
        py: Python<'py>,
        ttl: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::logging::refresh(py);
        let ttl = convert::optional_ttl(ttl)?;
        let lease = self.core.check_process()?;
        runtime::future_into_py(py, async move {
            Ok(errors::Reply::new(lease.extend(ttl).await))
        })
    }

    fn release<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        crate::logging::refresh(py);
        let lease = slf.get().core.check_process()?;
        let this = slf.clone().unbind();
        runtime::future_into_py(py, async move {
            let result = lease.release().await;
            if result.is_ok() {
                // Aborting is thread-safe; no GIL needed for a frozen class.
                this.get().core.stop_watchers();
            }
            Ok(errors::Reply::new(result))
        })
    }

    /// Release in the background, ignoring the outcome: for a lease that was
    /// granted to an acquire whose task had been cancelled.
    fn _abandon(&self) {
        if let Ok(lease) = self.core.check_process() {
            self.core.stop_watchers();
            runtime::handle().spawn(async move {
                let _ = lease.release().await;
            });
        }
    }

    /// Call `callback(lease)` in the event loop (`call_soon_threadsafe`) once
    /// the lease is lost. Not called after a release.
    fn on_lost(slf: &Bound<'_, Self>, callback: &Bound<'_, PyAny>) -> PyResult<()> {
        let event_loop = slf.get().event_loop.clone_ref(slf.py());
        slf.get()
            .core
            .watch(slf.as_any(), callback, Some(event_loop))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.core.repr(py, "AsyncLease")
    }
}
}

/// Make the Python lease object; register `on_lost` before anyone can see it.
pub fn new_lease<'py>(
    py: Python<'py>,
    core: LeaseCore,
    on_lost: Option<&Py<PyAny>>,
) -> PyResult<Bound<'py, Lease>> {
    let lease = Bound::new(py, Lease { core })?;
    if let Some(callback) = on_lost {
        lease
            .get()
            .core
            .watch(lease.as_any(), callback.bind(py), None)?;
    }
    Ok(lease)
}

/// An acquired lease on its way to an asyncio future. If the awaiting task
/// was cancelled after the acquire had completed, the lease is never handed
/// to Python: it is released here instead of being left to expire.
#[derive(Debug)]
pub struct Delivery {
    core: Option<LeaseCore>,
    event_loop: Option<Py<PyAny>>,
    on_lost: Option<Py<PyAny>>,
}

impl Delivery {
    pub fn new(
        inner: fencelock::Lease,
        name: Name,
        event_loop: Py<PyAny>,
        on_lost: Option<Py<PyAny>>,
    ) -> Self {
        Delivery {
            core: Some(LeaseCore::new(inner, name)),
            event_loop: Some(event_loop),
            on_lost,
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            let lease = core.inner.clone();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = lease.release().await;
                });
            }
        }
    }
}

impl<'py> IntoPyObject<'py> for Delivery {
    type Target = AsyncLease;
    type Output = Bound<'py, AsyncLease>;
    type Error = PyErr;

    fn into_pyobject(mut self, py: Python<'py>) -> PyResult<Self::Output> {
        let core = self.core.take().expect("a delivery is converted once");
        let event_loop = self
            .event_loop
            .take()
            .expect("a delivery is converted once");
        let on_lost = self.on_lost.take();
        let lease = Bound::new(py, AsyncLease { core, event_loop })?;
        if let Some(callback) = on_lost {
            let event_loop = lease.get().event_loop.clone_ref(py);
            lease
                .get()
                .core
                .watch(lease.as_any(), callback.bind(py), Some(event_loop))?;
        }
        Ok(lease)
    }
}
