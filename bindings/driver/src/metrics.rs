//! Lock metrics, recorded once, here: acquire latency, wait time,
//! contention, renewals, losses and releases. The lease actor (`driver.rs`)
//! makes one call per event; every front end reads the same numbers.
//!
//! Two outlets:
//! - `tracing`: every event is a TRACE event on target `fencelock::metrics`
//!   with the lock's name and the event's fields (`wait_us`, `latency_us`,
//!   `outcome`, ...), for subscribers that aggregate themselves;
//! - an in-process aggregate of counters and fixed-bucket histograms in
//!   atomics, off until [`enable`]: [`snapshot`] reads it, as the Python and
//!   Node Prometheus hooks do at each scrape (one call, no per-event work in
//!   Python or JavaScript, no runtime thread ever waiting for the GIL or the
//!   JS thread).
//!
//! With neither listening an event costs one relaxed atomic load and
//! tracing's level check; nothing is allocated. Metrics are per process
//! and carry no lock names as labels (names are unbounded; the `tracing`
//! events carry them).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fencelock_core::{Error, Instant, LockName, LockStats};

const TARGET: &str = "fencelock::metrics";

/// Upper bounds (seconds) of the histogram buckets: 0.25 ms to 10 s.
pub const BUCKETS: [f64; 14] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Start aggregating (idempotent; there is no off: counters only grow).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called in this process.
pub fn is_enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

// ------------------------------------------------------------- the aggregate

struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }
    fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Histo {
    /// Per bucket (the last: above every bound), not cumulative.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histo {
    const fn new() -> Self {
        Histo {
            counts: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            sum_ns: AtomicU64::new(0),
        }
    }

    fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let at = BUCKETS
            .iter()
            .position(|&bound| secs <= bound)
            .unwrap_or(BUCKETS.len());
        self.counts[at].fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn read(&self) -> Histogram {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(BUCKETS.len());
        for (bound, count) in BUCKETS.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let count = cumulative + self.counts[BUCKETS.len()].load(Ordering::Relaxed);
        Histogram {
            buckets,
            count,
            sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

static ACQUIRED: Counter = Counter::new();
static NOT_ACQUIRED: Counter = Counter::new();
static ACQUIRE_ERRORS: Counter = Counter::new();
static CANCELLED: Counter = Counter::new();
static CONTENDED: Counter = Counter::new();
static RENEWED: Counter = Counter::new();
static RENEWAL_FAILED: Counter = Counter::new();
static LOSSES: Counter = Counter::new();
static RELEASED: Counter = Counter::new();
static RELEASE_LOST: Counter = Counter::new();
static RELEASE_ERRORS: Counter = Counter::new();
static LATENCY: Histo = Histo::new();
static WAIT: Histo = Histo::new();

// ------------------------------------------------------------- the snapshot

/// A histogram as Prometheus exposes one: cumulative counts per upper
/// bound (seconds; `+Inf` is `count`), the number of observations and
/// their sum in seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

/// One metric family's values.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// Counters, each with its `(label, value)` pair if it has one.
    Counter(Vec<(Option<(&'static str, &'static str)>, u64)>),
    Histogram(Histogram),
}

/// One metric family: its name (without Prometheus's `_total` suffix for
/// counters, which the exporters add), help text and values.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub values: Values,
}

/// Every family, read now (all zero until [`enable`]). The names and help
/// texts are written here once; the Python and Node exporters only
/// translate.
pub fn snapshot() -> Vec<Family> {
    let counter = |name, help, values: Vec<(Option<(&'static str, &'static str)>, u64)>| Family {
        name,
        help,
        values: Values::Counter(values),
    };
    let outcome = |o: &'static str, c: &Counter| (Some(("outcome", o)), c.get());
    vec![
        counter(
            "fencelock_acquires",
            "Acquire calls by outcome (acquired, not_acquired: the wait ran out, error, cancelled).",
            vec![
                outcome("acquired", &ACQUIRED),
                outcome("not_acquired", &NOT_ACQUIRED),
                outcome("error", &ACQUIRE_ERRORS),
                outcome("cancelled", &CANCELLED),
            ],
        ),
        counter(
            "fencelock_contended_attempts",
            "Acquire attempts that found the lock held by someone else.",
            vec![(None, CONTENDED.get())],
        ),
        counter(
            "fencelock_renewals",
            "Auto-renewals by outcome (ok, failed: lost or too few nodes answered).",
            vec![outcome("ok", &RENEWED), outcome("failed", &RENEWAL_FAILED)],
        ),
        counter(
            "fencelock_losses",
            "Leases lost (a renewal, extend or release found the lock gone, or its validity ran out).",
            vec![(None, LOSSES.get())],
        ),
        counter(
            "fencelock_releases",
            "Releases by outcome (ok, lost: the lease was no longer held, error).",
            vec![
                outcome("ok", &RELEASED),
                outcome("lost", &RELEASE_LOST),
                outcome("error", &RELEASE_ERRORS),
            ],
        ),
        Family {
            name: "fencelock_acquire_latency_seconds",
            help: "From sending the acquire attempt that won to the grant (a fence write-back included).",
            values: Values::Histogram(LATENCY.read()),
        },
        Family {
            name: "fencelock_wait_seconds",
            help: "From calling acquire to getting the lease (queueing and contention included).",
            values: Values::Histogram(WAIT.read()),
        },
    ]
}

// ------------------------------------------------------------- recording

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A lease was granted to its caller, who called acquire at `started`;
/// the winning attempt was sent at `sent`. The clock is read only if
/// something listens.
pub(crate) fn acquired(name: &LockName, started: std::time::Instant, sent: Option<Instant>) {
    let counted = is_enabled();
    let traced = tracing::enabled!(target: TARGET, tracing::Level::TRACE);
    if !(counted || traced) {
        return;
    }
    let wait = started.elapsed();
    let latency = sent.map_or(wait, |sent| {
        crate::clock::now().saturating_duration_since(sent)
    });
    tracing::trace!(target: TARGET, lock = %name, wait_us = micros(wait), latency_us = micros(latency), "acquired");
    if counted {
        ACQUIRED.add(1);
        WAIT.observe(wait);
        LATENCY.observe(latency);
    }
}

/// An acquire's caller got `error` (the wait ran out, Redis, closed).
pub(crate) fn acquire_failed(name: &LockName, error: &Error) {
    let not_acquired = matches!(error, Error::NotAcquired { .. });
    let outcome = if not_acquired {
        "not_acquired"
    } else {
        "error"
    };
    tracing::trace!(target: TARGET, lock = %name, outcome, "acquire failed");
    if is_enabled() {
        match not_acquired {
            true => NOT_ACQUIRED.add(1),
            false => ACQUIRE_ERRORS.add(1),
        }
    }
}

/// The acquire's caller gave up (dropped future, asyncio cancel,
/// AbortSignal, Ctrl-C).
pub(crate) fn acquire_cancelled(name: &LockName) {
    tracing::trace!(target: TARGET, lock = %name, "acquire cancelled");
    if is_enabled() {
        CANCELLED.add(1);
    }
}

/// A lease was lost.
pub(crate) fn lost(name: &LockName) {
    tracing::trace!(target: TARGET, lock = %name, "lost");
    if is_enabled() {
        LOSSES.add(1);
    }
}

/// A caller's release finished.
pub(crate) fn released(name: &LockName, result: &Result<(), Error>) {
    let outcome = match result {
        Ok(()) => "ok",
        Err(Error::LockLost { .. }) => "lost",
        Err(_) => "error",
    };
    tracing::trace!(target: TARGET, lock = %name, outcome, "released");
    if is_enabled() {
        match outcome {
            "ok" => RELEASED.add(1),
            "lost" => RELEASE_LOST.add(1),
            _ => RELEASE_ERRORS.add(1),
        }
    }
}

/// What of one lock's core [`LockStats`] was recorded already: the actor
/// hands in the stats after each reply and the changes are recorded. Only
/// the counters (a held lease keeps this).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    contended: u32,
    renewals: u32,
    failed: u32,
}

