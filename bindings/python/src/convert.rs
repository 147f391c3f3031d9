//! Python arguments -> Rust values. Type checks happen here (`TypeError`);
//! every value check is the core's (`ValueError` via `InvalidArgument`), so
//! Python, Node and Rust accept and reject exactly the same values.

use fencelock::{FenceGrace, KeySpace, LockName, MaxHold, NamePattern, Timeout, Ttl, Wait};
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyList, PyString, PyTuple};

use crate::errors::invalid as to_py;

/// A validated lock name, and whether the caller gave `bytes`: `lease.name`
/// hands back the same type.
#[derive(Debug, Clone)]
pub struct Name {
    pub lock: LockName,
    is_bytes: bool,
}

impl Name {
    pub fn to_object<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let bytes = self.lock.as_bytes();
        if self.is_bytes {
            PyBytes::new(py, bytes).into_any()
        } else {
            PyString::new(py, &String::from_utf8_lossy(bytes)).into_any()
        }
    }
}

/// `str` (UTF-8) or `bytes`/`bytearray`; validated by the core.
pub fn name(value: &Bound<'_, PyAny>) -> PyResult<Name> {
    let (bytes, is_bytes) = str_or_bytes("lock name", value)?;
    let lock = LockName::new(bytes).map_err(to_py)?;
    Ok(Name { lock, is_bytes })
}

/// `acquire_many`'s names: any iterable of names, but not one name (a
/// `str` or `bytes` would iterate as its characters).
pub fn names(value: &Bound<'_, PyAny>) -> PyResult<Vec<Name>> {
    if value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyBytes>()
        || value.is_instance_of::<PyByteArray>()
    {
        return Err(PyTypeError::new_err(format!(
            "lock names must be an iterable of names (a list, say), not one {}",
            type_name(value)
        )));
    }
    let Ok(items) = value.try_iter() else {
        return Err(PyTypeError::new_err(format!(
            "lock names must be an iterable of names, not {}",
            type_name(value)
        )));
    };
    items.map(|item| name(&item?)).collect()
}

/// A key, field or value of a fenced write: `str` (UTF-8) or
/// `bytes`/`bytearray` (the core checks what it must not be).
pub fn data(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    Ok(str_or_bytes(what, value)?.0)
}

/// A name pattern (`str` or `bytes`, as a name), validated by the core,
/// and whether it was given as bytes.
pub fn pattern(value: &Bound<'_, PyAny>) -> PyResult<(NamePattern, bool)> {
    let (bytes, is_bytes) = str_or_bytes("name pattern", value)?;
    Ok((NamePattern::new(bytes).map_err(to_py)?, is_bytes))
}

/// A name's bytes and whether they were given as `bytes`/`bytearray`.
fn str_or_bytes(what: &str, value: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, bool)> {
    if let Ok(text) = value.cast::<PyString>() {
        Ok((text.to_cow()?.as_bytes().to_vec(), false))
    } else if let Ok(bytes) = value.cast::<PyBytes>() {
        Ok((bytes.as_bytes().to_vec(), true))
    } else if let Ok(bytes) = value.cast::<PyByteArray>() {
        Ok((bytes.to_vec(), true))
    } else {
        Err(PyTypeError::new_err(format!(
            "{what} must be str or bytes, not {}",
            type_name(value)
        )))
    }
}

/// A name read from Redis (listing): `str` if UTF-8 and `as_str`, else `bytes`.
pub fn found_name<'py>(py: Python<'py>, name: &LockName, as_str: bool) -> Bound<'py, PyAny> {
    match std::str::from_utf8(name.as_bytes()) {
        Ok(text) if as_str => PyString::new(py, text).into_any(),
        _ => PyBytes::new(py, name.as_bytes()).into_any(),
    }
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

/// `fence_grace=` seconds (0 allowed).
pub fn fence_grace(value: &Bound<'_, PyAny>) -> PyResult<FenceGrace> {
    FenceGrace::from_secs_f64(seconds("fence_grace", value)?).map_err(to_py)
}

pub fn ttl(value: &Bound<'_, PyAny>) -> PyResult<Ttl> {
    Ttl::from_secs_f64(seconds("ttl", value)?).map_err(to_py)
}

pub fn optional_ttl(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Ttl>> {
    given(value).map(ttl).transpose()
}

/// `max_hold=` seconds (`None`: renew until released or lost).
pub fn max_hold(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<MaxHold>> {
    given(value)
        .map(|v| MaxHold::from_secs_f64(seconds("max_hold", v)?).map_err(to_py))
        .transpose()
}

/// `None` waits until acquired, `0` tries once, `> 0` bounds the wait.
pub fn wait(value: Option<&Bound<'_, PyAny>>) -> PyResult<Wait> {
    let secs = given(value).map(|v| seconds("wait", v)).transpose()?;
    Wait::from_secs_f64(secs).map_err(to_py)
}

/// `connect_timeout=` / `response_timeout=` seconds.
pub fn timeout(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Timeout> {
    Timeout::from_secs_f64(what, seconds(what, value)?).map_err(to_py)
}

/// A keyword's value unless absent or `None`.
pub fn given<'a, 'py>(value: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
    value.filter(|v| !v.is_none())
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

pub fn prefix(value: &Bound<'_, PyAny>) -> PyResult<KeySpace> {
    KeySpace::new(string("prefix", value)?).map_err(to_py)
}

/// An optional `str` keyword (`None` = not given).
pub fn optional_str(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    given(value).map(|v| string(what, v)).transpose()
}

fn string(what: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    match value.cast::<PyString>() {
        Ok(text) => Ok(text.to_cow()?.into_owned()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be a str, not {}",
            type_name(value)
        ))),
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
    fencelock::replica_count_int(value.extract()?).map_err(to_py)
}

/// A PEM argument: `bytes` are the PEM data, a `str` holding PEM text is
/// the data too, any other `str` or `os.PathLike` is a file to read.
pub fn pem(what: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<fencelock::Pem>> {
    let Some(value) = given(value) else {
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

/// A `bool` keyword: `True` or `False` only (an `int` is a bug here).
pub fn flag(what: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    value.extract().map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a bool, not {}", type_name(value)))
    })
}

/// An `on_lost` callback: anything callable.
pub fn callback(value: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    if !value.is_callable() {
        return Err(PyTypeError::new_err("on_lost must be callable"));
    }
    Ok(value.clone().unbind())
}
