//! Guarantees of every acquire, which a faster path must keep too (written
//! for the inline fast path on branch `fastpath`): a future dropped
//! mid-flight leaves no lock and never turns away the client's next
//! acquire, a contended first attempt waits in the local FIFO like any
//! other, an unclaimed lease is released, and a local waiter behind a lease
//! that is lost gets its turn.
//! Real redis-server; no timings asserted.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use common::{eventually, exists, keys, numsub, redis_url, unique};
use fencelock::{Client, LockOptions};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Keys of this lock in Redis (the lock key itself, counted by `EXISTS`).
fn lock_keys(url: &str, name: &str) -> i64 {
    redis::cmd("EXISTS")
        .arg(&*keys(name).lock())
        .query(&mut common::conn(url))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_dropped_mid_flight_leaves_no_key_and_turns_no_one_away() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    // Unbounded and bounded waits and a try-once, each on a free lock. The
    // try-once is the strict one: each round's acquire comes right after
    // the previous one was dropped mid-flight.
    for (i, options) in [
        LockOptions::new(secs(60)),
        LockOptions::new(secs(60)).wait(secs(30)),
        LockOptions::new(secs(60)).wait(Duration::ZERO),
    ]
    .iter()
    .enumerate()
    {
        let name = unique("fast-drop");
        let mut dropped = 0;
        for round in 0..200u64 {
            let mut acquire = Box::pin(client.acquire(&name, options));
            // First poll: the script is handed to the connection.
            let mut result = poll_once(acquire.as_mut()).await;
            if result.is_pending() {
                let spin = Instant::now();
                while spin.elapsed() < Duration::from_micros(round * 3) {
                    std::hint::spin_loop();
                }
                result = poll_once(acquire.as_mut()).await;
            }
            match result {
                // A try-once right behind a dropped acquire of ours must
                // not be turned away by it: the dropped attempt holds the
                // turn until its compensating release is answered, and a
                // dropped waiter leaves the line at once (see `queue.rs`).
                Poll::Ready(Err(e)) => panic!("options {i}, round {round}: {e}"),
                Poll::Ready(lease) => lease.unwrap().release().await.unwrap(),
                Poll::Pending => {
                    drop(acquire);
                    dropped += 1;
                }
            }
        }
        assert!(
            dropped > 10,
            "options {i}: only {dropped} acquires were dropped"
        );
        // With a 60 s TTL a leaked lock would still be there: every
        // compensating release ran.
        eventually(secs(5), "no lock left behind", || {
            lock_keys(&url, &name) == 0
        })
        .await;
        // And this client's own line is free again: a try-once gets it.
        let lease = client
            .try_acquire(&name, &LockOptions::new(secs(5)))
            .await
            .unwrap()
            .expect("nothing may hold the lock after the dropped acquires");
        lease.release().await.unwrap();
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_first_attempt_falls_back_and_waits_in_fifo_order() {
    let (url, _server) = redis_url();
    let name = unique("fast-contended");
    let other = Client::connect(url.as_str()).await.unwrap();
    let client = Client::connect(url.as_str()).await.unwrap();
    let held = other
        .acquire(&name, &LockOptions::new(secs(30)))
        .await
        .unwrap();

    let options = LockOptions::new(secs(10)).wait(secs(20));
    // In call order: the first takes the free turn and finds
    // the lock held; the others line up behind it.
    let acquires: Vec<_> = (0..4).map(|_| client.acquire(&name, &options)).collect();
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    // Spawned in reverse: the order served must still be the call order.
    for (i, acquire) in acquires.into_iter().enumerate().rev() {
        let served = Arc::clone(&served);
        tasks.push(tokio::spawn(async move {
            let lease = acquire.await.unwrap();
            served.lock().unwrap().push(i);
            lease.release().await.unwrap();
        }));
    }
    // The first attempt failed and its actor now waits for the release
    // notification.
    eventually(secs(5), "the first waiter subscribed", || {
        numsub(&url, &keys(&name).channel()) >= 1
    })
    .await;
    assert!(served.lock().unwrap().is_empty());
    held.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*served.lock().unwrap(), vec![0, 1, 2, 3]);
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_dropped_unclaimed_is_released() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let options = LockOptions::new(secs(60));
    for _ in 0..20 {
        let name = unique("fast-unclaimed");
        let granted = client.acquire(&name, &options).granted().await.unwrap();
        assert_eq!(lock_keys(&url, &name), 1);
        drop(granted);
        // With a 60 s TTL, a lease left to expire would still be there.
        eventually(secs(5), "the unclaimed lease was released", || {
            lock_keys(&url, &name) == 0
        })
        .await;
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_behind_a_lost_lease_gets_the_turn() {
    let (url, _server) = redis_url();
    let name = unique("fast-lost");
    let client = Client::connect(url.as_str()).await.unwrap();
    // Held and never released: only its expiry lets the waiter in.
    let first = client
        .acquire(&name, &LockOptions::new(Duration::from_millis(300)))
        .await
        .unwrap();
    let second = client
        .acquire(&name, &LockOptions::new(secs(10)).wait(secs(10)))
        .await
        .unwrap();
    assert!(first.lost(), "the first lease's validity ran out");
    assert!(second.fence() > first.fence());
    assert!(matches!(
        first.release().await,
        Err(fencelock::Error::LockLost { .. })
    ));
    second.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_in_line_before_the_grant_gets_the_turn_when_the_lease_runs_out() {
    let (url, _server) = redis_url();
    let name = unique("fast-lost-early");
    let client = Client::connect(url.as_str()).await.unwrap();
    // Both line up in their calls, before either is polled: the second is
    // already waiting when the first's grant arrives, so the first lease
    // must arm its expiry at once rather than when someone lines up.
    let first = client.acquire(&name, &LockOptions::new(Duration::from_millis(300)));
    let second = client.acquire(&name, &LockOptions::new(secs(10)).wait(secs(5)));
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    assert!(first.lost(), "the first lease's validity ran out");
    assert!(second.fence() > first.fence());
    second.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_renewing_lease_extends_and_reports_its_loss() {
    let (url, _server) = redis_url();
    let name = unique("fast-extend");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(secs(1)))
        .await
        .unwrap();
    lease.extend(Some(secs(30))).await.unwrap();
    assert!(common::pttl(&url, &keys(&name).lock()) > 5_000);
    assert!(lease.valid_for() > secs(5));
    // Gone under it: the next extend finds out, and the loss is signalled.
    let _: i64 = redis::cmd("DEL")
        .arg(&*keys(&name).lock())
        .query(&mut common::conn(&url))
        .unwrap();
    assert!(matches!(
        lease.extend(None).await,
        Err(fencelock::Error::LockLost { .. })
    ));
    tokio::time::timeout(secs(5), lease.lost_signal())
        .await
        .expect("lost_signal");
    client.close().await;
}
