//! `fencelock.Lease` (blocking methods) and `fencelock.AsyncLease`
//! (awaitable methods) over one driver `fencelock::Lease`; [`Grant`], an
//! asyncio acquire's lease on its way to the awaiting task.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyWeakrefMethods, PyWeakrefReference};

use crate::convert::{self, Name};
use crate::errors;
use crate::process_local::ProcessLocal;
use crate::runtime;

/// What both lease classes hold.
#[derive(Debug)]
pub struct LeaseCore {
    /// Leases belong to the process that acquired them: a forked child
    /// neither uses nor drops the parent's (its getters still read it).
    inner: ProcessLocal<Arc<fencelock::Lease>>,
    pub name: Name,
}

impl LeaseCore {
    pub fn new(inner: fencelock::Lease, name: Name) -> Self {
        LeaseCore {
            inner: ProcessLocal::new(Arc::new(inner)),
            name,
        }
    }

    /// For the getters: plain reads, as valid in a forked child's copy.
    pub fn lease(&self) -> &fencelock::Lease {
        self.inner.inherited()
    }

    /// After `os.fork()` the child does not hold the parent's locks.
    pub(crate) fn check_process(&self) -> PyResult<Arc<fencelock::Lease>> {
        self.inner.get().cloned().ok_or_else(|| {
            PyRuntimeError::new_err(
                "this lease was acquired by another process (before os.fork()); \
                 a forked child must acquire its own",
            )
        })
    }

    /// Run `op` on the driver lease with the GIL released (Ctrl-C drops it).
    fn blocking<T, F>(
        &self,
        py: Python<'_>,
        op: impl FnOnce(Arc<fencelock::Lease>) -> F,
    ) -> PyResult<T>
    where
        F: std::future::Future<Output = Result<T, fencelock::Error>> + Send + 'static,
        T: Send + 'static,
    {
        crate::logging::refresh(py);
        let lease = self.check_process()?;
        runtime::block_on(py, op(lease))?.map_err(|e| errors::to_py(py, e))
    }

    /// `op` on the driver lease as an asyncio awaitable.
    fn awaitable<'py, T, F>(
        &self,
        py: Python<'py>,
        op: impl FnOnce(Arc<fencelock::Lease>) -> F,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        F: std::future::Future<Output = Result<T, fencelock::Error>> + Send + 'static,
        T: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        crate::logging::refresh(py);
        let lease = self.check_process()?;
        let fut = op(lease);
        runtime::future_into_py(py, async move { Ok(errors::Reply::new(fut.await)) })
    }

    fn repr(&self, py: Python<'_>, class: &str) -> PyResult<String> {
        let name = self.name.to_object(py).repr()?;
        let lease = self.lease();
        Ok(format!(
            "<fencelock.{class} name={name} fence={} valid_for={:.3} lost={}>",
            lease.fence(),
            lease.valid_for().as_secs_f64(),
            if lease.lost() { "True" } else { "False" },
        ))
    }

    /// Call `callback(lease)` once the lease is lost, through the driver's
    /// one loss watcher (`fencelock::Lease::on_lost`: never after a release,
    /// over once the lease is dropped). `event_loop`: deliver through
    /// `loop.call_soon_threadsafe` (asyncio leases) instead of calling from
    /// the runtime's blocking pool.
    fn watch(
        &self,
        lease: &Bound<'_, PyAny>,
        callback: &Bound<'_, PyAny>,
        event_loop: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let callback = convert::callback(callback)?;
        let inner = self.check_process()?;
        let weak = PyWeakrefReference::new(lease)?.unbind();
        // On a blocking-pool thread: waiting for the GIL, or a callback that
        // blocks (even calls back into fencelock), never stalls the
        // runtime's workers. Not once the interpreter is exiting.
        inner.on_lost(move || {
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
            });
        });
        Ok(())
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
                self.core.lease().token().to_owned()
            }

            /// The fencing token: strictly increasing per lock name.
            #[getter]
            fn fence(&self) -> u64 {
                self.core.lease().fence()
            }

            /// The lease's TTL in seconds.
            #[getter]
            fn ttl(&self) -> f64 {
                self.core.lease().ttl().as_secs_f64()
            }

            /// Seconds left before the lease must be assumed lost.
            #[getter]
            fn valid_for(&self) -> f64 {
                self.core.lease().valid_for().as_secs_f64()
            }

            /// True once the lease is known to be lost.
            #[getter]
            fn lost(&self) -> bool {
                self.core.lease().lost()
            }

            /// Stop auto-renewal: the lease runs out at its validity end
            /// and is then lost (`on_lost`), unless released or extended
            /// first. Sends no command; idempotent; a no-op without
            /// `auto_renew`.
            fn stop_renewing(&self) {
                self.core.lease().stop_renewing();
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
        let ttl = convert::optional_ttl(ttl)?;
        self.core.blocking(py, |lease| async move { lease.extend_ttl(ttl).await })
    }

    /// Release; `LockLost` if the lease was lost; a second call is a no-op.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.core.blocking(py, |lease| async move { lease.release().await })
    }

    /// Ask Redis whether this lease still holds the lock (one round trip).
    fn held(&self, py: Python<'_>) -> PyResult<bool> {
        self.core.blocking(py, |lease| async move { lease.held().await })
    }

    /// Fenced write: the hash `key` gets `value` (field `value`) unless it
    /// accepted a newer fence than this lease's (`StaleFence`).
    fn fenced_set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (convert::data("key", key)?, convert::data("value", value)?);
        self.core.blocking(py, |lease| async move { lease.fenced_set(key, value).await })
    }

    /// Fenced write of one field of the hash `key`.
    fn fenced_hset(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        field: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, field, value) = fenced_args(key, field, value)?;
        self.core.blocking(py, |lease| async move {
            lease.fenced_hset(key, field, value).await
        })
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
        let ttl = convert::optional_ttl(ttl)?;
        self.core.awaitable(py, |lease| async move { lease.extend_ttl(ttl).await })
    }

    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.core.awaitable(py, |lease| async move { lease.release().await })
    }

    /// An awaitable: whether this lease still holds the lock, asked of Redis.
    fn held<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.core.awaitable(py, |lease| async move { lease.held().await })
    }

    /// An awaitable fenced write of the hash `key` (field `value`).
    fn fenced_set<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (key, value) = (convert::data("key", key)?, convert::data("value", value)?);
        self.core.awaitable(py, |lease| async move { lease.fenced_set(key, value).await })
    }

    /// An awaitable fenced write of one field of the hash `key`.
    fn fenced_hset<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        field: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (key, field, value) = fenced_args(key, field, value)?;
        self.core.awaitable(py, |lease| async move {
            lease.fenced_hset(key, field, value).await
        })
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

