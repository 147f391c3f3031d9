//! `fencelock._native.FencedUpdate`: the core's SQL recipe of fenced writes
//! (statements, parameter order, what a refusal means) for `fencelock.sql`,
//! which runs them on the caller's DB-API connection.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::convert;
use crate::errors;

/// The statements of one fenced update.
#[pyclass(module = "fencelock._native", frozen)]
#[derive(Debug)]
pub struct FencedUpdate {
    inner: fencelock::FencedUpdate,
    /// The writer's fence, and its lease's lock (for `StaleFence`).
    fence: u64,
    name: Option<fencelock::LockName>,
}

#[pymethods]
impl FencedUpdate {
    /// `table`: a name or a tuple/list of its qualified parts; `set`, `where`:
    /// column names; `paramstyle`: the DB-API driver's; `fence`: the
    /// writer's, from the lease of lock `name` if any.
    #[new]
    #[pyo3(signature = (table, set, r#where, fence_column, paramstyle, fence, name))]
    fn new(
        table: &Bound<'_, PyAny>,
        set: Vec<String>,
        r#where: Vec<String>,
        fence_column: &str,
        paramstyle: &str,
        fence: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let fence: u64 = fence
            .extract()
            .map_err(|_| PyValueError::new_err("fence must be an int from 0 to 2^64 - 1"))?;
        let name = convert::given(name).map(convert::name).transpose()?;
        let table = table_parts(table)?;
        let style =
            fencelock::Placeholders::from_paramstyle(paramstyle).map_err(errors::invalid)?;
        let inner = fencelock::FencedUpdate::new(&table, &set, &r#where, fence_column, style)
            .map_err(errors::invalid)?;
        Ok(FencedUpdate {
            inner,
            fence,
            name: name.map(|n| n.lock),
        })
    }

    /// The `UPDATE`: set values, fence, where values, fence.
    #[getter]
    fn update(&self) -> &str {
        self.inner.update()
    }

    /// The `SELECT max(fence)` after an update that changed no row: where values.
    #[getter]
    fn check(&self) -> &str {
        self.inner.check()
    }

    /// Rows updated (`updated`, else 0), or `StaleFence` when the check
    /// found `newest`, a newer fence than the writer's.
    fn outcome(&self, py: Python<'_>, updated: u64, newest: Option<i128>) -> PyResult<u64> {
        self.inner
            .outcome(self.name.as_ref(), self.fence, updated, newest)
            .map_err(|e| errors::to_py(py, e))
    }
}

/// A table name (`str`) or its qualified parts (a tuple or list of `str`).
fn table_parts(value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(name) = value.cast::<PyString>() {
        return Ok(vec![name.to_cow()?.into_owned()]);
    }
    if value.cast::<PyTuple>().is_ok() || value.cast::<PyList>().is_ok() {
        if let Ok(parts) = value.extract::<Vec<String>>() {
            return Ok(parts);
        }
    }
    Err(PyTypeError::new_err(
        "table must be a str or a tuple of str (schema, table)",
    ))
}
