//! `Client::acquire_many` against real redis-servers: all or nothing, one
//! round trip on one Redis, waiting, cancellation, release and loss, bad
//! inputs, Redlock refused, and a Redis Cluster (names on several slots,
//! names sharing one).

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, Error, Lease, LockOptions, Topology};
use fencelock_core::keys::hash_slot;
use fencelock_testkit::harness_env;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn names(what: &str, n: usize) -> Vec<String> {
    let base = unique(what);
    (0..n).map(|i| format!("{base}:{i}")).collect()
}

/// Two clients of `url`, the first holding `name` for `ttl`: where each
/// contention test starts. Returns (holder, its lease, the other client).
async fn held_elsewhere(url: &str, name: &str, ttl: Duration) -> (Client, Lease, Client) {
    let holder = Client::connect(url).await.unwrap();
    let client = Client::connect(url).await.unwrap();
    let held = holder.acquire(name, &LockOptions::new(ttl)).await.unwrap();
    (holder, held, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_name_is_taken_in_one_round_trip_and_released_together() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let names = names("many-one", 3);
    reset_stats(&url);
    let group = client
        .acquire_many(&names, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    let evalsha = commandstats(&url)
        .into_iter()
        .find(|(c, _)| c == "evalsha")
        .map_or(0, |(_, n)| n);
    assert_eq!(evalsha, 1, "one script for every name");
    assert_eq!(group.leases().len(), 3);
    for (lease, name) in group.leases().iter().zip(&names) {
        assert_eq!(lease.name(), name.as_bytes(), "in the caller's order");
        assert_eq!(get(&url, &keys(name).lock()), Some(lease.token().into()));
        assert!(lease.fence() > 0);
        let fence = get(&url, &keys(name).fence()).unwrap();
        assert_eq!(fence, lease.fence().to_string().into_bytes());
        let ttl = pttl(&url, &keys(name).lock());
        assert!(ttl > 9_000 && ttl <= 10_000, "{ttl}");
    }
    // Each name is an ordinary lease: an extend of one touches that one.
    group.leases()[1].extend(Some(secs(20))).await.unwrap();
    assert!(pttl(&url, &keys(&names[1]).lock()) > 19_000);
    assert!(client.inspect(&names[0]).await.unwrap().held_by_me);
    group.release().await.unwrap();
    for name in &names {
        assert!(!exists(&url, &keys(name).lock()));
    }
    // Released already: Ok again.
    group.release().await.unwrap();
    // A later single acquire of one of them gets the next fence.
    let next = client
        .acquire(&names[0], &LockOptions::new(secs(10)))
        .await
        .unwrap();
    assert!(next.fence() > group.leases()[0].fence());
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_held_name_takes_nothing_and_leaves_nothing() {
    let (url, _server) = redis_url();
    let names = names("many-held", 3);
    let (_holder, held, client) = held_elsewhere(&url, &names[1], secs(10)).await;
    let tried = client
        .try_acquire_many(&names, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    assert!(tried.is_none());
    assert!(!exists(&url, &keys(&names[0]).lock()));
    assert!(!exists(&url, &keys(&names[2]).lock()));
    assert_eq!(
        get(&url, &keys(&names[1]).lock()),
        Some(held.token().into())
    );
    // A bounded wait runs out with NotAcquired naming the held lock.
    let waited = client
        .acquire_many(
            &names,
            &LockOptions::new(secs(10)).wait(Duration::from_millis(150)),
        )
        .await;
    match waited {
        Err(Error::NotAcquired { name, .. }) => assert_eq!(name.as_bytes(), names[1].as_bytes()),
        other => panic!("{other:?}"),
    }
    assert!(!exists(&url, &keys(&names[0]).lock()));
    assert!(!exists(&url, &keys(&names[2]).lock()));
    held.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_group_is_woken_by_the_release() {
    let (url, _server) = redis_url();
    let names = names("many-wait", 2);
    let (_holder, held, client) = held_elsewhere(&url, &names[0], secs(30)).await;
    let waiting = {
        let (client, names) = (client.clone(), names.clone());
        tokio::spawn(async move {
            client
                .acquire_many(&names, &LockOptions::new(secs(10)).wait(secs(20)))
                .await
        })
    };
    // It listens for the held name's release.
    eventually(secs(5), "the group listens", || {
        numsub(&url, &keys(&names[0]).channel()) >= 1
    })
    .await;
    assert!(!exists(&url, &keys(&names[1]).lock()));
    let released = std::time::Instant::now();
    held.release().await.unwrap();
    let group = waiting.await.unwrap().unwrap();
    // Woken, not its 1 s retry timer (the holder's ttl is 30 s).
    assert!(released.elapsed() < Duration::from_millis(900));
    for (lease, name) in group.leases().iter().zip(&names) {
        assert_eq!(get(&url, &keys(name).lock()), Some(lease.token().into()));
    }
    assert!(group.leases()[0].fence() > held.fence());
    group.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_leaves_nothing() {
    let (url, _server) = redis_url();
    let names = names("many-cancel", 3);
    let (holder, held, client) = held_elsewhere(&url, &names[2], secs(30)).await;
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        client.acquire_many(&names, &LockOptions::new(secs(10)).wait(secs(20))),
    )
    .await;
    assert!(cancelled.is_err(), "still waiting when cancelled");
    held.release().await.unwrap();
    // Nothing of the cancelled group comes back later either: the next
    // group gets every name. It may wait a moment: the cancel reaches the
    // group's task asynchronously, so the release can wake it first, and
    // what it then takes it gives back at once (a leak would hold the
    // names for their 10 s ttl, past this wait).
    let group = holder
        .acquire_many(&names, &LockOptions::new(secs(10)).wait(secs(5)))
        .await
        .unwrap();
    for (lease, name) in group.leases().iter().zip(&names) {
        assert_eq!(get(&url, &keys(name).lock()), Some(lease.token().into()));
    }
    group.release().await.unwrap();

    // Cancelled while the script may be on its way: whatever it set is
    // given back (the client's close waits for that).
    for _ in 0..20 {
        let names = names_for_race();
        let options = LockOptions::new(secs(10));
        let attempt = client.acquire_many(&names, &options);
        if let Ok(done) = tokio::time::timeout(Duration::from_micros(200), attempt).await {
            // Finished first: a claimed group is the caller's to release.
            done.unwrap().release().await.unwrap();
        }
        eventually(secs(5), "nothing left after the cancel", || {
            names.iter().all(|n| !exists(&url, &keys(n).lock()))
        })
        .await;
    }
}

fn names_for_race() -> Vec<String> {
    names("many-race", 4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_group_with_a_lost_lease_releases_the_rest_and_says_lost() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let names = names("many-lost", 3);
    let group = client
        .acquire_many(&names, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&*keys(&names[1]).lock())
        .query(&mut conn(&url))
        .unwrap();
    assert!(matches!(group.release().await, Err(Error::LockLost { .. })));
    assert!(group.lost());
    for name in &names {
        assert!(!exists(&url, &keys(name).lock()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_refused_and_nothing_is_written() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let ok = LockOptions::new(secs(10));
    let invalid = |r: Result<_, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    let none: Vec<String> = Vec::new();
    assert!(invalid(client.acquire_many(&none, &ok).await));
    assert!(invalid(client.acquire_many(["a", "b", "a"], &ok).await));
    assert!(invalid(client.acquire_many(["a", ""], &ok).await));
    let many: Vec<String> = (0..65).map(|i| format!("n{i}")).collect();
    assert!(invalid(client.acquire_many(&many, &ok).await));
    assert!(invalid(
        client
            .acquire_many(["a", "b"], &LockOptions::new(Duration::ZERO))
            .await
    ));
    assert!(invalid(
        client
            .acquire_many(["a", "b"], &ok.clone().fair(true))
            .await
    ));
    assert!(matches!(
        client.try_acquire_many(["a", "a"], &ok).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(dbsize(&url), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_and_replicas_are_refused() {
    let (urls, _servers) = redlock_urls();
    let client = Client::connect(urls.clone()).await.unwrap();
    let names = names("many-redlock", 2);
    let refused = client
        .acquire_many(&names, &LockOptions::new(secs(10)))
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
    for url in &urls {
        assert!(!exists(url, &keys(&names[0]).lock()));
    }
    let single = Client::connect_with(
        urls[0].as_str(),
        ClientOptions {
            replicas: 1,
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap();
    let refused = single
        .acquire_many(&names, &LockOptions::new(secs(10)))
        .await;
    assert!(
        matches!(refused, Err(Error::InvalidArgument(_))),
        "{refused:?}"
    );
}

fn seeds() -> Vec<String> {
    split_urls(&harness_env("FENCELOCK_TEST_CLUSTER_URLS"))
}

/// One cluster connection for a test's reads: connecting anew for each read
/// took seconds under load, long enough for a lease's TTL to run out.
fn cluster_reader() -> redis::cluster::ClusterConnection {
    let client = redis::cluster::ClusterClient::new(seeds()).unwrap();
    client.get_connection().unwrap()
}

fn cluster_get(conn: &mut redis::cluster::ClusterConnection, key: &[u8]) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(conn).unwrap()
}

/// Sharded subscribers of `channel` over the cluster's primaries (the seeds).
fn shard_listeners(channel: &[u8]) -> i64 {
    seeds()
        .iter()
        .map(|url| {
            let mut conn = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(channel)
                .query(&mut conn)
                .unwrap();
            match reply.get(1) {
                Some(redis::Value::Int(n)) => *n,
                _ => 0,
            }
        })
        .sum()
}

/// Two distinct names whose keys share a slot: names go into the hash tag
/// whole, so only a search finds them.
fn sharing_a_slot(base: &str) -> (String, String) {
    let slot = |n: &str| hash_slot(&keys(n).lock());
    let mut seen = std::collections::HashMap::new();
    for i in 0.. {
        let name = format!("{base}:{i}");
        if let Some(other) = seen.insert(slot(&name), name.clone()) {
            return (other, name);
        }
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_takes_names_on_several_slots_and_names_sharing_one() {
    let options = ClientOptions {
        topology: Topology::Cluster,
        ..ClientOptions::default()
    };
    let client = Client::connect_with(seeds(), options.clone())
        .await
        .unwrap();
    let other = Client::connect_with(seeds(), options).await.unwrap();
    let base = unique("many-cluster");
    let (s1, s2) = sharing_a_slot(&base);
    let mut all: Vec<String> = (0..5).map(|i| format!("{base}:spread:{i}")).collect();
    all.push(s1.clone());
    all.push(s2.clone());
    let slots: std::collections::HashSet<u16> =
        all.iter().map(|n| hash_slot(&keys(n).lock())).collect();
    assert!(slots.len() >= 3, "several slots");
    // Held for longer than the waiting group may wait: only the release
    // message can wake it in time.
    let group = client
        .acquire_many(&all, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    let mut reader = cluster_reader();
    for (lease, name) in group.leases().iter().zip(&all) {
        assert_eq!(
            cluster_get(&mut reader, &keys(name).lock()),
            Some(lease.token().into())
        );
    }
    // Held: another client's group over an overlapping set gets nothing,
    // and leaves nothing on the names only it asked for.
    let extra = format!("{base}:extra");
    let overlapping = vec![extra.clone(), s2.clone()];
    let tried = other
        .try_acquire_many(&overlapping, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    assert!(tried.is_none());
    assert_eq!(cluster_get(&mut reader, &keys(&extra).lock()), None);
    // Its waiting group is woken (sharded pub/sub) when ours is released.
    let waiting = {
        let other = other.clone();
        tokio::spawn(async move {
            other
                .acquire_many(&overlapping, &LockOptions::new(secs(10)).wait(secs(45)))
                .await
        })
    };
    eventually(secs(30), "the waiting group subscribed", || {
        shard_listeners(&keys(&s2).channel()) >= 1
    })
    .await;
    group.release().await.unwrap();
    let theirs = waiting.await.unwrap().unwrap();
    assert_eq!(
        cluster_get(&mut reader, &keys(&s2).lock()),
        Some(theirs.leases()[1].token().into())
    );
    theirs.release().await.unwrap();
    for name in all.iter().chain([&extra]) {
        assert_eq!(cluster_get(&mut reader, &keys(name).lock()), None);
    }
}

/// Two clients asking for overlapping sets in opposite orders never
/// deadlock: the canonical order is the same for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_groups_in_opposite_orders_all_finish() {
    let (url, _server) = redis_url();
    let names = names("many-order", 4);
    let mut tasks = Vec::new();
    for round in 0..6 {
        let url = url.clone();
        let mut mine = names.clone();
        if round % 2 == 1 {
            mine.reverse();
        }
        tasks.push(tokio::spawn(async move {
            let client = Client::connect(url.as_str()).await.unwrap();
            for _ in 0..5 {
                let group = client
                    .acquire_many(&mine, &LockOptions::new(secs(10)).wait(secs(30)))
                    .await
                    .unwrap();
                group.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(secs(60), task).await.unwrap().unwrap();
    }
    for name in &names {
        assert!(!exists(&url, &keys(name).lock()));
    }
}
