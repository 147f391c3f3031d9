//! `Lease::fenced_set` / `fenced_hset`: the protected key refuses a stale
//! holder (`fenced_set.lua`), against a real Redis (single node, a cluster
//! with the data in another slot than the lock, Redlock refused).

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions, Topology};
use fencelock_testkit::harness_env;

fn ttl(ms: u64) -> LockOptions {
    LockOptions::new(Duration::from_millis(ms))
}

fn hget(url: &str, key: &str, field: &str) -> Option<Vec<u8>> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut conn(url))
        .unwrap()
}

fn fence_of(url: &str, key: &str) -> u64 {
    let raw = hget(url, key, "fence").expect("a recorded fence");
    String::from_utf8(raw).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_is_refused_and_the_same_holder_may_write_again() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.clone()).await.unwrap();
    // The zombie's own client: one client's next acquire of the name would
    // find out its lease is gone (it waits in line behind it).
    let stuck = Client::connect(url.clone()).await.unwrap();
    let (name, key) = (unique("fenced"), unique("fenced-data"));
    let zombie = stuck.acquire(&name, &ttl(30_000)).await.unwrap();
    zombie.fenced_set(&key, "first").await.unwrap();
    zombie.fenced_set(&key, "second").await.unwrap(); // equal fences pass
    assert_eq!(hget(&url, &key, "value"), Some(b"second".to_vec()));
    assert_eq!(fence_of(&url, &key), zombie.fence());

    // The zombie hangs; an operator takes the lock back; a new holder writes.
    client.force_release(&name).await.unwrap();
    let next = client.acquire(&name, &ttl(30_000)).await.unwrap();
    next.fenced_hset(&key, "note", "taken over").await.unwrap();

    // The zombie still believes it holds the lock: the key refuses it.
    let err = zombie.fenced_set(&key, "late").await.unwrap_err();
    match &err {
        Error::StaleFence {
            name: Some(n),
            resource,
            fence,
            accepted,
        } => {
            assert_eq!(n.as_bytes(), name.as_bytes());
            assert_eq!(resource, key.as_bytes());
            assert_eq!((*fence, *accepted), (zombie.fence(), next.fence()));
        }
        other => panic!("expected StaleFence, got {other:?}"),
    }
    assert_eq!(err.code(), "STALE_FENCE");
    assert!(!err.to_string().contains(zombie.token()));
    let err = zombie.fenced_hset(&key, "note", "late").await.unwrap_err();
    assert!(matches!(err, Error::StaleFence { .. }), "{err:?}");
    // Nothing of the late writes landed.
    assert_eq!(hget(&url, &key, "value"), Some(b"second".to_vec()));
    assert_eq!(hget(&url, &key, "note"), Some(b"taken over".to_vec()));
    assert_eq!(fence_of(&url, &key), next.fence());
    next.release().await.unwrap();
    client.close().await;
    stuck.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fences_are_compared_exactly_above_2_pow_53() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.clone()).await.unwrap();
    let (name, key) = (unique("fenced-exact"), unique("fenced-exact-data"));
    // The next fence is 2^53 + 3, which a double would round up to the
    // 2^53 + 4 recorded below, taking it for "the same holder again".
    let _: () = redis::cmd("SET")
        .arg(&*keys(&name).fence())
        .arg("9007199254740994")
        .query(&mut conn(&url))
        .unwrap();
    let lease = client.acquire(&name, &ttl(30_000)).await.unwrap();
    assert_eq!(lease.fence(), 9_007_199_254_740_995);
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("fence")
        .arg("9007199254740996")
        .query(&mut conn(&url))
        .unwrap();
    let err = lease.fenced_set(&key, "v").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::StaleFence {
                accepted: 9_007_199_254_740_996,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(hget(&url, &key, "value"), None);
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_write_nothing() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.clone()).await.unwrap();
    let name = unique("fenced-bad");
    let key = unique("fenced-bad-data");
    let lease = client.acquire(&name, &ttl(30_000)).await.unwrap();
    let invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(lease.fenced_set("", "v").await));
    assert!(invalid(lease.fenced_hset(&key, "", "v").await));
    assert!(invalid(lease.fenced_hset(&key, "fence", "v").await));
    assert!(!exists(&url, key.as_bytes()));

    // A key of another type, a fence field that is no fence: Redis errors.
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("plain")
        .query(&mut conn(&url))
        .unwrap();
    let err = lease.fenced_set(&key, "v").await.unwrap_err();
    assert!(
        matches!(&err, Error::Redis { message, .. } if message.contains("WRONGTYPE")),
        "{err:?}"
    );
    assert_eq!(get(&url, key.as_bytes()), Some(b"plain".to_vec()));
    let odd = unique("fenced-odd");
    let _: () = redis::cmd("HSET")
        .arg(&odd)
        .arg("fence")
        .arg("soon")
        .query(&mut conn(&url))
        .unwrap();
    let err = lease.fenced_set(&odd, "v").await.unwrap_err();
    assert!(matches!(&err, Error::Redis { .. }), "{err:?}");
    assert_eq!(hget(&url, &odd, "value"), None);

    // Released: LockLost, nothing sent.
    lease.release().await.unwrap();
    let fresh = unique("fenced-fresh");
    let err = lease.fenced_set(&fresh, "v").await.unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err:?}");
    assert!(!exists(&url, fresh.as_bytes()));

    // A closed client: Closed, naming the lock.
    let other = client.acquire(&name, &ttl(30_000)).await.unwrap();
    client.close().await;
    let err = other.fenced_set(&fresh, "v").await.unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");
    assert!(err.to_string().contains("write fenced by lock"), "{err}");
    assert!(!exists(&url, fresh.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_clients_refuse_fenced_writes() {
    let (urls, _servers) = redlock_urls();
    let client = Client::connect(urls.clone()).await.unwrap();
    let (name, key) = (unique("fenced-redlock"), unique("fenced-redlock-data"));
    let lease = client.acquire(&name, &ttl(30_000)).await.unwrap();
    let err = lease.fenced_set(&key, "v").await.unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("Redlock")),
        "{err:?}"
    );
    for url in &urls {
        assert!(!exists(url, key.as_bytes()), "{url}");
    }
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_data_in_another_slot_than_the_lock() {
    let seeds = split_urls(&harness_env("FENCELOCK_TEST_CLUSTER_URLS"));
    let options = ClientOptions {
        topology: Topology::Cluster,
        ..ClientOptions::default()
    };
    let client = Client::connect_with(seeds.clone(), options.clone())
        .await
        .unwrap();
    let stuck = Client::connect_with(seeds.clone(), options).await.unwrap();
    let name = unique("fenced-cluster");
    let lock_slot = fencelock_core::keys::hash_slot(&keys(&name).lock());
    // A data key whose slot differs from the lock's (most do; pick one).
    let key = (0..)
        .map(|i| format!("{name}:data:{i}"))
        .find(|k| fencelock_core::keys::hash_slot(k.as_bytes()) != lock_slot)
        .unwrap();
    let first = stuck.acquire(&name, &ttl(30_000)).await.unwrap();
    first.fenced_set(&key, "one").await.unwrap();
    client.force_release(&name).await.unwrap();
    let second = client.acquire(&name, &ttl(30_000)).await.unwrap();
    second.fenced_set(&key, "two").await.unwrap();
    let err = first.fenced_set(&key, "late").await.unwrap_err();
    assert!(matches!(err, Error::StaleFence { .. }), "{err:?}");
    let cluster = redis::cluster::ClusterClient::new(seeds).unwrap();
    let value: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(&key)
        .arg("value")
        .query(&mut cluster.get_connection().unwrap())
        .unwrap();
    assert_eq!(value, Some(b"two".to_vec()));
    second.release().await.unwrap();
    client.close().await;
    stuck.close().await;
}