impl AsyncLease {
    pub(crate) fn new(core: LeaseCore, event_loop: Py<PyAny>) -> Self {
        AsyncLease { core, event_loop }
    }
}

/// A `fenced_hset`'s key, field and value (types only: the core checks values).
fn fenced_args(
    key: &Bound<'_, PyAny>,
    field: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
) -> PyResult<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    Ok((
        convert::data("key", key)?,
        convert::data("field", field)?,
        convert::data("value", value)?,
    ))
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

/// A lease won by an asyncio acquire, on its way to the awaiting task: the
/// driver's [`fencelock::Granted`] until `AsyncClient.acquire` takes it
/// (`_claim`) after its `await` returned. If the task was cancelled first
/// (the future cancelled as the grant came in, or the task cancelled after
/// the result was set), nobody claims it and dropping it lets the driver
/// release the lock: fencelock's one abandon path.
#[pyclass(module = "fencelock._native", frozen)]
#[derive(Debug)]
pub struct Grant {
    granted: Mutex<Option<ProcessLocal<fencelock::Granted>>>,
    name: Name,
    event_loop: Py<PyAny>,
    on_lost: Option<Py<PyAny>>,
}

impl Grant {
    pub fn new(
        granted: fencelock::Granted,
        name: Name,
        event_loop: Py<PyAny>,
        on_lost: Option<Py<PyAny>>,
    ) -> Self {
        Grant {
            granted: Mutex::new(Some(ProcessLocal::new(granted))),
            name,
            event_loop,
            on_lost,
        }
    }
}

/// What a grant (`Grant`, `GroupGrant`) holds, taken by its one `_claim()`
/// in the process that won it (a forked child's copy is never claimed).
pub(crate) fn take_granted<T>(granted: &Mutex<Option<ProcessLocal<T>>>, what: &str) -> PyResult<T> {
    granted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .and_then(ProcessLocal::into_inner)
        .ok_or_else(|| PyRuntimeError::new_err(format!("this {what} was claimed already")))
}

#[pymethods]
impl Grant {
    /// The caller has the lease now: the `AsyncLease`, with `on_lost`
    /// registered before anyone can see it.
    fn _claim<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, AsyncLease>> {
        let granted = take_granted(&self.granted, "lease")?;
        let core = LeaseCore::new(granted.claim(), self.name.clone());
        let event_loop = self.event_loop.clone_ref(py);
        let lease = Bound::new(py, AsyncLease { core, event_loop })?;
        if let Some(callback) = &self.on_lost {
            let event_loop = lease.get().event_loop.clone_ref(py);
            lease
                .get()
                .core
                .watch(lease.as_any(), callback.bind(py), Some(event_loop))?;
        }
        Ok(lease)
    }
}
