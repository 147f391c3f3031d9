//! `Client::list` (SCAN on every node / primary, never KEYS) and
//! `Client::watch` (holder and fence changes), against real servers.

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions, Operation, Topology};
use fencelock_testkit::harness_env;

fn ttl(ms: u64) -> LockOptions {
    LockOptions::new(Duration::from_millis(ms))
}

/// A client in a key space of its own, so `list("*")` sees only this
/// test's locks on a shared server.
async fn isolated(urls: Vec<String>, topology: Topology) -> (Client, String) {
    let prefix = format!("{}:", unique("ls"));
    let options = ClientOptions {
        prefix: prefix.clone(),
        topology,
        ..ClientOptions::default()
    };
    (Client::connect_with(urls, options).await.unwrap(), prefix)
}

fn names(listed: &[fencelock::ListedLock]) -> Vec<&[u8]> {
    listed.iter().map(|l| l.name.as_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_finds_the_held_locks_matching_a_pattern_in_name_order() {
    let (url, _server) = redis_url();
    let (client, prefix) = isolated(vec![url.clone()], Topology::Standalone).await;
    let held: Vec<&[u8]> = vec![
        b"invoice:1",
        b"invoice:2",
        b"invoice:{7}",
        b"invoice:%7B",
        "invoice:ключ".as_bytes(),
        b"report:daily",
        &[b'i', 0xff, 0x00],
    ];
    let mut leases = Vec::new();
    for name in &held {
        leases.push(client.acquire(name, &ttl(30_000)).await.unwrap());
    }
    // Released: its fence key stays, but it is no longer held.
    let gone = client.acquire("invoice:3", &ttl(30_000)).await.unwrap();
    gone.release().await.unwrap();
    // Another application's keys under the same prefix are not locks.
    let mut raw = conn(&url);
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}{{invoice:9}}:other"))
        .arg("x")
        .query(&mut raw)
        .unwrap();

    let all = client.list("*").unwrap().all().await.unwrap();
    let mut expected = held.clone();
    expected.sort();
    assert_eq!(names(&all), expected);
    for lock in &all {
        let lease = leases
            .iter()
            .find(|l| l.name() == lock.name.as_bytes())
            .unwrap();
        assert!(lock.info.held && lock.info.held_by_me);
        assert_eq!(lock.info.fence, Some(lease.fence()));
        assert!(lock.info.ttl.unwrap() > Duration::from_secs(20));
    }

    let invoices = client.list("invoice:*").unwrap().all().await.unwrap();
    assert_eq!(
        names(&invoices),
        [
            &b"invoice:%7B"[..],
            b"invoice:1",
            b"invoice:2",
            b"invoice:{7}",
            "invoice:ключ".as_bytes()
        ]
    );
    let braces = client.list("*{*}*").unwrap().all().await.unwrap();
    assert_eq!(names(&braces), [&b"invoice:{7}"[..]]);
    let classes = client.list("invoice:[12]").unwrap().all().await.unwrap();
    assert_eq!(names(&classes), [&b"invoice:1"[..], b"invoice:2"]);
    let escaped = client.list(r"invoice:\{7\}").unwrap().all().await.unwrap();
    assert_eq!(names(&escaped), [&b"invoice:{7}"[..]]);
    assert!(client
        .list("nothing:*")
        .unwrap()
        .all()
        .await
        .unwrap()
        .is_empty());

    // Read one at a time, to the end (where it stays).
    let mut list = client.list("invoice:[12]").unwrap();
    assert_eq!(
        list.next().await.unwrap().unwrap().name.as_bytes(),
        b"invoice:1"
    );
    assert_eq!(
        list.next().await.unwrap().unwrap().name.as_bytes(),
        b"invoice:2"
    );
    assert!(list.next().await.unwrap().is_none());
    assert!(list.next().await.unwrap().is_none(), "stays at its end");
}

#[tokio::test]
async fn list_walks_past_one_page_with_scan() {
    let (url, _server) = redis_url();
    let (client, _prefix) = isolated(vec![url.clone()], Topology::Standalone).await;
    // More locks than one SCAN COUNT looks at.
    let count = fencelock_core::SCAN_COUNT as usize + 200;
    let mut leases = Vec::new();
    for i in 0..count {
        leases.push(
            client
                .acquire(format!("bulk:{i:05}"), &ttl(60_000))
                .await
                .unwrap(),
        );
    }
    let all = client.list("bulk:*").unwrap().all().await.unwrap();
    assert_eq!(all.len(), count);
    assert!(all.windows(2).all(|w| w[0].name < w[1].name), "name order");
}

#[tokio::test]
async fn bad_patterns_and_closed_clients_are_refused() {
    let (url, _server) = redis_url();
    let client = Client::connect(url).await.unwrap();
    for bad in [&b""[..], b"a[b", b"x\\", &[b'a'; 1025]] {
        assert!(
            matches!(client.list(bad), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    assert!(matches!(client.watch(""), Err(Error::InvalidArgument(_))));
    client.close().await;
    let err = client.list("a*").unwrap_err();
    assert!(
        matches!(&err, Error::Closed { name, operation: Operation::List } if name.as_bytes() == b"a*"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        r#"cannot list locks matching "a*": the client is closed"#
    );
    assert!(matches!(
        client.watch("a"),
        Err(Error::Closed {
            operation: Operation::Watch,
            ..
        })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lists_what_a_majority_holds_and_needs_a_majority_to_answer() {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let (client, prefix) = isolated(urls.clone(), Topology::Standalone).await;
    let lease = client.acquire("job:a", &ttl(30_000)).await.unwrap();
    // A key on one node only (a minority): not held.
    let _: () = redis::cmd("SET")
        .arg(format!("{prefix}{{job:b}}"))
        .arg("someone")
        .query(&mut conn(&urls[0]))
        .unwrap();
    let listed = client.list("job:*").unwrap().all().await.unwrap();
    assert_eq!(names(&listed), [&b"job:a"[..]]);
    assert_eq!(listed[0].info.fence, Some(lease.fence()));

    // One node down: the other two are a majority.
    servers[2].stop();
    let listed = client.list("job:*").unwrap().all().await.unwrap();
    assert_eq!(names(&listed), [&b"job:a"[..]]);
    servers[1].stop();
    let err = client.list("job:*").unwrap().all().await.unwrap_err();
    assert!(
        matches!(&err, Error::Redis { .. }) && err.to_string().contains("only 1 of 3"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_listed_on_every_primary() {
    let seeds = split_urls(&harness_env("FENCELOCK_TEST_CLUSTER_URLS"));
    let (client, _prefix) = isolated(seeds, Topology::Cluster).await;
    let names: Vec<String> = (0..24).map(|i| format!("shard:{i:02}")).collect();
    let mut leases = Vec::new();
    for name in &names {
        leases.push(client.acquire(name, &ttl(30_000)).await.unwrap());
    }
    let listed = client.list("shard:*").unwrap().all().await.unwrap();
    let found: Vec<String> = listed
        .iter()
        .map(|l| String::from_utf8(l.name.as_bytes().to_vec()).unwrap())
        .collect();
    assert_eq!(found, names);
    assert!(listed.iter().all(|l| l.info.held_by_me));
}

/// The watch's next change, which must come within 5 s.
async fn next(watch: &mut fencelock::LockWatch, what: &str) -> Result<fencelock::LockInfo, Error> {
    tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .unwrap_or_else(|_| panic!("no change reported: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_primary_is_listed() {
    let sentinels = split_urls(&harness_env("FENCELOCK_TEST_SENTINEL_URLS"));
    let service = harness_env("FENCELOCK_TEST_SENTINEL_SERVICE");
    let (client, _prefix) = isolated(sentinels, Topology::Sentinel { service }).await;
    let lease = client.acquire("primary:1", &ttl(30_000)).await.unwrap();
    let listed = client.list("primary:*").unwrap().all().await.unwrap();
    assert_eq!(names(&listed), [&b"primary:1"[..]]);
    assert_eq!(listed[0].info.fence, Some(lease.fence()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_reports_acquires_releases_expiries_and_force_releases_not_renewals() {
    let (url, _server) = redis_url();
    let watcher = Client::connect(url.clone()).await.unwrap();
    let holder = Client::connect(url.clone()).await.unwrap();
    let name = unique("watch");
    let mut watch = watcher.watch(&name).unwrap();

    let now = next(&mut watch, "now").await.unwrap();
    assert!(!now.held && now.fence.is_none(), "{now:?}");

    let lease = holder.acquire(&name, &ttl(30_000)).await.unwrap();
    let acquired = next(&mut watch, "acquired").await.unwrap();
    assert!(acquired.held && !acquired.held_by_me);
    assert_eq!(acquired.fence, Some(lease.fence()));

    lease.release().await.unwrap();
    let released = next(&mut watch, "released").await.unwrap();
    assert!(!released.held);
    assert_eq!(released.fence, Some(lease.fence()));

    // Renewals only move the TTL: no change to report while it is held.
    let renewed = holder
        .acquire(&name, &ttl(150).auto_renew(true))
        .await
        .unwrap();
    assert_eq!(
        next(&mut watch, "renewed acquire").await.unwrap().fence,
        Some(renewed.fence())
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(600), watch.next())
            .await
            .is_err(),
        "a renewal was reported as a change"
    );
    assert!(!renewed.lost());

    // Force-released: free, and the fence moved on.
    let forced = watcher.force_release(&name).await.unwrap();
    let after = next(&mut watch, "forced").await.unwrap();
    assert!(!after.held);
    assert_eq!(after.fence, Some(forced));

    // Expired (no release message): caught at the holder's TTL. (A lease
    // shorter than the interval may come and go unseen as held: then the
    // fence still shows that someone held it.)
    let short = holder.acquire(&name, &ttl(700)).await.unwrap();
    let seen = next(&mut watch, "short acquire").await.unwrap();
    assert!(seen.held && seen.fence == Some(short.fence()), "{seen:?}");
    let expired = next(&mut watch, "expired").await.unwrap();
    assert!(!expired.held && expired.fence == Some(short.fence()));

    watcher.close().await;
    assert!(matches!(
        watch.next().await,
        Err(Error::Closed {
            operation: Operation::Watch,
            ..
        })
    ));
}
