//! Renewal controls against a real Redis: `LockOptions::max_hold` and
//! `Lease::stop_renewing`. Each test has a private server, so MONITOR sees
//! only its own lease's commands.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, Error, Lease, LockOptions};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// How many times a script PEXPIREd `key` among the commands `monitor`
/// saw from index `from` on.
fn pexpires(monitor: &Monitor, key: &[u8], from: usize) -> usize {
    monitor.seen()[from..]
        .iter()
        .filter(|s| {
            s.client == "lua"
                && s.args.len() >= 2
                && s.args[0].eq_ignore_ascii_case(b"PEXPIRE")
                && s.args[1] == key
        })
        .count()
}

/// Waits (bounded) for the lease to be reported lost, through both
/// `lost_signal` and `on_lost`; returns when, measured from `since`.
async fn wait_lost(lease: &Lease, since: Instant) -> Duration {
    let (tx, rx) = tokio::sync::oneshot::channel();
    lease.on_lost(move || {
        let _ = tx.send(());
    });
    tokio::time::timeout(secs(15), lease.lost_signal())
        .await
        .expect("the lease was reported lost");
    let elapsed = since.elapsed();
    tokio::time::timeout(secs(5), rx)
        .await
        .expect("on_lost ran")
        .unwrap();
    assert!(lease.lost());
    assert_eq!(lease.valid_for(), Duration::ZERO);
    elapsed
}

#[tokio::test]
async fn max_hold_stops_renewal_and_the_lease_is_lost_at_its_validity_end() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let monitor = Monitor::start(&url);
    let name = unique("maxhold");
    let k = keys(&name);
    let (ttl, max_hold) = (secs(1), secs(2));
    let started = Instant::now();
    let lease = client
        .acquire(
            &name,
            &LockOptions::new(ttl).auto_renew(true).max_hold(max_hold),
        )
        .await
        .unwrap();
    let acquired = Instant::now();
    let lost = wait_lost(&lease, started).await;
    // Renewed past the first ttl (lost no earlier than max_hold), then left
    // to run out: lost within about max_hold + ttl (generous under load).
    assert!(lost >= max_hold, "lost after {lost:?}");
    assert!(lost <= max_hold + ttl + secs(3), "lost after {lost:?}");
    eventually(secs(3), "the key expired in Redis", || {
        !exists(&url, &k.lock())
    })
    .await;
    // Renewals came every ttl/3 until max_hold, never more often.
    let renewals = pexpires(&monitor, &k.lock(), 0);
    assert!((1..=6).contains(&renewals), "{renewals} renewals");
    // None is decided after max_hold (counted from the acquire's send,
    // which is before `acquired`); 300 ms for one still on its way.
    tokio::time::sleep_until((acquired + max_hold + ms(300)).into()).await;
    let checkpoint = monitor.sync();
    assert!(matches!(lease.release().await, Err(Error::LockLost { .. })));
    assert_eq!(pexpires(&monitor, &k.lock(), checkpoint), 0);
    assert_eq!(pexpires(&monitor, &k.lock(), 0), renewals);
    client.close().await;
}

#[tokio::test]
async fn stop_renewing_lets_the_lease_run_out_and_is_idempotent() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let monitor = Monitor::start(&url);
    let name = unique("stoprenew");
    let k = keys(&name);
    let started = Instant::now();
    let lease = client
        .acquire(&name, &LockOptions::new(secs(1)).auto_renew(true))
        .await
        .unwrap();
    // The first renewal is ttl/3 away: stopped long before it.
    lease.stop_renewing();
    lease.stop_renewing();
    assert!(!lease.lost());
    assert!(lease.valid_for() > Duration::ZERO);
    let lost = wait_lost(&lease, started).await;
    assert!(lost <= secs(1) + secs(3), "lost after {lost:?}");
    eventually(secs(3), "the key expired in Redis", || {
        !exists(&url, &k.lock())
    })
    .await;
    monitor.sync();
    assert_eq!(
        pexpires(&monitor, &k.lock(), 0),
        0,
        "renewed after the stop"
    );
    assert!(matches!(lease.release().await, Err(Error::LockLost { .. })));
    lease.stop_renewing(); // still a no-op once lost
    client.close().await;
}

#[tokio::test]
async fn an_explicit_extend_after_stop_renewing_extends_once() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let monitor = Monitor::start(&url);
    let name = unique("stopextend");
    let k = keys(&name);
    let lease = client
        .acquire(&name, &LockOptions::new(secs(1)).auto_renew(true))
        .await
        .unwrap();
    lease.stop_renewing();
    let extended = Instant::now();
    lease.extend(Some(secs(2))).await.unwrap();
    assert!(lease.valid_for() > secs(1));
    let lost = wait_lost(&lease, extended).await;
    // The extend's 2 s, not a renewal's more.
    assert!(lost >= secs(1), "lost after {lost:?}");
    assert!(lost <= secs(2) + secs(3), "lost after {lost:?}");
    eventually(secs(3), "the key expired in Redis", || {
        !exists(&url, &k.lock())
    })
    .await;
    monitor.sync();
    assert_eq!(
        pexpires(&monitor, &k.lock(), 0),
        1,
        "only the caller's extend"
    );
    client.close().await;
}

#[tokio::test]
async fn renewal_controls_change_nothing_for_a_lease_that_does_not_renew() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("norenew");
    let lease = client
        .acquire(&name, &LockOptions::new(secs(5)).max_hold(ms(1)))
        .await
        .unwrap();
    lease.stop_renewing();
    lease.extend(None).await.unwrap();
    assert!(!lease.lost());
    assert!(lease.valid_for() > secs(4));
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

#[tokio::test]
async fn bad_max_hold_values_are_refused_before_any_redis_call() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let mut monitor = Monitor::start(&url);
    for bad in [
        Duration::ZERO,
        Duration::from_millis((1 << 40) + 1),
        Duration::MAX,
    ] {
        let options = LockOptions::new(secs(1)).auto_renew(true).max_hold(bad);
        let r = client.acquire("maxhold-bad", &options).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{bad:?}: {r:?}"
        );
        let r = client.try_acquire("maxhold-bad", &options).await;
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "{bad:?}: {r:?}"
        );
    }
    assert_eq!(monitor.commands(), Vec::<String>::new());
    assert_eq!(dbsize(&url), 0);
    // The largest one is fine.
    let options = LockOptions::new(secs(1))
        .auto_renew(true)
        .max_hold(Duration::from_millis(1 << 40));
    client
        .acquire("maxhold-bad", &options)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    client.close().await;
}
