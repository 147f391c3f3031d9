//! Forward the library's `tracing` diagnostics to the Python logger
//! `fencelock`.
//!
//! A deliberately tiny `tracing::Subscriber`: no span storage, no locks (so a
//! forked child can never find one held), and no GIL where the event happens.
//! Whether a level is enabled is decided from an atomic threshold, refreshed
//! from the logger's effective level every time Python calls into the module
//! (we hold the GIL then anyway). Enabled events are formatted and handed to
//! a bounded queue; one thread of our own ("fencelock-log") takes the GIL and
//! logs them. A runtime thread never waits for the GIL: while Python code
//! holds it for seconds, renewals of every lease still go out on time (a full
//! queue drops records and says how many later).
//! The driver never puts tokens or passwords into its events.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

use crate::interpreter;

const LOGGER: &str = "fencelock";
/// Python level of tracing's TRACE (below logging.DEBUG).
const TRACE: u8 = 5;
const OFF: u8 = u8::MAX;

static THRESHOLD: AtomicU8 = AtomicU8::new(OFF);
static NEXT_SPAN: AtomicU64 = AtomicU64::new(1);
static PY_LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// Records dropped because the queue was full, reported by the log thread.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Records waiting for the log thread (enough for bursts; a GIL held for
/// seconds while thousands of leases fail is what the bound is for).
const QUEUE: usize = 4096;

enum Item {
    Record {
        level: u8,
        line: String,
        target: &'static str,
    },
    /// Answered once every record queued before it was logged.
    Flush(SyncSender<()>),
}

/// The log thread's queue of this process. A forked child has no log thread
/// (and may have copied the parent's queue mid-send), so every process uses
/// a queue of its own: slot `generation`, where the generation is bumped,
/// without a lock, by the first event in a process whose pid differs from
/// the one recorded. Fork chains deeper than the slots log nothing.
static QUEUES: [OnceLock<SyncSender<Item>>; 16] = [const { OnceLock::new() }; 16];
/// `pid << 32 | generation` of the process that last chose its slot.
static OWNER: AtomicU64 = AtomicU64::new(0);

fn queue() -> Option<&'static SyncSender<Item>> {
    let pid = u64::from(std::process::id());
    let mut owner = OWNER.load(Ordering::Acquire);
    let generation = loop {
        if owner >> 32 == pid {
            break owner & 0xffff_ffff;
        }
        // A new process (the first ever, or a forked child): next slot.
        let next = if owner == 0 {
            0
        } else {
            (owner & 0xffff_ffff) + 1
        };
        match OWNER.compare_exchange(owner, pid << 32 | next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break next,
            Err(seen) => owner = seen,
        }
    };
    let slot = QUEUES.get(usize::try_from(generation).ok()?)?;
    Some(slot.get_or_init(|| {
        let (tx, rx) = sync_channel(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("fencelock-log".into())
            .spawn(move || log_thread(rx));
        drop(spawned); // without a thread, sends fail and records are dropped
        tx
    }))
}

fn log_thread(rx: Receiver<Item>) {
    while let Ok(item) = rx.recv() {
        match item {
            Item::Record {
                level,
                line,
                target,
            } => {
                // Never attach to a finalizing interpreter: after shutdown
                // records are dropped.
                let _ = interpreter::with_python(|py| emit(py, level, &line, target));
            }
            Item::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

fn emit(py: Python<'_>, level: u8, line: &str, target: &str) -> PyResult<()> {
    let logger = logger(py)?;
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        let note = format!("{dropped} fencelock log records dropped (the log queue was full)");
        logger.call_method1("warning", (note,))?;
    }
    if logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        let extra = pyo3::types::PyDict::new(py);
        extra.set_item("rust_target", target)?;
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("extra", extra)?;
        logger.call_method("log", (level, line), Some(&kwargs))?;
    }
    Ok(())
}

/// Wait (at most 2 s) until every record queued so far has been handed to
/// Python: the clients' `close()` calls this, so what a client logged is in
/// the handlers when it returns. Never from a runtime worker (the log thread
/// may be waiting for the GIL).
pub fn flush_wait() {
    let Some(queue) = queue() else { return };
    let (done, wait) = sync_channel(1);
    if queue.send(Item::Flush(done)).is_ok() {
        let _ = wait.recv_timeout(Duration::from_secs(2));
    }
}

/// [`flush_wait`] from a thread attached to Python (the GIL released).
pub fn flush(py: Python<'_>) {
    py.detach(flush_wait);
}

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

/// Re-read the logger's effective level when it may have changed, so that
/// `logging.getLogger("fencelock").setLevel(...)` takes effect at the next
/// call into the module (every call checks, holding the GIL anyway).
///
/// Computing it runs Python code (`getEffectiveLevel` walks the logger's
/// parents): about 6,000 instructions, half a percent of a call. So the
/// result is kept until `logging` empties the logger's `_cache`, as it
/// does for every logger on any `setLevel` or `logging.disable`: a key of
/// ours in that dict says the threshold is still current. `disabled` is
/// set without emptying it (`logging.config`), so it is read every time.
/// A Python whose loggers have no `_cache` dict gets the full check.
pub fn refresh(py: Python<'_>) {
    let Ok(logger) = logger(py) else {
        THRESHOLD.store(OFF, Ordering::Relaxed);
        return;
    };
    let disabled = logger
        .getattr(intern!(py, "disabled"))
        .and_then(|d| d.is_truthy())
        .unwrap_or(false);
    let cache = logger
        .getattr(intern!(py, "_cache"))
        .ok()
        .and_then(|cache| cache.cast_into::<PyDict>().ok());
    let marker = cache_marker(py);
    if let Some(cache) = &cache {
        if disabled {
            // Re-enabled later: computed afresh then.
            let _ = cache.del_item(marker);
        } else if cache.contains(marker).unwrap_or(false) {
            return;
        } else {
            // Set before reading the level: a change made meanwhile empties
            // the cache again, and the next call reads it again.
            let _ = cache.set_item(marker, true);
        }
    }
    let threshold = (|| -> PyResult<u8> {
        if disabled {
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

/// Our key in the logger's `_cache` (a plain object: no level is equal to it).
fn cache_marker(py: Python<'_>) -> &Bound<'_, PyAny> {
    static MARKER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    MARKER
        .get_or_init(py, || {
            py.eval(pyo3::ffi::c_str!("object()"), None, None)
                .map(Bound::unbind)
                .unwrap_or_else(|_| py.None())
        })
        .bind(py)
}

fn enabled(level: &Level) -> bool {
    !interpreter::shutting_down() && python_level(level) >= THRESHOLD.load(Ordering::Relaxed)
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
        let mut text = Message::default();
        event.record(&mut text);
        let record = Item::Record {
            level: python_level(metadata.level()),
            line: format!("{}{}", text.message, text.fields),
            target: metadata.target(),
        };
        // Full, no log thread, or no slot left: count it, never wait.
        if !matches!(queue().map(|queue| queue.try_send(record)), Some(Ok(()))) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
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
