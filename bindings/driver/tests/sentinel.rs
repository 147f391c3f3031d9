//! A primary + replica behind 3 Sentinels (from the harness): the client
//! finds the primary through the Sentinels, locks on it, and counts a lock
//! only once the replica acknowledged it when asked to.

mod common;

use std::time::Duration;

use common::{split_urls, unique};
use fencelock::{Client, ClientOptions, Error, LockOptions, NotAcquiredReason, Topology};
use fencelock_testkit::harness_env;

fn sentinels() -> Vec<String> {
    split_urls(&harness_env("FENCELOCK_TEST_SENTINEL_URLS"))
}

fn options(replicas: u32) -> ClientOptions {
    ClientOptions {
        topology: Topology::Sentinel {
            service: harness_env("FENCELOCK_TEST_SENTINEL_SERVICE"),
        },
        replicas,
        ..ClientOptions::default()
    }
}

/// The primary's URL, as the Sentinels report it.
fn primary_url() -> String {
    let mut conn = common::conn(&sentinels()[0]);
    let (host, port): (String, u16) = redis::cmd("SENTINEL")
        .arg("get-master-addr-by-name")
        .arg(harness_env("FENCELOCK_TEST_SENTINEL_SERVICE"))
        .query(&mut conn)
        .unwrap();
    format!("redis://{host}:{port}/0")
}

#[tokio::test]
async fn locks_on_the_primary_the_sentinels_name() {
    let client = Client::connect_with(sentinels(), options(0)).await.unwrap();
    let name = unique("sentinel");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(
        common::get(&primary_url(), &common::keys(&name).lock()).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.release().await.unwrap();
    assert!(!common::exists(&primary_url(), &common::keys(&name).lock()));
    client.close().await;
}

#[tokio::test]
async fn replicas_one_is_acknowledged_and_two_is_refused_and_released() {
    let client = Client::connect_with(sentinels(), options(1)).await.unwrap();
    let name = unique("sentinel-replicas");
    let opts = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let lease = client.acquire(&name, &opts).await.unwrap();
    lease.extend(None).await.unwrap();
    lease.release().await.unwrap();
    client.close().await;

    let client = Client::connect_with(
        sentinels(),
        ClientOptions {
            response_timeout: Duration::from_millis(400),
            ..options(2)
        },
    )
    .await
    .unwrap();
    match client.acquire(&name, &opts).await {
        // The group has one replica: it acknowledges, a second cannot.
        Err(
            e @ Error::NotAcquired {
                reason:
                    NotAcquiredReason::Replicas {
                        acked: 1,
                        wanted: 2,
                    },
                ..
            },
        ) => assert!(
            e.to_string().contains("only 1 of 2 replicas acknowledged"),
            "{e}"
        ),
        other => panic!("expected NotAcquired (replicas), got {other:?}"),
    }
    assert!(!common::exists(&primary_url(), &common::keys(&name).lock()));
    client.close().await;
}

#[tokio::test]
async fn an_unknown_service_is_a_redis_error() {
    let err = Client::connect_with(
        sentinels(),
        ClientOptions {
            topology: Topology::Sentinel {
                service: "no-such-service".into(),
            },
            connect_timeout: Duration::from_millis(500),
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, Error::Redis { message, .. } if message.contains("no-such-service")),
        "{err:?}"
    );
}
