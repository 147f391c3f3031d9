//! TLS against `redis-server --tls-port` with certificates ci/tls.sh makes:
//! a private CA works when given, mutual TLS works and is required where
//! the server requires it, a wrong CA and a certificate for another host
//! fail clearly, and nothing ever connects unverified unless the loudly
//! named option says so.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions, Pem, TlsOptions};
use fencelock_testkit::Port;

/// The certificates (FENCELOCK_TEST_TLS_DIR when the harness made them).
fn certs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(dir) = std::env::var("FENCELOCK_TEST_TLS_DIR") {
            return dir.into();
        }
        let dir = std::env::temp_dir().join(format!(
            "fencelock-tls-rust-{}-{}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/tls.sh");
        let status = std::process::Command::new("bash")
            .arg(script)
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("bash ci/tls.sh");
        assert!(status.success(), "ci/tls.sh failed");
        dir
    })
}

fn file(name: &str) -> Pem {
    Pem::File(certs().join(name))
}

/// A server presenting `cert` (server or otherhost) on a TLS port of its
/// own (its plain port is only for the harness's readiness check); clients
/// must present a certificate when `auth_clients` is "yes".
struct TlsServer {
    _server: Server,
    port: Port,
}

fn tls_server(cert: &str, auth_clients: &str) -> TlsServer {
    let path = |f: &str| certs().join(f).to_string_lossy().into_owned();
    let port = Port::claim();
    let server = Server::start_with(&[
        "--tls-port",
        &port.0.to_string(),
        "--tls-cert-file",
        &path(&format!("{cert}.crt")),
        "--tls-key-file",
        &path(&format!("{cert}.key")),
        "--tls-ca-cert-file",
        &path("ca.crt"),
        "--tls-auth-clients",
        auth_clients,
    ]);
    TlsServer {
        _server: server,
        port,
    }
}

fn tls_url(server: &TlsServer) -> String {
    format!("rediss://127.0.0.1:{}/0", server.port.0)
}

fn with_tls(tls: TlsOptions) -> ClientOptions {
    ClientOptions {
        tls,
        connect_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    }
}

fn private_ca() -> TlsOptions {
    TlsOptions {
        ca: Some(file("ca.crt")),
        ..TlsOptions::default()
    }
}

