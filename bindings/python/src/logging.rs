//! Forward the library's `tracing` diagnostics to the Python logger
//! `fencelock`.
//!
//! A deliberately tiny `tracing::Subscriber`: no span storage, no locks (so a
//! forked child can never find one held), and no GIL on the hot path. Whether
//! a level is enabled is decided from an atomic threshold, refreshed from the
//! logger's effective level every time Python calls into the module (we hold
//! the GIL then anyway). Only enabled events take the GIL, and they are
//! checked against `logger.isEnabledFor` once more before being logged.
//! The driver never puts tokens or passwords into its events.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

const LOGGER: &str = "fencelock";
/// Python level of tracing's TRACE (below logging.DEBUG).
const TRACE: u8 = 5;
const OFF: u8 = u8::MAX;

static THRESHOLD: AtomicU8 = AtomicU8::new(OFF);
static ACTIVE: AtomicBool = AtomicBool::new(true);
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);
static PY_LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn python_level(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => TRACE,
    }
}

fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    PY_LOGGER
        .get_or_try_init(py, || {
            Ok(py
                .import("logging")?
                .call_method1("getLogger", (LOGGER,))?
                .unbind())
        })
        .map(|logger| logger.bind(py))
}

/// Re-read the logger's effective level (cheap; done on every call into the
/// module, so `logging.getLogger("fencelock").setLevel(...)` takes effect at
/// the next call).
pub fn refresh(py: Python<'_>) {
    let threshold = (|| -> PyResult<u8> {
        let logger = logger(py)?;
        if logger.getattr("disabled")?.is_truthy()? {
            return Ok(OFF);
        }
        let effective: i64 = logger.call_method0("getEffectiveLevel")?.extract()?;
        let disabled_below: i64 = logger
            .getattr("manager")?
            .getattr("disable")?
            .extract()
            .unwrap_or(0);
        let threshold = effective.max(disabled_below + 1).max(1);
        Ok(u8::try_from(threshold).unwrap_or(OFF))
    })()
    .unwrap_or(OFF);
    THRESHOLD.store(threshold, Ordering::Relaxed);
}

/// Stop forwarding (interpreter shutdown).
pub fn stop() {
    ACTIVE.store(false, Ordering::Relaxed);
}

fn enabled(level: &Level) -> bool {
    ACTIVE.load(Ordering::Relaxed) && python_level(level) >= THRESHOLD.load(Ordering::Relaxed)
}

#[derive(Default)]
struct Message {
    message: String,
    fields: String,
}

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

/// The subscriber installed as tracing's global default by the module.
#[derive(Debug)]
pub struct PythonLogging;

impl Subscriber for PythonLogging {
    fn register_callsite(&self, _metadata: &'static Metadata<'static>) -> Interest {
        // The threshold changes at run time: ask `enabled` every time.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && enabled(metadata.level())
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let level = python_level(metadata.level());
        let mut text = Message::default();
        event.record(&mut text);
        let line = format!("{}{}", text.message, text.fields);
        let target = metadata.target();
        // Never attach to a finalizing interpreter (see runtime::with_python).
        let _ = crate::runtime::with_python(|py| -> PyResult<()> {
            let logger = logger(py)?;
            if logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
                let extra = pyo3::types::PyDict::new(py);
                extra.set_item("rust_target", target)?;
                let kwargs = pyo3::types::PyDict::new(py);
                kwargs.set_item("extra", extra)?;
                logger.call_method("log", (level, line), Some(&kwargs))?;
            }
            Ok(())
        });
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Install the bridge (once per process; a host that already set a global
/// subscriber keeps its own).
pub fn install(py: Python<'_>) {
    let _ = tracing::subscriber::set_global_default(PythonLogging);
    refresh(py);
}
