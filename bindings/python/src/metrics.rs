//! The driver's metrics for `fencelock.metrics` (python/fencelock/metrics.py,
//! which exports them to `prometheus_client`): one call per scrape, never a
//! call into Python per event.

use fencelock::metrics::{self, Values};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Start aggregating the driver's metrics (idempotent).
#[pyfunction]
pub fn _metrics_enable() {
    metrics::enable();
}

/// Every metric family now: `(name, help, "counter", [(labels, value)])`
/// (labels a dict, maybe empty) or `(name, help, "histogram", [(bound,
/// cumulative count)], count, sum)`.
#[pyfunction]
pub fn _metrics_snapshot(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let families = PyList::empty(py);
    for family in metrics::snapshot() {
        let (name, help) = (family.name, family.help);
        let item = match family.values {
            Values::Counter(values) => {
                let samples = PyList::empty(py);
                for (label, value) in values {
                    let labels = PyDict::new(py);
                    if let Some((key, label)) = label {
                        labels.set_item(key, label)?;
                    }
                    samples.append((labels, value))?;
                }
                (name, help, "counter", samples).into_pyobject(py)?
            }
            Values::Histogram(h) => {
                (name, help, "histogram", h.buckets, h.count, h.sum).into_pyobject(py)?
            }
        };
        families.append(item)?;
    }
    Ok(families)
}