async fn lock_round_trip(client: &Client) {
    let name = unique("tls");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    lease.extend(None).await.unwrap();
    lease.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_given_as_a_file_or_as_pem_text_works() {
    let server = tls_server("server", "no");
    let client = Client::connect_with(tls_url(&server), with_tls(private_ca()))
        .await
        .unwrap();
    lock_round_trip(&client).await;
    // A waiter's pub/sub connection uses TLS too.
    let name = unique("tls-wait");
    let opts = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(5));
    let holder = client.acquire(&name, &opts).await.unwrap();
    let waiting = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move { client.acquire(&name, &opts).await }
    });
    // Time to subscribe (were it not waiting yet, it would take the free lock
    // at once: the bound below would still hold, it only would not test
    // pub/sub).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = std::time::Instant::now();
    holder.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
    // Woken by the release message, not by the 1 s retry timer.
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );

    let pem = std::fs::read_to_string(certs().join("ca.crt")).unwrap();
    let tls = TlsOptions {
        ca: Some(Pem::from_text_or_path(pem)),
        ..TlsOptions::default()
    };
    let client = Client::connect_with(tls_url(&server), with_tls(tls))
        .await
        .unwrap();
    lock_round_trip(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_fails_clearly() {
    let server = tls_server("server", "no");
    let tls = TlsOptions {
        ca: Some(file("other-ca.crt")),
        ..TlsOptions::default()
    };
    let message = redis_message(Client::connect_with(tls_url(&server), with_tls(tls)).await);
    assert!(message.contains("certificate"), "{message}");
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_fails_clearly() {
    let server = tls_server("otherhost", "no");
    let message =
        redis_message(Client::connect_with(tls_url(&server), with_tls(private_ca())).await);
    assert!(message.contains("certificate"), "{message}");
    assert!(message.contains("not valid for name"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_works_and_is_required_where_configured() {
    let server = tls_server("server", "yes");
    let message =
        redis_message(Client::connect_with(tls_url(&server), with_tls(private_ca())).await);
    assert!(!message.is_empty());
    let tls = TlsOptions {
        client_cert: Some(file("client.crt")),
        client_key: Some(file("client.key")),
        ..private_ca()
    };
    let client = Client::connect_with(tls_url(&server), with_tls(tls))
        .await
        .unwrap();
    lock_round_trip(&client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_verification_takes_the_loud_option() {
    let server = tls_server("otherhost", "no");
    // The URL fragment alone is refused.
    let insecure = format!("{}#insecure", tls_url(&server));
    assert!(matches!(
        Client::connect(insecure.as_str()).await,
        Err(Error::InvalidArgument(_))
    ));
    let tls = TlsOptions {
        dangerously_skip_verification: true,
        ..TlsOptions::default()
    };
    let client = Client::connect_with(tls_url(&server), with_tls(tls))
        .await
        .unwrap();
    lock_round_trip(&client).await;
}

/// The certificate names `other.invalid` only; the client dials 127.0.0.1.
fn named(server_name: &str) -> TlsOptions {
    TlsOptions {
        server_name: Some(server_name.to_owned()),
        ..private_ca()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_name_override_verifies_that_name_on_every_connection() {
    let server = tls_server("otherhost", "no");
    let client = Client::connect_with(tls_url(&server), with_tls(named("other.invalid")))
        .await
        .unwrap();
    lock_round_trip(&client).await;
    // The pub/sub connection is made with the override too: a waiter
    // subscribes (seen on the server's plain port) and is woken by the
    // release message, long before its 5 s retry timer.
    let name = unique("tls-named");
    let opts = LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(10));
    let holder = client.acquire(&name, &opts).await.unwrap();
    // Another client: one client's own waiters queue locally, unsubscribed.
    let other = Client::connect_with(tls_url(&server), with_tls(named("other.invalid")))
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let name = name.clone();
        let opts = opts.clone();
        async move { other.acquire(&name, &opts).await }
    });
    let plain = server._server.url();
    eventually(
        Duration::from_secs(5),
        "the waiter subscribed over TLS",
        || numsub(&plain, &keys(&name).channel()) == 1,
    )
    .await;
    let t = std::time::Instant::now();
    holder.release().await.unwrap();
    waiting.await.unwrap().unwrap().release().await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_server_name_fails_clearly_and_never_falls_back() {
    let server = tls_server("otherhost", "no");
    // Without the override the URL's host is checked: a mismatch.
    let message =
        redis_message(Client::connect_with(tls_url(&server), with_tls(private_ca())).await);
    assert!(message.contains("not valid for name"), "{message}");
    // A name the certificate does not hold fails the same way.
    let message = redis_message(
        Client::connect_with(tls_url(&server), with_tls(named("redis.internal"))).await,
    );
    assert!(message.contains("not valid for name"), "{message}");
    // The right name with the wrong CA still fails: only the name changed.
    let tls = TlsOptions {
        ca: Some(file("other-ca.crt")),
        ..named("other.invalid")
    };
    let message = redis_message(Client::connect_with(tls_url(&server), with_tls(tls)).await);
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn bad_server_names_are_invalid_arguments() {
    let url = "rediss://127.0.0.1:1/0";
    for tls in [
        named("not a host name"),
        named(""),
        TlsOptions {
            dangerously_skip_verification: true,
            ..named("other.invalid")
        },
    ] {
        let result = Client::connect_with(url, with_tls(tls.clone())).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{tls:?}: {result:?}"
        );
    }
    let cluster = ClientOptions {
        topology: fencelock::Topology::Cluster,
        ..with_tls(named("other.invalid"))
    };
    match Client::connect_with(url, cluster).await {
        Err(Error::InvalidArgument(message)) => assert!(message.contains("cluster"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_tls_options_are_invalid_arguments() {
    let cases = [
        (
            "rediss://127.0.0.1:1/0",
            TlsOptions {
                client_cert: Some(file("client.crt")),
                ..TlsOptions::default()
            },
        ),
        (
            "rediss://127.0.0.1:1/0",
            TlsOptions {
                ca: Some(Pem::File("/nonexistent/ca.crt".into())),
                ..TlsOptions::default()
            },
        ),
        ("redis://127.0.0.1:1/0", private_ca()),
        (
            "rediss://127.0.0.1:1/0",
            TlsOptions {
                ca: Some(Pem::Data(
                    b"-----BEGIN CERTIFICATE-----\nnot base64!\n".to_vec(),
                )),
                ..TlsOptions::default()
            },
        ),
    ];
    for (url, tls) in cases {
        let result = Client::connect_with(url, with_tls(tls.clone())).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{url} {tls:?}: {result:?}"
        );
    }
}
