//! Redlock over five independent redis-servers.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ClientOptions, Error, Lease, LockOptions};

fn fast() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

fn holders(urls: &[String], name: &str, token: &str) -> usize {
    urls.iter()
        .filter(|u| get(u, &keys(name).lock()).as_deref() == Some(token.as_bytes()))
        .count()
}

#[tokio::test]
async fn redlock_acquires_on_every_node_and_releases_everywhere() {
    let (urls, _servers) = redlock_urls();
    let client = Client::connect(urls.clone()).await.unwrap();
    assert_eq!(client.node_count(), 5);
    let name = unique("redlock");
    let mut last = 0;
    for _ in 0..3 {
        let lease = client
            .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
            .await
            .unwrap();
        assert!(lease.fence() > last);
        last = lease.fence();
        // A majority decides; a node answering later catches up at once.
        eventually(Duration::from_secs(5), "held on every node", || {
            holders(&urls, &name, lease.token()) == 5
        })
        .await;
        assert!(lease.valid_for() > Duration::from_secs(9));
        lease.extend(Some(Duration::from_secs(20))).await.unwrap();
        assert!(urls.iter().all(|u| pttl(u, &keys(&name).lock()) > 15_000));
        lease.release().await.unwrap();
        eventually(Duration::from_secs(5), "released on every node", || {
            holders(&urls, &name, lease.token()) == 0
        })
        .await;
    }
    // Contention across two Redlock clients.
    let other = Client::connect(urls.clone()).await.unwrap();
    let held = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(other
        .try_acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap()
        .is_none());
    let waiter = tokio::spawn({
        let (other, name) = (other.clone(), name.clone());
        async move {
            other
                .acquire(
                    &name,
                    &LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(10)),
                )
                .await
        }
    });
    let channel = keys(&name).channel();
    eventually(
        Duration::from_secs(5),
        "the waiter subscribed on every node",
        || urls.iter().all(|u| numsub(u, &channel) >= 1),
    )
    .await;
    let t = Instant::now();
    held.release().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert!(next.fence() > held.fence());
    next.release().await.unwrap();
}

#[tokio::test]
async fn redlock_fences_stay_increasing_when_node_counters_diverge() {
    let (urls, _servers) = redlock_urls();
    let client = Client::connect(urls.clone()).await.unwrap();
    let name = unique("diverge");
    let first = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    first.release().await.unwrap();
    // One node's counter jumps ahead (say it alone granted other leases).
    let _: () = redis::cmd("SET")
        .arg(&*keys(&name).fence())
        .arg(first.fence() + 100)
        .query(&mut conn(&urls[0]))
        .unwrap();
    let second = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(
        second.fence() > first.fence() + 100,
        "{} vs {}",
        second.fence(),
        first.fence()
    );
    // The maximum is now held by a majority.
    let at_least: usize = urls
        .iter()
        .filter(|u| {
            get(u, &keys(&name).fence())
                .and_then(|v| String::from_utf8(v).ok())
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= second.fence())
        })
        .count();
    assert!(
        at_least >= 3,
        "fence {} held by {at_least} nodes",
        second.fence()
    );
    second.release().await.unwrap();
    let third = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(third.fence() > second.fence());
    third.release().await.unwrap();
}

#[tokio::test]
async fn redlock_survives_two_of_five_nodes_down_but_not_three() {
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect_with(urls.clone(), fast()).await.unwrap();
    servers[0].stop();
    servers[1].stop();
    let name = unique("minority");
    let lease = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    assert_eq!(holders(&urls[2..], &name, lease.token()), 3);
    lease.extend(None).await.unwrap();
    lease.release().await.unwrap();
    assert_eq!(holders(&urls[2..], &name, lease.token()), 0);

    // A client connecting now: two nodes down is still a majority up.
    let late = Client::connect_with(urls.clone(), fast()).await.unwrap();
    let lease = late
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    lease.release().await.unwrap();

    servers[2].stop();
    let t = Instant::now();
    let result = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO),
        )
        .await;
    // No majority can even be asked: `NotAcquired` (the node errors go to
    // the log); nothing stays held on the nodes that did answer.
    assert!(
        matches!(result, Err(Error::NotAcquired { .. })),
        "{result:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(urls[3..].iter().all(|u| !exists(u, &keys(&name).lock())));
    let t = Instant::now();
    let bounded = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(10)).wait(Duration::from_millis(300)),
        )
        .await;
    assert!(
        matches!(bounded, Err(Error::NotAcquired { .. })),
        "{bounded:?}"
    );
    // At once or when the wait runs out, never later.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(urls[3..].iter().all(|u| !exists(u, &keys(&name).lock())));

    // Connecting with only two of five reachable is refused.
    let refused = Client::connect_with(urls.clone(), fast()).await;
    assert!(matches!(refused, Err(Error::Redis { .. })), "{refused:?}");
}

