//! The one-round-trip handoff against real redis-servers: a release while
//! a waiter of the same client is in line hands it the lock inside the
//! release script (handoff.lua), with the next fence; a waiter cancelled
//! while that is in flight gives it back at once; Redlock; and another
//! client's waiter still gets its turn. No timings asserted.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    conn, eventually, exists, get, keys, pause_writes, pttl, redis_url, redlock_urls, unique,
};
use fencelock::{Client, LockOptions};
use fencelock_core::Script;
use fencelock_testkit::{Monitor, Seen, Server};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The scripts run on `name`'s lock key, by name, in order (MONITOR).
fn scripts_on(seen: &[Seen], name: &str) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let lock = keys(name).lock().to_vec();
    seen.iter()
        .filter(|s| {
            s.client != "lua"
                && s.args
                    .first()
                    .is_some_and(|v| v.eq_ignore_ascii_case(b"evalsha"))
        })
        .filter(|s| s.args.get(3) == Some(&lock))
        .map(|s| {
            let sha = String::from_utf8_lossy(&s.args[1]);
            let script = Script::ALL
                .into_iter()
                .find(|script| script.sha1() == sha)
                .expect("one of ours");
            let keys: usize = String::from_utf8_lossy(&s.args[2]).parse().unwrap();
            (script.name(), s.args[3 + keys..].to_vec())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_lock_to_a_local_waiter_in_one_round_trip() {
    // A private server: MONITOR sees this test only.
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("handoff");
    let holder = client
        .acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    // In line inside the call; its own ttl differs from the holder's.
    let waiting = client.acquire(&name, &LockOptions::new(secs(5)).wait(secs(30)));
    let monitor = Monitor::start(&url);
    holder.release().await.unwrap();
    let lease = waiting.await.unwrap();
    monitor.sync();
    let scripts = scripts_on(&monitor.seen(), &name);
    assert_eq!(
        scripts.iter().map(|s| s.0).collect::<Vec<_>>(),
        ["handoff"],
        "one EVALSHA for the release and the waiter's acquire together"
    );
    let args = &scripts[0].1;
    assert_eq!(args[0], holder.token().as_bytes());
    assert_eq!(args[1], lease.token().as_bytes());
    assert_eq!(args[2], b"5000", "the waiter's ttl");
    assert!(lease.fence() > holder.fence());
    assert_eq!(
        get(&url, &keys(&name).lock()),
        Some(lease.token().as_bytes().to_vec())
    );
    assert!(pttl(&url, &keys(&name).lock()) <= 5000);
    assert_eq!(
        get(&url, &keys(&name).fence()),
        Some(lease.fence().to_string().into_bytes())
    );
    assert!(lease.valid_for() > Duration::ZERO && lease.valid_for() <= secs(5));
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_local_waiters_is_handed_the_lock_in_call_order_with_rising_fences() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("handoff-chain");
    let options = LockOptions::new(secs(60));
    let holder = client.acquire(&name, &options).await.unwrap();
    let waiting: Vec<_> = (0..20).map(|_| client.acquire(&name, &options)).collect();
    let mut fence = holder.fence();
    holder.release().await.unwrap();
    for acquire in waiting {
        let lease = acquire.await.unwrap();
        assert!(lease.fence() > fence);
        fence = lease.fence();
        lease.release().await.unwrap();
    }
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_cancelled_while_the_handoff_is_in_flight_leaves_nothing_held() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("handoff-cancelled");
    let holder = client
        .acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    let waiting = client.acquire(&name, &LockOptions::new(secs(60)));
    let monitor = Monitor::start(&url);
    // Hold the server's writes: the release (with its handoff) is sent and
    // waits there, so the waiter's caller can leave before it runs.
    pause_writes(&url, 10_000);
    let release = tokio::spawn(async move { holder.release().await });
    eventually(secs(10), "the release waits at the server", || {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut conn(&url))
            .unwrap();
        info.lines()
            .filter_map(|l| l.strip_prefix("blocked_clients:"))
            .any(|n| n.trim() != "0")
    })
    .await;
    drop(waiting);
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut conn(&url))
        .unwrap();
    release.await.unwrap().unwrap();
    eventually(secs(10), "the waiter gave the lock back", || {
        !exists(&url, &keys(&name).lock())
    })
    .await;
    monitor.sync();
    let scripts = scripts_on(&monitor.seen(), &name);
    let names: Vec<&str> = scripts.iter().map(|s| s.0).collect();
    assert_eq!(
        names,
        ["handoff", "release"],
        "handed over, then given back"
    );
    assert_eq!(
        scripts[1].1[0], scripts[0].1[1],
        "by the waiter, with its token"
    );
    // Nothing held: the next acquire of this client gets it at once.
    let again = client
        .try_acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap()
        .expect("free");
    again.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_hands_the_lock_over_on_every_node() {
    let (urls, _servers) = redlock_urls();
    let client = Client::connect(urls.clone()).await.unwrap();
    let name = unique("handoff-redlock");
    let options = LockOptions::new(secs(60));
    let holder = client.acquire(&name, &options).await.unwrap();
    let waiting = client.acquire(&name, &options);
    let monitors: Vec<Monitor> = urls.iter().map(|u| Monitor::start(u)).collect();
    holder.release().await.unwrap();
    let lease = waiting.await.unwrap();
    assert!(lease.fence() > holder.fence());
    for (url, monitor) in urls.iter().zip(&monitors) {
        monitor.sync();
        let scripts: Vec<&str> = scripts_on(&monitor.seen(), &name)
            .iter()
            .map(|s| s.0)
            .collect();
        // A node a few ms behind may also be raised to the majority's fence.
        assert_eq!(scripts[0], "handoff", "{url}: {scripts:?}");
        assert!(!scripts.contains(&"acquire"), "{url}: {scripts:?}");
        assert_eq!(
            get(url, &keys(&name).lock()),
            Some(lease.token().as_bytes().to_vec())
        );
    }
    lease.release().await.unwrap();
    for url in &urls {
        assert!(!exists(url, &keys(&name).lock()));
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_another_client_still_gets_its_turn() {
    let (url, _server) = redis_url();
    let busy = Client::connect(url.as_str()).await.unwrap();
    let other = Client::connect(url.as_str()).await.unwrap();
    let name = unique("handoff-fair");
    let options = LockOptions::new(secs(10)).wait(secs(30));
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    // Four workers of one client take the lock back to back: with nobody
    // else waiting, every release hands it to the next of them.
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (client, name, options) = (busy.clone(), name.clone(), options.clone());
            let (stop, rounds) = (Arc::clone(&stop), Arc::clone(&rounds));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let lease = client.acquire(&name, &options).await.unwrap();
                    rounds.fetch_add(1, Ordering::Relaxed);
                    lease.release().await.unwrap();
                }
            })
        })
        .collect();
    eventually(secs(10), "the busy client gets going", || {
        rounds.load(Ordering::Relaxed) > 50
    })
    .await;
    // The other client's waiter subscribes: from then on releases free the
    // lock and publish, and it gets its turn (within the wait, not at the
    // end of the others' work: they never stop on their own).
    for _ in 0..3 {
        let lease = other.acquire(&name, &options).await.unwrap();
        lease.release().await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await.unwrap();
    }
    busy.close().await;
    other.close().await;
}
