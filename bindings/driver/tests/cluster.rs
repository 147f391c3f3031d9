//! A Redis Cluster (3 primaries + 3 replicas, from the harness): locks on
//! every shard, sharded pub/sub wake-ups, replica acknowledgement.

mod common;

use std::time::{Duration, Instant};

use common::{split_urls, unique};
use fencelock::{Client, ClientOptions, Error, LockOptions, NotAcquiredReason, Topology};
use fencelock_testkit::harness_env;

fn seeds() -> Vec<String> {
    split_urls(&harness_env("FENCELOCK_TEST_CLUSTER_URLS"))
}

fn options(replicas: u32) -> ClientOptions {
    ClientOptions {
        topology: Topology::Cluster,
        replicas,
        ..ClientOptions::default()
    }
}

/// Ask the cluster itself (redis-rs's own cluster client) what a key holds.
fn cluster_get(key: &[u8]) -> Option<Vec<u8>> {
    let client = redis::cluster::ClusterClient::new(seeds()).unwrap();
    let mut conn = client.get_connection().unwrap();
    redis::cmd("GET").arg(key).query(&mut conn).unwrap()
}

/// `PUBSUB SHARDNUMSUB` summed over the nodes (only the owner counts).
fn shard_subscribers(channel: &[u8]) -> i64 {
    seeds()
        .iter()
        .map(|url| {
            let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg(channel)
                .query(&mut common::conn(url))
                .unwrap();
            match reply.get(1) {
                Some(redis::Value::Int(n)) => *n,
                _ => 0,
            }
        })
        .sum()
}

fn slot_owner_count(names: &[String]) -> usize {
    let client = redis::cluster::ClusterClient::new(seeds()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut owners = std::collections::HashSet::new();
    for name in names {
        let key = common::keys(name).lock();
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&*key)
            .query(&mut conn)
            .unwrap();
        owners.insert(slot * 3 / 16384);
    }
    owners.len()
}

#[tokio::test]
async fn locks_on_every_shard_from_one_seed() {
    // One seed is enough: the client learns the slot map from it.
    let client = Client::connect_with(seeds()[..1].to_vec(), options(0))
        .await
        .unwrap();
    let names: Vec<String> = (0..24).map(|i| unique(&format!("cluster{i}"))).collect();
    assert_eq!(slot_owner_count(&names), 3, "names spread over all shards");
    let opts = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let mut fences = Vec::new();
    for name in &names {
        let lease = client.acquire(name, &opts).await.unwrap();
        assert_eq!(
            cluster_get(&common::keys(name).lock()).as_deref(),
            Some(lease.token().as_bytes())
        );
        assert!(client.try_acquire(name, &opts).await.unwrap().is_none());
        lease.extend(None).await.unwrap();
        fences.push(lease.fence());
        lease.release().await.unwrap();
        assert_eq!(cluster_get(&common::keys(name).lock()), None);
    }
    assert!(fences.iter().all(|&f| f > 0));
    client.close().await;
}

// Multi-threaded: the test's own polls of the servers are blocking calls;
// on a single thread they would starve the clients' tasks on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_through_sharded_pubsub() {
    let client = Client::connect_with(seeds(), options(0)).await.unwrap();
    let name = unique("cluster-wake");
    let holder = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(30)))
        .await
        .unwrap();
    // Another client, so the wake-up crosses Redis (not the local queue).
    let other = Client::connect_with(seeds(), options(0)).await.unwrap();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let lease = other
                .acquire(
                    &name,
                    &LockOptions::new(Duration::from_secs(30)).wait(Duration::from_secs(60)),
                )
                .await;
            (lease, Instant::now())
        }
    });
    // The waiter listens on the lock's shard (SSUBSCRIBE, not SUBSCRIBE);
    // a loaded machine can take seconds to connect its pub/sub.
    let channel = common::keys(&name).channel();
    common::eventually(Duration::from_secs(20), "a sharded subscriber", || {
        shard_subscribers(&channel) == 1
    })
    .await;
    // Subscribed, the waiter retries on its own only every second. Release
    // right after one of those retries (an acquire script call), so a
    // missed SPUBLISH shows as a wait of about a second.
    let evalshas = || -> u64 {
        seeds()
            .iter()
            .flat_map(|url| common::commandstats(url))
            .filter(|(name, _)| name == "evalsha")
            .map(|(_, calls)| calls)
            .sum()
    };
    let before = evalshas();
    common::eventually(Duration::from_secs(10), "a timed retry", || {
        evalshas() > before
    })
    .await;
    let released_at = Instant::now();
    holder.release().await.unwrap();
    let (lease, got_at) = waiter.await.unwrap();
    let lease = lease.unwrap();
    let latency = got_at - released_at;
    assert!(
        latency < Duration::from_millis(500),
        "woken after {latency:?}: the SPUBLISH did not reach the SSUBSCRIBEr"
    );
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test]
async fn replicas_one_acknowledges_and_three_is_refused_and_released() {
    let client = Client::connect_with(seeds(), options(1)).await.unwrap();
    let name = unique("cluster-replicas");
    let opts = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let lease = client.acquire(&name, &opts).await.unwrap();
    lease.extend(None).await.unwrap();
    lease.release().await.unwrap();
    client.close().await;

    // Each primary has one replica: asking for three cannot succeed.
    let client = Client::connect_with(
        seeds(),
        ClientOptions {
            response_timeout: Duration::from_millis(400),
            ..options(3)
        },
    )
    .await
    .unwrap();
    match client.acquire(&name, &opts).await {
        Err(
            e @ Error::NotAcquired {
                reason: NotAcquiredReason::Replicas { acked, wanted: 3 },
                ..
            },
        ) => {
            assert!(acked < 3, "{e}");
            assert!(e.to_string().contains(&name), "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("only {acked} of 3 replicas acknowledged")),
                "{e}"
            );
        }
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    assert_eq!(cluster_get(&common::keys(&name).lock()), None, "released");
    client.close().await;
}

#[tokio::test]
async fn a_service_name_without_sentinel_is_refused() {
    assert!(matches!(
        Topology::parse(Some("cluster"), Some("mymaster")),
        Err(Error::InvalidArgument(_))
    ));
    // No seed answers: a Redis error within the connect timeout.
    let started = Instant::now();
    let err = Client::connect_with(
        "redis://127.0.0.1:1",
        ClientOptions {
            connect_timeout: Duration::from_millis(300),
            ..options(0)
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}
