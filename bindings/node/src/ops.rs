//! Operator tools: `client.list(pattern)` and `client.watch(name)` as
//! native cursors (`client.js` turns them into async iterators, one
//! `next()` promise per item), and the driver's metrics snapshot for
//! `metrics.js` (one call per scrape: no JavaScript runs per lock event and
//! the tokio side never waits for the JS thread).

use std::collections::HashMap;
use std::sync::Arc;

use fencelock::metrics::{self, Values};
use fencelock::{LockList, LockWatch, NamePattern, Timeout, DEFAULT_WATCH_INTERVAL};
use napi::bindgen_prelude::{Buffer, Either, Either3, PromiseRaw};
use napi::Env;
use napi_derive::napi;
use tokio::sync::Mutex;

use crate::{
    known_keys, lock_error, number_arg, options_object, type_error, NameArg, NativeLockInfo,
    NumberArg, OptionsArg, Result, MILLIS,
};

/// A name pattern as given, and whether it was a Buffer.
pub(crate) fn pattern_arg(value: NameArg<'_>) -> Result<(NamePattern, bool)> {
    let (bytes, is_buffer) = match value {
        Either3::A(s) => (s.into_bytes(), false),
        Either3::B(b) => (b.to_vec(), true),
        Either3::C(other) => {
            return Err(type_error("pattern", "a string or a Buffer", &other));
        }
    };
    Ok((NamePattern::new(bytes).map_err(lock_error)?, is_buffer))
}

/// `{ interval }` of `client.watch` (ms; default 250).
pub(crate) fn watch_interval(value: OptionsArg<'_>) -> Result<Timeout> {
    let default = || Timeout::from_duration("options.interval", DEFAULT_WATCH_INTERVAL);
    let Some(object) = options_object("options", value)? else {
        return default().map_err(lock_error);
    };
    known_keys("options", &object, &["interval"])?;
    let ms = object.get::<NumberArg>("interval")?.flatten();
    let what = "options.interval";
    match number_arg(what, MILLIS, ms, |ms| Timeout::from_millis_f64(what, ms))? {
        Some(interval) => Ok(interval),
        None => default().map_err(lock_error),
    }
}

/// A listed lock's name: a string, unless the pattern was a Buffer or the
/// name is not UTF-8.
fn found_name(name: &fencelock::LockName, as_buffer: bool) -> Either<String, Buffer> {
    match std::str::from_utf8(name.as_bytes()) {
        Ok(text) if !as_buffer => Either::A(text.to_owned()),
        _ => Either::B(name.as_bytes().to_vec().into()),
    }
}

pub(crate) fn info(info: fencelock::LockInfo) -> NativeLockInfo {
    NativeLockInfo {
        held: info.held,
        ttl: info.ttl.map(|d| d.as_millis() as f64),
        fence: info.fence.map(napi::bindgen_prelude::BigInt::from),
        held_by_me: info.held_by_me,
    }
}

/// One lock of `client.list`.
#[napi(object)]
pub struct NativeListedLock {
    pub name: Either<String, Buffer>,
    pub info: NativeLockInfo,
}

impl std::fmt::Debug for NativeListedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeListedLock")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// `client.list(pattern)`'s cursor.
#[napi]
pub struct NativeLockList {
    inner: Arc<Mutex<LockList>>,
    is_buffer: bool,
}

impl NativeLockList {
    pub(crate) fn new(list: LockList, is_buffer: bool) -> Self {
        NativeLockList {
            inner: Arc::new(Mutex::new(list)),
            is_buffer,
        }
    }
}

impl std::fmt::Debug for NativeLockList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeLockList")
    }
}

#[napi]
impl NativeLockList {
    /// Resolves to the next held lock, or null once every one was read.
    #[napi(ts_return_type = "Promise<NativeListedLock | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<NativeListedLock>>> {
        let (inner, is_buffer) = (Arc::clone(&self.inner), self.is_buffer);
        env.spawn_future(async move {
            let listed = inner.lock().await.next().await.map_err(lock_error)?;
            Ok(listed.map(|lock| NativeListedLock {
                name: found_name(&lock.name, is_buffer),
                info: info(lock.info),
            }))
        })
    }
}

/// `client.watch(name)`'s cursor.
#[napi]
pub struct NativeLockWatch {
    inner: Arc<Mutex<LockWatch>>,
}

impl NativeLockWatch {
    pub(crate) fn new(watch: LockWatch) -> Self {
        NativeLockWatch {
            inner: Arc::new(Mutex::new(watch)),
        }
    }
}

impl std::fmt::Debug for NativeLockWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeLockWatch")
    }
}

#[napi]
impl NativeLockWatch {
    /// Resolves to the lock now (first call), then at its next change.
    #[napi]
    pub fn next<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, NativeLockInfo>> {
        let inner = Arc::clone(&self.inner);
        env.spawn_future(async move {
            let changed = inner.lock().await.next().await.map_err(lock_error)?;
            Ok(info(changed))
        })
    }
}

/// Start aggregating the driver's metrics (idempotent).
#[napi]
pub fn metrics_enable() {
    metrics::enable();
}

/// A counter's value and its labels (maybe none).
#[napi(object)]
pub struct NativeSample {
    pub labels: HashMap<String, String>,
    pub value: f64,
}

/// A histogram bucket: upper bound in seconds, cumulative count.
#[napi(object)]
pub struct NativeBucket {
    pub le: f64,
    pub count: f64,
}

/// One metric family (names without the `_total` of counters).
#[napi(object)]
pub struct NativeMetricFamily {
    pub name: String,
    pub help: String,
    /// `"counter"` (`samples`) or `"histogram"` (`buckets`, `count`, `sum`).
    pub kind: String,
    pub samples: Vec<NativeSample>,
    pub buckets: Vec<NativeBucket>,
    pub count: f64,
    pub sum: f64,
}

/// Every metric family now.
#[napi]
pub fn metrics_snapshot() -> Vec<NativeMetricFamily> {
    metrics::snapshot()
        .into_iter()
        .map(|family| {
            let mut out = NativeMetricFamily {
                name: family.name.to_owned(),
                help: family.help.to_owned(),
                kind: "counter".to_owned(),
                samples: Vec::new(),
                buckets: Vec::new(),
                count: 0.0,
                sum: 0.0,
            };
            match family.values {
                Values::Counter(values) => {
                    out.samples = values
                        .into_iter()
                        .map(|(label, value)| NativeSample {
                            labels: label
                                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                                .into_iter()
                                .collect(),
                            value: value as f64,
                        })
                        .collect();
                }
                Values::Histogram(h) => {
                    out.kind = "histogram".to_owned();
                    out.buckets = h
                        .buckets
                        .into_iter()
                        .map(|(le, count)| NativeBucket {
                            le,
                            count: count as f64,
                        })
                        .collect();
                    out.count = h.count as f64;
                    out.sum = h.sum;
                }
            }
            out
        })
        .collect()
}
