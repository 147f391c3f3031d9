//! TLS options for a Redis Cluster and for Sentinels: the harness's TLS
//! cluster (3 primaries) and TLS Sentinel serve clients over TLS only, with
//! certificates from a private CA, and require a client certificate. The
//! CA bundle, the client certificate and skipping verification apply to
//! every connection (seeds, discovered nodes, Sentinels, the primary they
//! name, pub/sub); without them nothing connects.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{eventually, keys, redis_message, split_urls, unique};
use fencelock::{Client, ClientOptions, LockOptions, Pem, TlsOptions, Topology};
use fencelock_testkit::harness_env;

fn cert(name: &str) -> Pem {
    Pem::File(PathBuf::from(harness_env("FENCELOCK_TEST_TLS_DIR")).join(name))
}

/// The private CA and the client certificate the servers require.
fn trusted() -> TlsOptions {
    TlsOptions {
        ca: Some(cert("ca.crt")),
        client_cert: Some(cert("client.crt")),
        client_key: Some(cert("client.key")),
        ..TlsOptions::default()
    }
}

fn cluster(tls: TlsOptions) -> (Vec<String>, ClientOptions) {
    let seeds = split_urls(&harness_env("FENCELOCK_TEST_TLS_CLUSTER_URLS"));
    let options = ClientOptions {
        topology: Topology::Cluster,
        tls,
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    (seeds, options)
}

fn sentinel(tls: TlsOptions) -> (Vec<String>, ClientOptions) {
    let sentinels = split_urls(&harness_env("FENCELOCK_TEST_TLS_SENTINEL_URLS"));
    let options = ClientOptions {
        topology: Topology::Sentinel {
            service: harness_env("FENCELOCK_TEST_SENTINEL_SERVICE"),
        },
        tls,
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    (sentinels, options)
}

/// A test connection of our own to a TLS server of the harness.
fn tls_conn(host: &str, port: u16) -> redis::Connection {
    let read = |name: &str| {
        std::fs::read(PathBuf::from(harness_env("FENCELOCK_TEST_TLS_DIR")).join(name)).unwrap()
    };
    let certificates = redis::TlsCertificates {
        client_tls: Some(redis::ClientTlsConfig {
            client_cert: read("client.crt"),
            client_key: read("client.key"),
        }),
        root_cert: Some(read("ca.crt")),
    };
    redis::Client::build_with_tls(format!("rediss://{host}:{port}"), certificates)
        .unwrap()
        .get_connection()
        .unwrap()
}

fn host_port(url: &str) -> (String, u16) {
    let (host, port) = url
        .trim_start_matches("rediss://")
        .trim_end_matches('/')
        .rsplit_once(':')
        .unwrap();
    (host.to_owned(), port.parse().unwrap())
}

/// How many clients listen for `name`'s release: sharded subscribers on
/// the cluster's primaries (the seeds), or subscribers on the primary the
/// Sentinel names.
fn listeners(urls: &[String], options: &ClientOptions, name: &str) -> i64 {
    let channel = keys(name).channel();
    let count = |conn: &mut redis::Connection, command: &str| {
        let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg(command)
            .arg(&*channel)
            .query(conn)
            .unwrap();
        match reply.get(1) {
            Some(redis::Value::Int(n)) => *n,
            _ => 0,
        }
    };
    match &options.topology {
        Topology::Sentinel { service } => {
            let (host, port) = host_port(&urls[0]);
            let (primary, port): (String, u16) = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(service)
                .query(&mut tls_conn(&host, port))
                .unwrap();
            count(&mut tls_conn(&primary, port), "NUMSUB")
        }
        _ => urls
            .iter()
            .map(|url| {
                let (host, port) = host_port(url);
                count(&mut tls_conn(&host, port), "SHARDNUMSUB")
            })
            .sum(),
    }
}

/// Locks on many names (every cluster shard among them), and a waiter in
/// a second client woken by the release notification, not its 60 s timer.
async fn locks_and_wake_ups(urls: &[String], options: &ClientOptions) {
    let client = Client::connect_with(urls.to_vec(), options.clone())
        .await
        .unwrap();
    // The holder's TTL is far beyond the bounds below, so only the release
    // message can wake the waiter in time; the bounds are wide because TLS
    // connects of a debug build are slow on a loaded machine.
    let opts = LockOptions::new(Duration::from_secs(60)).wait(Duration::from_secs(90));
    for i in 0..12 {
        let lease = client
            .acquire(unique(&format!("tls-topo-{i}")), &opts)
            .await
            .unwrap();
        lease.extend(None).await.unwrap();
        lease.release().await.unwrap();
    }
    let name = unique("tls-topo-wait");
    let holder = client.acquire(&name, &opts).await.unwrap();
    let other = Client::connect_with(urls.to_vec(), options.clone())
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let name = name.clone();
        let opts = opts.clone();
        async move { other.acquire(&name, &opts).await }
    });
    eventually(Duration::from_secs(30), "the waiter subscribed", || {
        listeners(urls, options, &name) == 1
    })
    .await;
    let released = Instant::now();
    holder.release().await.unwrap();
    let lease = waiting.await.unwrap().unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "{:?}",
        released.elapsed()
    );
    assert!(lease.fence() > holder.fence());
    lease.release().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_with_a_private_ca_and_a_client_certificate() {
    let (seeds, options) = cluster(trusted());
    locks_and_wake_ups(&seeds, &options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_refuses_the_system_store_and_a_missing_client_certificate() {
    let (seeds, options) = cluster(TlsOptions {
        ca: None,
        ..trusted()
    });
    let message = redis_message(Client::connect_with(seeds, options).await);
    assert!(message.contains("UnknownIssuer"), "{message}");
    let (seeds, options) = cluster(TlsOptions {
        client_cert: None,
        client_key: None,
        ..trusted()
    });
    redis_message(Client::connect_with(seeds, options).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster_without_verification_only_by_the_loud_option() {
    let (seeds, options) = cluster(TlsOptions {
        ca: None,
        dangerously_skip_verification: true,
        ..trusted()
    });
    locks_and_wake_ups(&seeds, &options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinels_with_a_private_ca_and_a_client_certificate() {
    let (sentinels, options) = sentinel(trusted());
    locks_and_wake_ups(&sentinels, &options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinels_refuse_the_system_store_and_a_missing_client_certificate() {
    let (sentinels, options) = sentinel(TlsOptions {
        ca: None,
        ..trusted()
    });
    let message = redis_message(Client::connect_with(sentinels, options).await);
    assert!(message.contains("UnknownIssuer"), "{message}");
    let (sentinels, options) = sentinel(TlsOptions {
        client_cert: None,
        client_key: None,
        ..trusted()
    });
    redis_message(Client::connect_with(sentinels, options).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinels_without_verification_only_by_the_loud_option() {
    let (sentinels, options) = sentinel(TlsOptions {
        ca: None,
        dangerously_skip_verification: true,
        ..trusted()
    });
    locks_and_wake_ups(&sentinels, &options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinels_and_their_primary_verify_the_server_name_override() {
    // The harness's certificates name 127.0.0.1 and localhost.
    let (sentinels, options) = sentinel(TlsOptions {
        server_name: Some("localhost".into()),
        ..trusted()
    });
    locks_and_wake_ups(&sentinels, &options).await;
    let (sentinels, options) = sentinel(TlsOptions {
        server_name: Some("redis.internal".into()),
        ..trusted()
    });
    let message = redis_message(Client::connect_with(sentinels, options).await);
    assert!(message.contains("not valid for name"), "{message}");
}
