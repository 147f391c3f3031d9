//! `fencelock::Error` -> Python exceptions (the taxonomy of `core/src/error.rs`).
//!
//! The classes live in `fencelock/exceptions.py` (so `NotAcquired` can also be
//! a `TimeoutError`); they are looked up once and cached.

use fencelock::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString, PyType};
use pyo3::BoundObject;

static NOT_ACQUIRED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static LOCK_LOST: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static REDIS_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CLIENT_CLOSED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static STALE_FENCE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

const MODULE: &str = "fencelock.exceptions";

fn raise(
    py: Python<'_>,
    cell: &'static PyOnceLock<Py<PyType>>,
    class: &str,
    message: String,
) -> PyErr {
    match cell.import(py, MODULE, class) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(import_failed) => import_failed,
    }
}

/// Map a driver/core error. The messages come from the core: they name the
/// lock and the cause, never a token or a password. Lock errors also carry
/// `name` (the lock's name: `str`, or `bytes` if not UTF-8), `NotAcquired`
/// its `reason`, `StaleFence` its `resource`, `fence` and `accepted`.
pub fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let message = error.to_string();
    let err = match error {
        Error::InvalidArgument(_) => return PyValueError::new_err(message),
        Error::NotAcquired { .. } => raise(py, &NOT_ACQUIRED, "NotAcquired", message),
        Error::LockLost { .. } => raise(py, &LOCK_LOST, "LockLost", message),
        Error::Redis { .. } => raise(py, &REDIS_ERROR, "RedisError", message),
        Error::Closed { .. } => raise(py, &CLIENT_CLOSED, "ClientClosed", message),
        Error::StaleFence { .. } => raise(py, &STALE_FENCE, "StaleFence", message),
    };
    let value = err.value(py);
    let name = match error.lock_name() {
        Some(name) => text_or_bytes(py, name.as_bytes()),
        None => py.None().into_bound(py),
    };
    let attributes = value.setattr("name", name).and_then(|()| match &error {
        Error::NotAcquired { reason, .. } => value.setattr("reason", reason.as_str()),
        Error::StaleFence {
            resource,
            fence,
            accepted,
            ..
        } => value
            .setattr("resource", text_or_bytes(py, resource))
            .and_then(|()| value.setattr("fence", fence))
            .and_then(|()| value.setattr("accepted", accepted)),
        _ => Ok(()),
    });
    match attributes {
        Ok(()) => err,
        Err(failed) => failed,
    }
}

/// `str` if UTF-8, else `bytes` (a lock name, a key).
fn text_or_bytes<'py>(py: Python<'py>, bytes: &[u8]) -> Bound<'py, PyAny> {
    match std::str::from_utf8(bytes) {
        Ok(text) => PyString::new(py, text).into_any(),
        Err(_) => PyBytes::new(py, bytes).into_any(),
    }
}

/// For argument checks that run while attached.
pub fn invalid(error: Error) -> PyErr {
    Python::attach(|py| to_py(py, error))
}

/// A driver result on its way to an asyncio future. The error is turned into
/// a Python exception only when the result is delivered (with the GIL held
/// already), so tokio threads never wait for the GIL to build one.
#[derive(Debug)]
pub struct Reply<T>(Result<T, Error>);

impl<T> Reply<T> {
    pub fn new(result: Result<T, Error>) -> Self {
        Reply(result)
    }
}

impl<'py, T> IntoPyObject<'py> for Reply<T>
where
    T: IntoPyObject<'py>,
{
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match self.0 {
            Ok(value) => value
                .into_pyobject(py)
                .map(BoundObject::into_any)
                .map(BoundObject::into_bound)
                .map_err(Into::into),
            Err(error) => Err(to_py(py, error)),
        }
    }
}
