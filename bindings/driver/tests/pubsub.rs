//! The shared pub/sub: one connection per node per client serves every
//! waiter; local waiters queue in FIFO order; a killed pub/sub connection
//! does not strand waiters.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, LockOptions};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn pubsub_clients(url: &str) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg(&["LIST", "TYPE", "pubsub"])
        .query(&mut conn(url))
        .unwrap();
    list.lines().filter(|l| !l.trim().is_empty()).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pubsub_connection_serves_every_waiter() {
    let server = Server::start();
    let url = server.url();
    let holder = Client::connect(url.as_str()).await.unwrap();
    let waiting = Client::connect(url.as_str()).await.unwrap();
    let names: Vec<String> = (0..20).map(|i| format!("shared-{i}")).collect();
    let mut held = Vec::new();
    for name in &names {
        held.push(
            holder
                .acquire(name, &LockOptions::new(secs(30)))
                .await
                .unwrap(),
        );
    }
    let mut waiters = Vec::new();
    for name in &names {
        // Two waiters per name from the same client: one remote attempt,
        // one local queue, one subscription.
        for _ in 0..2 {
            let (waiting, name) = (waiting.clone(), name.clone());
            waiters.push(tokio::spawn(async move {
                let lease = waiting
                    .acquire(&name, &LockOptions::new(secs(30)))
                    .await
                    .unwrap();
                lease.release().await.unwrap();
            }));
        }
    }
    eventually(secs(5), "every name has its subscriber", || {
        names.iter().all(|n| numsub(&url, &keys(n).channel()) == 1)
    })
    .await;
    assert_eq!(
        pubsub_clients(&url),
        1,
        "one pub/sub connection for all waiters"
    );
    for lease in held {
        lease.release().await.unwrap();
    }
    for waiter in waiters {
        tokio::time::timeout(secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }
    eventually(secs(5), "every subscription is gone", || {
        names.iter().all(|n| numsub(&url, &keys(n).channel()) == 0)
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn local_waiters_are_served_in_arrival_order() {
    let (url, _server) = redis_url();
    let name = unique("fifo");
    let client = Client::connect(url.as_str()).await.unwrap();
    let first = client
        .acquire(&name, &LockOptions::new(secs(30)))
        .await
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let (client, name, order) = (client.clone(), name.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let lease = client
                .acquire(&name, &LockOptions::new(secs(30)))
                .await
                .unwrap();
            order.lock().unwrap().push(i);
            lease.release().await.unwrap();
        }));
        // On a current-thread runtime this runs the new waiter (and its
        // lease task) until it is parked in the queue: arrival order is
        // exactly spawn order.
        for _ in 0..5 {
            tokio::task::yield_now().await;
        }
    }
    first.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_pubsub_connection_does_not_strand_waiters() {
    let server = Server::start();
    let url = server.url();
    let holder = Client::connect(url.as_str()).await.unwrap();
    let waiting = Client::connect(url.as_str()).await.unwrap();
    let name = unique("pubsubkill");
    let channel = keys(&name).channel();
    let held = holder
        .acquire(&name, &LockOptions::new(secs(30)))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            waiting
                .acquire(&name, &LockOptions::new(secs(30)))
                .await
                .unwrap()
        }
    });
    eventually(secs(5), "the waiter subscribed", || {
        numsub(&url, &channel) == 1
    })
    .await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .query(&mut conn(&url))
        .unwrap();
    assert_eq!(killed, 1);
    // The connection comes back and resubscribes by itself.
    eventually(secs(5), "resubscribed after the kill", || {
        numsub(&url, &channel) == 1
    })
    .await;
    let t = Instant::now();
    held.release().await.unwrap();
    let lease = tokio::time::timeout(secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    lease.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_published_while_the_pubsub_connection_was_down_still_wakes_the_waiter() {
    let server = Server::start();
    let url = server.url();
    let holder = Client::connect(url.as_str()).await.unwrap();
    let waiting = Client::connect(url.as_str()).await.unwrap();
    let name = unique("pubsubgap");
    let k = keys(&name);
    // The waiter's fallback timer fires at the holder's remaining TTL,
    // capped at 1 s (RetryPolicy::max_delay): a wake-up must come sooner.
    let held = holder
        .acquire(&name, &LockOptions::new(secs(30)))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            waiting
                .acquire(&name, &LockOptions::new(secs(30)).wait(secs(20)))
                .await
                .unwrap()
        }
    });
    eventually(secs(5), "the waiter subscribed", || {
        numsub(&url, &k.channel()) == 1
    })
    .await;
    // In one transaction: kill the waiter's pub/sub connection, free the
    // lock and publish the release, which therefore reaches nobody.
    let (killed, deleted, receivers): (i64, i64, i64) = redis::pipe()
        .atomic()
        .cmd("CLIENT")
        .arg(&["KILL", "TYPE", "pubsub"])
        .cmd("DEL")
        .arg(&*k.lock())
        .cmd("PUBLISH")
        .arg(&*k.channel())
        .arg("1")
        .query(&mut conn(&url))
        .unwrap();
    assert_eq!((killed, deleted, receivers), (1, 1, 0));
    let t = Instant::now();
    let lease = tokio::time::timeout(secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "the waiter slept through a release it missed while reconnecting: {:?}",
        t.elapsed()
    );
    lease.release().await.unwrap();
    drop(held);
}
