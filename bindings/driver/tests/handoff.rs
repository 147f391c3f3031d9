//! The driver's one abandon path and one loss watcher, as the front ends use
//! them: `Acquire::granted` (a lease released if its caller never claims it)
//! and `Lease::on_lost`. Real redis-server.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{conn, eventually, exists, keys, redis_url, unique};
use fencelock::{Client, LockOptions};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_lease_dropped_unclaimed_is_released_and_a_claimed_one_is_not() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let options = LockOptions::new(secs(60));

    let name = unique("granted-dropped");
    let granted = client.acquire(&name, &options).granted().await.unwrap();
    assert!(granted.lease().fence() > 0);
    assert!(exists(&url, &keys(&name).lock()));
    drop(granted);
    // With a 60 s TTL, a lease left to expire would still be there.
    eventually(secs(5), "the unclaimed lease was released", || {
        !exists(&url, &keys(&name).lock())
    })
    .await;

    let name = unique("granted-claimed");
    let lease = client
        .acquire(&name, &options)
        .granted()
        .await
        .unwrap()
        .claim();
    let token = lease.token().to_owned();
    drop(lease);
    // try_acquire: None when held (here: by the claimed, dropped lease).
    let none = client.try_acquire(&name, &options).granted().await.unwrap();
    assert!(none.is_none());
    // Claimed: dropping leaves the key to expire, as for any lease (the
    // round trip above gave the actor time to act on the drop).
    let held: Option<String> = redis::cmd("GET")
        .arg(&*keys(&name).lock())
        .query(&mut conn(&url))
        .unwrap();
    assert_eq!(
        held.as_deref(),
        Some(token.as_str()),
        "a claimed lease is not released by drop"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_runs_once_when_the_lease_is_lost_and_at_once_if_it_already_is() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("on-lost");
    let lease = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_millis(600)).auto_renew(true),
        )
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen_lost = Arc::new(AtomicBool::new(false));
    let lease = Arc::new(lease);
    {
        let (calls, seen_lost, lease) = (calls.clone(), seen_lost.clone(), lease.clone());
        lease.clone().on_lost(move || {
            // Marked lost before anyone is told.
            seen_lost.store(lease.lost(), Ordering::SeqCst);
            // Blocking is allowed: the callback runs on the blocking pool.
            std::thread::sleep(Duration::from_millis(10));
            calls.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Someone deletes the key: the next renewal finds it gone.
    let _: i64 = redis::cmd("DEL")
        .arg(&*keys(&name).lock())
        .query(&mut conn(&url))
        .unwrap();
    eventually(secs(3), "on_lost ran", || calls.load(Ordering::SeqCst) == 1).await;
    assert!(seen_lost.load(Ordering::SeqCst));

    // Registered after the loss: runs at once.
    let late = Arc::new(AtomicUsize::new(0));
    let counter = late.clone();
    lease.on_lost(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    eventually(secs(3), "a late on_lost ran", || {
        late.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "once");
    client.close().await;
}

/// Sets its flag when dropped: a watcher that ends without calling drops it.
struct Dropped(Arc<AtomicBool>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_ends_without_a_call_after_a_release_or_a_drop() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let options = LockOptions::new(secs(30)).auto_renew(true);
    let watch = |lease: &fencelock::Lease| {
        let called = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let guard = Dropped(ended.clone());
        let flag = called.clone();
        lease.on_lost(move || {
            let _guard = guard;
            flag.store(true, Ordering::SeqCst);
        });
        (called, ended)
    };

    let released = client.acquire(unique("released"), &options).await.unwrap();
    let (called, ended) = watch(&released);
    released.release().await.unwrap();
    eventually(secs(3), "the watcher of a released lease ended", || {
        ended.load(Ordering::SeqCst)
    })
    .await;
    assert!(!called.load(Ordering::SeqCst));
    // Registered after the release: ends at once.
    let (called, ended) = watch(&released);
    eventually(secs(3), "a late watcher ended", || {
        ended.load(Ordering::SeqCst)
    })
    .await;
    assert!(!called.load(Ordering::SeqCst));

    let dropped = client.acquire(unique("dropped"), &options).await.unwrap();
    let (called, ended) = watch(&dropped);
    drop(dropped);
    eventually(secs(3), "the watcher of a dropped lease ended", || {
        ended.load(Ordering::SeqCst)
    })
    .await;
    assert!(!called.load(Ordering::SeqCst));
    client.close().await;
}
