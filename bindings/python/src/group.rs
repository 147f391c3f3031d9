//! `fencelock.LockGroup` / `fencelock.AsyncLockGroup`: the leases of one
//! `acquire_many`, each an ordinary `Lease` / `AsyncLease`, released
//! together by the driver (`fencelock::LockGroup::release_leases`); and
//! [`GroupGrant`], an asyncio `acquire_many`'s group on its way to the
//! awaiting task (claimed as a `Grant` is).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::Name;
use crate::errors;
use crate::lease::{self, AsyncLease, Lease, LeaseCore};
use crate::process_local::ProcessLocal;
use crate::runtime;

/// The driver leases of the group's lease objects, for one release.
fn driver_leases<'a>(
    cores: impl Iterator<Item = &'a LeaseCore>,
) -> PyResult<Vec<Arc<fencelock::Lease>>> {
    cores.map(LeaseCore::check_process).collect()
}

fn any_lost<'a>(mut cores: impl Iterator<Item = &'a LeaseCore>) -> bool {
    cores.any(|core| core.lease().lost())
}

/// `<fencelock.{class} [lease, ...]>`, each lease by its own repr.
fn group_repr<T: pyo3::PyClass>(py: Python<'_>, class: &str, leases: &[Py<T>]) -> PyResult<String> {
    let leases: Vec<String> = leases
        .iter()
        .map(|l| Ok(l.bind(py).as_any().repr()?.to_string()))
        .collect::<PyResult<_>>()?;
    Ok(format!("<fencelock.{class} [{}]>", leases.join(", ")))
}

async fn release_all(leases: Vec<Arc<fencelock::Lease>>) -> Result<(), fencelock::Error> {
    fencelock::LockGroup::release_leases(leases.iter().map(|l| &**l)).await
}

/// Several locks held together (blocking API): `leases` in the order the
/// names were given; `release()` releases them all.
#[pyclass(module = "fencelock", frozen)]
#[derive(Debug)]
pub struct LockGroup {
    leases: Vec<Py<Lease>>,
}

impl LockGroup {
    pub fn new(py: Python<'_>, group: fencelock::LockGroup, names: Vec<Name>) -> PyResult<Self> {
        let leases = group
            .into_leases()
            .into_iter()
            .zip(names)
            .map(|(l, name)| lease::new_lease(py, LeaseCore::new(l, name), None).map(Bound::unbind))
            .collect::<PyResult<_>>()?;
        Ok(LockGroup { leases })
    }
}

#[pymethods]
impl LockGroup {
    /// The leases, in the order the names were given.
    #[getter]
    fn leases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.leases.iter().map(|l| l.clone_ref(py)))
    }

    /// Whether any lease of the group is lost.
    #[getter]
    fn lost(&self) -> bool {
        any_lost(self.leases.iter().map(|l| &l.get().core))
    }

    /// Release every lease; `LockLost` if one was lost (the others are
    /// released all the same). A second call is a no-op.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        crate::logging::refresh(py);
        let leases = driver_leases(self.leases.iter().map(|l| &l.get().core))?;
        runtime::block_on(py, release_all(leases))?.map_err(|e| errors::to_py(py, e))
    }

    fn __len__(&self) -> usize {
        self.leases.len()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        group_repr(py, "LockGroup", &self.leases)
    }
}

/// Several locks held together (asyncio API): `release()` is awaitable.
#[pyclass(module = "fencelock", frozen)]
#[derive(Debug)]
pub struct AsyncLockGroup {
    leases: Vec<Py<AsyncLease>>,
}

#[pymethods]
impl AsyncLockGroup {
    /// The leases, in the order the names were given.
    #[getter]
    fn leases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.leases.iter().map(|l| l.clone_ref(py)))
    }

    #[getter]
    fn lost(&self) -> bool {
        any_lost(self.leases.iter().map(|l| &l.get().core))
    }

    /// An awaitable: release every lease (`LockLost` as `LockGroup.release`).
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::logging::refresh(py);
        let leases = driver_leases(self.leases.iter().map(|l| &l.get().core))?;
        let releasing = release_all(leases);
        runtime::future_into_py(py, async move { Ok(errors::Reply::new(releasing.await)) })
    }

    fn __len__(&self) -> usize {
        self.leases.len()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        group_repr(py, "AsyncLockGroup", &self.leases)
    }
}

/// A group won by an asyncio `acquire_many`, until the awaiting task takes
/// it (`_claim`); dropped unclaimed (the task was cancelled), the driver
/// releases every lease of it.
#[pyclass(module = "fencelock._native", frozen)]
#[derive(Debug)]
pub struct GroupGrant {
    granted: Mutex<Option<ProcessLocal<fencelock::GrantedGroup>>>,
    names: Vec<Name>,
    event_loop: Py<PyAny>,
}

impl GroupGrant {
    pub fn new(granted: fencelock::GrantedGroup, names: Vec<Name>, event_loop: Py<PyAny>) -> Self {
        GroupGrant {
            granted: Mutex::new(Some(ProcessLocal::new(granted))),
            names,
            event_loop,
        }
    }
}

#[pymethods]
impl GroupGrant {
    /// The caller has the group now: the `AsyncLockGroup`.
    fn _claim(&self, py: Python<'_>) -> PyResult<AsyncLockGroup> {
        let granted = lease::take_granted(&self.granted, "group")?;
        let leases = granted
            .claim()
            .into_leases()
            .into_iter()
            .zip(&self.names)
            .map(|(l, name)| {
                let core = LeaseCore::new(l, name.clone());
                Py::new(py, AsyncLease::new(core, self.event_loop.clone_ref(py)))
            })
            .collect::<PyResult<_>>()?;
        Ok(AsyncLockGroup { leases })
    }
}