/// Three nodes, the third with its writes paused for a minute: it takes
/// commands and answers none of them.
async fn two_live_nodes_and_one_stalled(
    options: ClientOptions,
) -> (Vec<Server>, Vec<String>, Client) {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect_with(urls.clone(), options).await.unwrap();
    pause_writes(&urls[2], 60_000);
    (servers, urls, client)
}

/// Acquires `name` beside the stalled node: the two live nodes hold it and
/// the stalled one has run nothing yet.
async fn acquire_beside_the_stalled_node(client: &Client, urls: &[String], name: &str) -> Lease {
    let lease = client
        .acquire(
            name,
            &LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(holders(&urls[..2], name, lease.token()), 2);
    assert!(
        !exists(&urls[2], &keys(name).lock()),
        "the stalled node ran nothing"
    );
    lease
}

/// A node that stalls without refusing is left to the others' majority. An
/// extend waits for every node, so it waits out the response timeout for
/// the stalled one (README, "Redlock"). Once the node is back, what was
/// queued there runs in order or is dropped with its connection: either
/// way nothing stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_minority_node_is_left_to_the_majority() {
    let (_servers, urls, client) = two_live_nodes_and_one_stalled(fast()).await;
    let name = unique("stalled");
    let lease = acquire_beside_the_stalled_node(&client, &urls, &name).await;
    lease.extend(None).await.unwrap();
    lease.release().await.unwrap();
    assert_eq!(holders(&urls[..2], &name, lease.token()), 0);
    unpause(&urls[2]);
    client.close().await;
    eventually(
        Duration::from_secs(5),
        "nothing held on the node that stalled",
        || !exists(&urls[2], &keys(&name).lock()),
    )
    .await;
}

/// An acquire and a release are decided by the majority's replies: with a
/// response timeout longer than the TTL, a round that waited for the
/// stalled node would end with no validity left (`NotAcquired`).
#[tokio::test]
async fn a_redlock_acquire_and_release_do_not_wait_for_a_stalled_node() {
    let patient = ClientOptions {
        response_timeout: Duration::from_secs(60),
        ..ClientOptions::default()
    };
    let (_servers, urls, client) = two_live_nodes_and_one_stalled(patient).await;
    let name = unique("stalled-patient");
    // The two live nodes' counters agree and run ahead of the clock, so
    // they issue the same fence: a majority that needs no write-back.
    let ahead: u64 = 9_000_000_000_000_000;
    for url in &urls[..2] {
        let _: () = redis::cmd("SET")
            .arg(&keys(&name).fence()[..])
            .arg(ahead)
            .query(&mut conn(url))
            .unwrap();
    }
    let lease = acquire_beside_the_stalled_node(&client, &urls, &name).await;
    assert_eq!(lease.fence(), ahead + 1);
    lease.release().await.unwrap();
    assert_eq!(holders(&urls[..2], &name, lease.token()), 0);
    unpause(&urls[2]);
    // close waits for the stalled node's acquire, then its release.
    client.close().await;
    assert!(!exists(&urls[2], &keys(&name).lock()));
}

#[tokio::test]
async fn redlock_extend_needs_a_majority() {
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect_with(urls.clone(), fast()).await.unwrap();
    let name = unique("extend-majority");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    servers[0].stop();
    servers[1].stop();
    lease.extend(None).await.unwrap();
    servers[2].stop();
    let r = lease.extend(Some(Duration::from_secs(20))).await;
    // Too few nodes answered: an error, and the lease does not count on the
    // longer TTL (the live nodes may have applied it; that only delays
    // expiry).
    assert!(
        matches!(r, Err(Error::Redis { .. } | Error::LockLost { .. })),
        "{r:?}"
    );
    assert!(lease.valid_for() <= Duration::from_secs(10));
}