impl Seen {
    pub(crate) fn record(&mut self, name: &LockName, now: LockStats) {
        let contended = now.contended_attempts.saturating_sub(self.contended);
        let renewed = now.renewals.saturating_sub(self.renewals);
        let failed = now.failed_renewals.saturating_sub(self.failed);
        (self.contended, self.renewals, self.failed) =
            (now.contended_attempts, now.renewals, now.failed_renewals);
        if contended + renewed + failed == 0 {
            return;
        }
        if contended > 0 {
            tracing::trace!(target: TARGET, lock = %name, attempts = contended, "found the lock held");
        }
        if renewed > 0 {
            tracing::trace!(target: TARGET, lock = %name, "renewed");
        }
        if failed > 0 {
            tracing::trace!(target: TARGET, lock = %name, "renewal failed");
        }
        if is_enabled() {
            CONTENDED.add(u64::from(contended));
            RENEWED.add(u64::from(renewed));
            RENEWAL_FAILED.add(u64::from(failed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let h = Histo::new();
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(30));
        let read = h.read();
        assert_eq!(read.count, 3);
        assert!((read.sum - 30.0031).abs() < 1e-9, "{}", read.sum);
        assert_eq!(read.buckets[0], (0.000_25, 1));
        assert_eq!(read.buckets[4], (0.005, 2));
        assert_eq!(read.buckets.last(), Some(&(10.0, 2)));
    }

    #[test]
    fn every_family_has_a_help_text_and_a_fencelock_name() {
        for family in snapshot() {
            assert!(family.name.starts_with("fencelock_"), "{}", family.name);
            assert!(!family.help.is_empty());
        }
    }
}
