//! `fencelock._native`: the PyO3 layer of the `fencelock` Python package.
//!
//! It converts arguments, releases the GIL and maps errors; every lock
//! semantic comes from the `fencelock` crate (the driver) and its core. The
//! public Python API (context managers, re-exports) is in python/fencelock/.

mod client;
mod convert;
mod cursor;
mod errors;
mod group;
mod info;
mod interpreter;
mod kind;
mod lease;
mod logging;
mod metrics;
mod process_local;
mod runtime;
mod sql;

use pyo3::prelude::*;

/// `atexit`: deliver the log records already queued, then keep our threads
/// out of the finalizing interpreter.
#[pyfunction]
fn _shutdown(py: Python<'_>) {
    logging::flush(py);
    interpreter::shut_down(py);
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<client::Client>()?;
    m.add_class::<client::AsyncClient>()?;
    m.add_class::<lease::Lease>()?;
    m.add_class::<info::LockInfo>()?;
    m.add_class::<lease::AsyncLease>()?;
    m.add_class::<lease::Grant>()?;
    m.add_class::<group::LockGroup>()?;
    m.add_class::<group::AsyncLockGroup>()?;
    m.add_class::<group::GroupGrant>()?;
    m.add_class::<sql::FencedUpdate>()?;
    m.add_class::<kind::Kind>()?;
    m.add_class::<cursor::Cursor>()?;
    m.add_function(wrap_pyfunction!(metrics::_metrics_enable, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::_metrics_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(_shutdown, m)?)?;
    logging::install(m.py());
    Ok(())
}
