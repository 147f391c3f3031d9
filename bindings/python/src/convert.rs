//! Python arguments -> Rust values. Type checks happen here (`TypeError`);
//! every value check is the core's (`ValueError` via `InvalidArgument`), so
//! Python, Node and Rust accept and reject exactly the same values.

use std::time::Duration;

use fencelock_core::{LockName, Ttl, Wait};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyList, PyString, PyTuple};

use crate::errors::invalid as to_py;

/// A lock name as the caller gave it: `lease.name` hands back the same type.
#[derive(Debug, Clone)]
pub enum Name {
    Str(String),
    Bytes(Vec<u8>),
}

impl Name {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Str(text) => text.as_bytes(),
            Name::Bytes(bytes) => bytes,
        }
    }

    pub fn to_object<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        match self {
            Name::Str(text) => PyString::new(py, text).into_any(),
            Name::Bytes(bytes) => PyBytes::new(py, bytes).into_any(),
        }
    }
}

/// `str` (UTF-8) or `bytes`/`bytearray`; validated by the core.
pub fn name(value: &Bound<'_, PyAny>) -> PyResult<Name> {
    let name = if let Ok(text) = value.cast::<PyString>() {
        Name::Str(text.to_cow()?.into_owned())
    } else if let Ok(bytes) = value.cast::<PyBytes>() {
        Name::Bytes(bytes.as_bytes().to_vec())
    } else if let Ok(bytes) = value.cast::<PyByteArray>() {
        Name::Bytes(bytes.to_vec())
    } else {
        return Err(PyTypeError::new_err(format!(
            "lock name must be str or bytes, not {}",
            type_name(value)
        )));
    };
    LockName::new(name.as_bytes()).map_err(to_py)?;
    Ok(name)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// A real number of seconds: `int`, `float` or anything with `__float__`, but
/// not `bool` (a `True` TTL is a bug, not one second). An `int` too large for
/// a float is kept as infinity so the core rejects it as out of range.
fn seconds(what: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a number of seconds, not bool"
        )));
    }
    match value.extract::<f64>() {
        Ok(secs) => Ok(secs),
        Err(err) if err.is_instance_of::<PyOverflowError>(value.py()) => {
            let negative = value.lt(0_i32).unwrap_or(false);
            Ok(if negative { -f64::MAX } else { f64::INFINITY })
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be a number of seconds, not {}",
            type_name(value)
        ))),
    }
}

/// `fence_grace=` seconds (0 allowed) -> the core's `FenceGrace`.
pub fn fence_grace(value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs = seconds("fence_grace", value)?;
    fencelock_core::FenceGrace::from_secs_f64(secs)
        .map(fencelock_core::FenceGrace::as_duration)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

pub fn ttl(value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs = seconds("ttl", value)?;
    Ttl::from_secs_f64(secs)
        .map(Ttl::as_duration)
        .map_err(to_py)
}

pub fn optional_ttl(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) => ttl(value).map(Some),
    }
}

/// `None` waits until acquired, `0` tries once, `> 0` bounds the wait.
pub fn wait(value: Option<&Bound<'_, PyAny>>) -> PyResult<Wait> {
    let secs = match value {
        None => None,
        Some(value) if value.is_none() => None,
        Some(value) => Some(seconds("wait", value)?),
    };
    Wait::from_secs_f64(secs).map_err(to_py)
}

/// A positive, finite timeout in seconds (client options).
pub fn timeout(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs = seconds(what, value)?;
    match Duration::try_from_secs_f64(secs) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(PyValueError::new_err(format!(
            "{what} must be a positive, finite number of seconds"
        ))),
    }
}

/// One URL (`str`) or a list/tuple of them (Redlock).
pub fn urls(value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(url) = value.cast::<PyString>() {
        return Ok(vec![url.to_cow()?.into_owned()]);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = value.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(PyTypeError::new_err(format!(
            "url must be a str or a list of str, not {}",
            type_name(value)
        )));
    };
    items
        .iter()
        .map(|item| {
            item.cast::<PyString>()
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "every url must be a str, not {}",
                        type_name(item)
                    ))
                })
                .and_then(|url| Ok(url.to_cow()?.into_owned()))
        })
        .collect()
}

pub fn prefix(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    optional_str("prefix", value)
}

/// An optional `str` keyword (`None` = not given).
pub fn optional_str(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match value {
        None => Ok(None),
        Some(value) if value.is_none() => Ok(None),
        Some(value) => match value.cast::<PyString>() {
            Ok(text) => Ok(Some(text.to_cow()?.into_owned())),
            Err(_) => Err(PyTypeError::new_err(format!(
                "{what} must be a str, not {}",
                type_name(value)
            ))),
        },
    }
}

/// A count such as `replicas`: an `int` (not a `bool`) from 0 to 2^32 - 1.
pub fn count(what: &str, value: &Bound<'_, PyAny>) -> PyResult<u32> {
    if value.cast::<PyBool>().is_ok() || value.cast::<PyInt>().is_err() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            type_name(value)
        )));
    }
    let n: i128 = value.extract()?;
    u32::try_from(n).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be between 0 and {}, not {n}",
            u32::MAX
        ))
    })
}

/// A PEM argument: `bytes` are the PEM data, a `str` holding PEM text is
/// the data too, any other `str` or `os.PathLike` is a file to read.
fn pem(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<fencelock::Pem>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(bytes) = value.cast::<PyBytes>() {
        return Ok(Some(fencelock::Pem::Data(bytes.as_bytes().to_vec())));
    }
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(Some(fencelock::Pem::from_text_or_path(
            text.to_cow()?.into_owned(),
        )));
    }
    match value.py().import("os")?.call_method1("fspath", (value,)) {
        Ok(path) => Ok(Some(fencelock::Pem::File(
            path.extract::<std::path::PathBuf>()?,
        ))),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be PEM text (str or bytes) or a path (str or os.PathLike), not {}",
            value.get_type().name()?
        ))),
    }
}

/// The `tls_*` keywords.
pub fn tls(
    ca: Option<&Bound<'_, PyAny>>,
    cert: Option<&Bound<'_, PyAny>>,
    key: Option<&Bound<'_, PyAny>>,
    server_name: Option<&Bound<'_, PyAny>>,
    dangerously_skip_verification: bool,
) -> PyResult<fencelock::TlsOptions> {
    let server_name = match server_name {
        None => None,
        Some(name) => match name.cast::<PyString>() {
            Ok(text) => Some(text.to_cow()?.into_owned()),
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "tls_server_name must be a str, not {}",
                    name.get_type().name()?
                )))
            }
        },
    };
    Ok(fencelock::TlsOptions {
        ca: pem("tls_ca", ca)?,
        client_cert: pem("tls_cert", cert)?,
        client_key: pem("tls_key", key)?,
        server_name,
        dangerously_skip_verification,
    })
}
