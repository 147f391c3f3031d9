//! By default `rediss://` trusts the operating system's store, which
//! honours SSL_CERT_FILE (rustls-native-certs): a private CA is refused
//! until it is in that store. Its own test binary: it changes the process
//! environment, which no other thread may read meanwhile.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use fencelock::{Client, Error, LockOptions};
use fencelock_testkit::Port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_system_store_is_trusted_and_a_private_ca_is_not() {
    let certs = std::env::temp_dir().join(format!("fencelock-tls-store-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/tls.sh");
    let made = std::process::Command::new("bash")
        .arg(script)
        .arg(&certs)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let path = |f: &str| certs.join(f).to_string_lossy().into_owned();
    let port = Port::claim();
    let _server = Server::start_with(&[
        "--tls-port",
        &port.0.to_string(),
        "--tls-cert-file",
        &path("server.crt"),
        "--tls-key-file",
        &path("server.key"),
        "--tls-ca-cert-file",
        &path("ca.crt"),
        "--tls-auth-clients",
        "no",
    ]);
    let url = format!("rediss://127.0.0.1:{}/0", port.0);
    match Client::connect(url.as_str()).await {
        Err(Error::Redis { message, .. }) => assert!(message.contains("certificate"), "{message}"),
        other => panic!("expected a certificate error, got {other:?}"),
    }
    let before = std::env::var_os("SSL_CERT_FILE");
    std::env::set_var("SSL_CERT_FILE", certs.join("ca.crt"));
    let client = Client::connect(url.as_str()).await;
    match before {
        Some(value) => std::env::set_var("SSL_CERT_FILE", value),
        None => std::env::remove_var("SSL_CERT_FILE"),
    }
    let client = client.unwrap();
    let lease = client
        .acquire(unique("store"), &LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    lease.release().await.unwrap();
}
