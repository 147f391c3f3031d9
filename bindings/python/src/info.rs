//! `fencelock.LockInfo`: what `Client.inspect` found (never a token).

use pyo3::prelude::*;

/// A lock as Redis sees it now (see `Client.inspect`).
#[pyclass(module = "fencelock", name = "LockInfo", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockInfo {
    info: fencelock::LockInfo,
}

impl LockInfo {
    pub fn new(info: fencelock::LockInfo) -> Self {
        LockInfo { info }
    }
}

#[pymethods]
impl LockInfo {
    /// Someone holds the lock (a majority of the nodes, with Redlock).
    #[getter]
    fn held(&self) -> bool {
        self.info.held
    }

    /// The holder's remaining TTL in seconds, or `None` when free.
    #[getter]
    fn ttl(&self) -> Option<f64> {
        self.info.ttl.map(|d| d.as_secs_f64())
    }

    /// The last fence issued while its key remains (also after a release),
    /// else `None`.
    #[getter]
    fn fence(&self) -> Option<u64> {
        self.info.fence
    }

    /// The holder is a live lease of this client.
    #[getter]
    fn held_by_me(&self) -> bool {
        self.info.held_by_me
    }

    fn __repr__(&self) -> String {
        let py_bool = |b: bool| if b { "True" } else { "False" };
        format!(
            "<fencelock.LockInfo held={} ttl={} fence={} held_by_me={}>",
            py_bool(self.info.held),
            self.info
                .ttl
                .map_or("None".to_owned(), |d| format!("{:.3}", d.as_secs_f64())),
            self.info.fence.map_or("None".to_owned(), |f| f.to_string()),
            py_bool(self.info.held_by_me),
        )
    }
}
