//! `fencelock::metrics`: the aggregate every front end exports and the
//! `tracing` events on target `fencelock::metrics`. One test in its own
//! binary: the counters are per process.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use std::time::Duration;

use common::*;
use fencelock::metrics::{self, Family, Values};
use fencelock::{Client, Error, LockOptions};
use recorder::Recorder;

fn ttl(ms: u64) -> LockOptions {
    LockOptions::new(Duration::from_millis(ms))
}

/// A counter's value (`outcome` label, or `None` for an unlabelled one).
fn count(families: &[Family], name: &str, outcome: Option<&str>) -> u64 {
    let family = families.iter().find(|f| f.name == name).expect(name);
    let Values::Counter(values) = &family.values else {
        panic!("{name} is not a counter")
    };
    values
        .iter()
        .find(|(label, _)| label.map(|(_, o)| o) == outcome)
        .map(|(_, v)| *v)
        .expect("the outcome")
}

fn histogram(families: &[Family], name: &str) -> metrics::Histogram {
    match &families.iter().find(|f| f.name == name).expect(name).values {
        Values::Histogram(h) => h.clone(),
        Values::Counter(_) => panic!("{name} is not a histogram"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_contention_renewals_losses_and_releases_are_counted() {
    let recorder = Recorder::install();
    let (url, _server) = redis_url();
    let client = Client::connect(url.clone()).await.unwrap();
    let other = Client::connect(url.clone()).await.unwrap();
    let name = unique("metrics");

    // Off until enabled: nothing counted.
    client
        .acquire(&name, &ttl(10_000))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    assert!(!metrics::is_enabled());
    assert_eq!(
        count(&metrics::snapshot(), "fencelock_acquires", Some("acquired")),
        0
    );
    metrics::enable();

    // Uncontended: acquired, one latency and one wait observation.
    let lease = client.acquire(&name, &ttl(10_000)).await.unwrap();
    // Contended: a try-once that finds it held, a wait that runs out.
    assert!(other
        .try_acquire(&name, &ttl(1_000))
        .await
        .unwrap()
        .is_none());
    let waited = other
        .acquire(&name, &ttl(1_000).wait(Duration::from_millis(50)))
        .await;
    assert!(matches!(waited, Err(Error::NotAcquired { .. })));
    lease.release().await.unwrap();

    // Auto-renewed, then taken away: renewals ok, one failed, a loss, and
    // a release that finds it lost.
    let renewed = client
        .acquire(&name, &ttl(150).auto_renew(true))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "two renewals", || {
        count(&metrics::snapshot(), "fencelock_renewals", Some("ok")) >= 2
    })
    .await;
    other.force_release(&name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), renewed.lost_signal())
        .await
        .expect("lost at the next renewal");
    assert!(matches!(
        renewed.release().await,
        Err(Error::LockLost { .. })
    ));

    let now = metrics::snapshot();
    assert_eq!(count(&now, "fencelock_acquires", Some("acquired")), 2);
    assert_eq!(count(&now, "fencelock_acquires", Some("not_acquired")), 2);
    assert_eq!(count(&now, "fencelock_acquires", Some("error")), 0);
    // The waiter may ask once more when its subscription is confirmed.
    let contended = count(&now, "fencelock_contended_attempts", None);
    assert!((2..=3).contains(&contended), "{contended}");
    assert!(count(&now, "fencelock_renewals", Some("ok")) >= 2);
    assert_eq!(count(&now, "fencelock_renewals", Some("failed")), 1);
    assert_eq!(count(&now, "fencelock_losses", None), 1);
    assert_eq!(count(&now, "fencelock_releases", Some("ok")), 1);
    assert_eq!(count(&now, "fencelock_releases", Some("lost")), 1);
    for name in [
        "fencelock_acquire_latency_seconds",
        "fencelock_wait_seconds",
    ] {
        let h = histogram(&now, name);
        assert_eq!(h.count, 2, "{name}");
        assert!(h.sum > 0.0 && h.sum < 5.0, "{name}: {}", h.sum);
        assert_eq!(h.buckets.last().unwrap().1, 2, "{name}: two below 10 s");
    }

    // A dropped acquire is counted as cancelled.
    let holding = client.acquire(&name, &ttl(10_000)).await.unwrap();
    let waiting = other.acquire(&name, &ttl(1_000));
    assert!(tokio::time::timeout(Duration::from_millis(100), waiting)
        .await
        .is_err());
    eventually(Duration::from_secs(5), "the cancel counted", || {
        count(
            &metrics::snapshot(),
            "fencelock_acquires",
            Some("cancelled"),
        ) == 1
    })
    .await;
    holding.release().await.unwrap();

    // The tracing side: events with the lock's name and the figures.
    let lines = recorder.lines();
    let metric_lines: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("TRACE fencelock::metrics"))
        .collect();
    let shown = |what: &str| metric_lines.iter().any(|l| l.contains(what));
    assert!(shown("wait_us="), "{metric_lines:#?}");
    assert!(shown("latency_us="));
    assert!(shown(&name));
    for event in [
        "acquired",
        "acquire failed",
        "found the lock held",
        "renewed",
        "renewal failed",
        "lost",
        "released",
        "acquire cancelled",
    ] {
        let message = format!("message={event}");
        let found = metric_lines.iter().any(|l| {
            l.split(" message=")
                .nth(1)
                .is_some_and(|rest| rest == event || rest.starts_with(&format!("{event} ")))
                || l.ends_with(&message)
        });
        assert!(found, "no {event} event: {metric_lines:#?}");
    }
}
