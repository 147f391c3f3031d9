//! A try-once (or a short wait) right after a cancelled acquire of the same
//! client, on a lock nobody else holds, succeeds: the cancelled acquire still
//! holds the client's local turn for the name while its compensating release
//! runs, and that must not read as "the lock is busy" (found from Python:
//! wait=0 / try_acquire right after a cancelled acquire).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, LockOptions};

async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// Start an acquire, let it run for `i` µs of spinning (before, during and
/// after its round trip), drop it if it is not done. Returns whether it was
/// cancelled (a finished one is released).
async fn start_and_cancel(client: &Client, name: &str, i: u64) -> bool {
    let options = LockOptions::new(Duration::from_secs(60));
    let mut acquire = Box::pin(client.acquire(name, &options));
    let mut result = poll_once(acquire.as_mut()).await;
    if result.is_pending() {
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_micros(i) {
            std::hint::spin_loop();
        }
        result = poll_once(acquire.as_mut()).await;
    }
    match result {
        Poll::Ready(lease) => {
            lease.unwrap().release().await.unwrap();
            false
        }
        Poll::Pending => true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_once_right_after_a_cancelled_acquire_of_the_same_client() {
    let (url, _server) = redis_url();
    let name = unique("cancelthentry");
    let client = Client::connect(url.as_str()).await.unwrap();
    let k = keys(&name);
    let try_once = LockOptions::new(Duration::from_secs(60)).wait(Duration::ZERO);
    let short = LockOptions::new(Duration::from_secs(60)).wait(Duration::from_micros(1));
    let mut cancelled = 0;
    for i in 0..150u64 {
        if !start_and_cancel(&client, &name, (i % 50) * 4).await {
            continue;
        }
        cancelled += 1;
        // Nobody else uses this lock: each of these must get it.
        let lease = match i % 3 {
            0 => client.try_acquire(&name, &try_once).await.unwrap(),
            1 => Some(client.acquire(&name, &try_once).await.unwrap()),
            _ => Some(client.acquire(&name, &short).await.unwrap()),
        };
        let lease = lease.unwrap_or_else(|| panic!("iteration {i}: NotAcquired on a free lock"));
        assert_eq!(
            get(&url, &k.lock()).as_deref(),
            Some(lease.token().as_bytes())
        );
        lease.release().await.unwrap();
    }
    assert!(cancelled > 30, "only {cancelled} acquires were cancelled");
    assert!(!exists(&url, &k.lock()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_once_still_fails_while_a_live_local_lease_holds_the_lock() {
    let (url, _server) = redis_url();
    let name = unique("livelocal");
    let client = Client::connect(url.as_str()).await.unwrap();
    let try_once = LockOptions::new(Duration::from_secs(60)).wait(Duration::ZERO);
    let held = client.try_acquire(&name, &try_once).await.unwrap().unwrap();
    // Another local acquire was cancelled meanwhile (it was only queued):
    // the turn's holder is the live lease, so the try-once fails at once.
    assert!(start_and_cancel(&client, &name, 0).await);
    let t = Instant::now();
    assert!(client
        .try_acquire(&name, &try_once)
        .await
        .unwrap()
        .is_none());
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    held.release().await.unwrap();
    let lease = client.try_acquire(&name, &try_once).await.unwrap().unwrap();
    lease.release().await.unwrap();
}
