//! `fencelock._native.Kind`: what a lease holds (the mutex, a semaphore
//! permit, a read or a write lock), validated once when `client.semaphore()`
//! or `client.rw_lock()` makes its handle, then passed to every acquire.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use crate::errors;

#[pyclass(module = "fencelock._native", name = "Kind", frozen)]
#[derive(Debug, Clone, Copy)]
pub struct Kind(pub fencelock::Kind);

#[pymethods]
impl Kind {
    /// One permit of a semaphore of `permits` (an `int` from 1 to
    /// 1,000,000: `ValueError` outside, `TypeError` for a non-int).
    #[staticmethod]
    fn semaphore(permits: &Bound<'_, PyAny>) -> PyResult<Kind> {
        if permits.cast::<PyBool>().is_ok() || permits.cast::<PyInt>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "permits must be an int, not {}",
                permits.get_type().name()?
            )));
        }
        let permits = fencelock::Permits::from_int(permits.extract()?).map_err(errors::invalid)?;
        Ok(Kind(fencelock::Kind::Semaphore(permits)))
    }

    /// The shared side of a read-write lock.
    #[staticmethod]
    fn read() -> Kind {
        Kind(fencelock::Kind::Read)
    }

    /// The exclusive side of a read-write lock.
    #[staticmethod]
    fn write() -> Kind {
        Kind(fencelock::Kind::Write)
    }

    /// The semaphore's permits (`None` for another kind).
    #[getter]
    fn permits(&self) -> Option<u32> {
        match self.0 {
            fencelock::Kind::Semaphore(p) => Some(p.get()),
            _ => None,
        }
    }

    /// "semaphore", "read lock" or "write lock".
    #[getter]
    fn noun(&self) -> &'static str {
        self.0.noun()
    }

    fn __repr__(&self) -> String {
        match self.0 {
            fencelock::Kind::Semaphore(p) => {
                format!("<fencelock.Kind semaphore permits={}>", p.get())
            }
            kind => format!("<fencelock.Kind {}>", kind.noun()),
        }
    }
}
