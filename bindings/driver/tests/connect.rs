//! Connecting: URLs, credentials, databases, unreachable servers, reconnects.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions};
use fencelock_testkit::Port;

fn fast() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn malformed_urls_are_invalid_arguments_with_the_password_redacted() {
    for url in [
        "",
        "localhost:6379",
        "http://user:hunter2-secret@127.0.0.1:6379",
        "redis://user:hunter2-secret@127.0.0.1:notaport",
        "redis://user:hunter2-secret@127.0.0.1:6379/notadb",
        "redis://:hunter2-secret@127.0.0.1:6379/?protocol=resp9",
    ] {
        match Client::connect(url).await {
            Err(Error::InvalidArgument(message)) => {
                assert!(!message.contains("hunter2-secret"), "{message}")
            }
            other => panic!("{url}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert!(matches!(
        Client::connect(Vec::<String>::new()).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Client::connect(["redis://:hunter2-secret@127.0.0.1:1/0", "redis://127.0.0.1:1/1"]).await,
        Err(Error::InvalidArgument(m)) if !m.contains("hunter2-secret")
    ));
    let bad_prefix = ClientOptions {
        prefix: "a{b".into(),
        ..ClientOptions::default()
    };
    assert!(matches!(
        Client::connect_with("redis://127.0.0.1:1", bad_prefix).await,
        Err(Error::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn a_server_that_is_down_fails_fast() {
    let mut server = Server::start();
    let url = server.url();
    server.stop();
    let t = Instant::now();
    let result = Client::connect_with(url.as_str(), fast()).await;
    eprintln!("{result:?}");
    assert!(matches!(result, Err(Error::Redis { .. })), "{result:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_within_the_connect_timeout() {
    // Accepts TCP connections but never says a word.
    let port = Port::claim();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port.0)).unwrap();
    let url = format!("redis://127.0.0.1:{}/0", port.0);
    let t = Instant::now();
    let result = Client::connect_with(url.as_str(), fast()).await;
    eprintln!("{result:?}");
    assert!(matches!(result, Err(Error::Redis { .. })), "{result:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    drop(listener);
}

#[tokio::test]
async fn wrong_password_is_a_redis_error_without_the_password() {
    let server = Server::start_with(&["--requirepass", "right-pass-71"]);
    let wrong = format!("redis://:wrong-pass-93@127.0.0.1:{}/0", server.port);
    match Client::connect_with(wrong.as_str(), fast()).await {
        Err(e @ Error::Redis { .. }) => {
            let shown = format!("{e} {e:?}");
            eprintln!("wrong password: {shown}");
            assert!(!shown.contains("wrong-pass-93"), "{shown}");
            assert!(
                shown.contains("***") || !shown.contains("pass-93"),
                "{shown}"
            );
        }
        other => panic!("expected a Redis error, got {other:?}"),
    }
    let none = format!("redis://127.0.0.1:{}/0", server.port);
    assert!(matches!(
        Client::connect_with(none.as_str(), fast()).await,
        Err(Error::Redis { .. })
    ));
    let right = format!("redis://:right-pass-71@127.0.0.1:{}/0", server.port);
    let client = Client::connect_with(right.as_str(), fast()).await.unwrap();
    assert!(!format!("{client:?}").contains("right-pass-71"));
    let lease = client
        .acquire("pw", &LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    lease.release().await.unwrap();
}

#[tokio::test]
async fn acl_users_and_database_indexes() {
    let server = Server::start();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "locker",
            "on",
            ">locker-pw-55",
            "~*",
            "&*",
            "+@all",
        ])
        .query(&mut conn(&server.url()))
        .unwrap();
    let url = format!("redis://locker:locker-pw-55@127.0.0.1:{}/5", server.port);
    let client = Client::connect(url.as_str()).await.unwrap();
    assert!(!format!("{client:?}").contains("locker-pw-55"));
    let lease = client
        .acquire("in-db-5", &LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    let k = keys("in-db-5");
    assert!(!exists(&server.url(), &k.lock()), "db 0 must be untouched");
    let db5 = format!("redis://127.0.0.1:{}/5", server.port);
    assert_eq!(
        get(&db5, &k.lock()).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.release().await.unwrap();
    // A user without the needed permissions gets a Redis error, not a hang.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "reader",
            "on",
            ">reader-pw-66",
            "~*",
            "+@read",
            "+hello",
            "+client",
            "+select",
            "+ping",
        ])
        .query(&mut conn(&server.url()))
        .unwrap();
    let url = format!("redis://reader:reader-pw-66@127.0.0.1:{}/0", server.port);
    let client = Client::connect(url.as_str()).await.unwrap();
    let r = client
        .acquire(
            "noperm",
            &LockOptions::new(Duration::from_secs(5)).wait(Duration::ZERO),
        )
        .await;
    match r {
        Err(Error::Redis { message, .. }) => {
            assert!(!message.contains("reader-pw-66"), "{message}")
        }
        other => panic!("expected a Redis error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_client_reconnects_after_a_server_restart() {
    let mut server = Server::start();
    let url = server.url();
    let client = Client::connect_with(url.as_str(), fast()).await.unwrap();
    let opts = LockOptions::new(Duration::from_secs(5)).wait(Duration::ZERO);
    client
        .acquire("before", &opts)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    server.stop();
    let down = client.acquire("down", &opts).await;
    assert!(matches!(down, Err(Error::Redis { .. })), "{down:?}");
    server.restart();
    // The first command after the restart may still see the old, dead
    // connection; the client reconnects in the background.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.acquire("after", &opts).await {
            Ok(lease) => {
                lease.release().await.unwrap();
                break;
            }
            Err(Error::Redis { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("no reconnect: {e:?}"),
        }
    }
}

#[tokio::test]
async fn a_slow_server_hits_the_response_timeout() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect_with(url.as_str(), fast()).await.unwrap();
    // Every client's commands wait for 1 s; the pause is in force once OK.
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "1000", "ALL"])
        .query(&mut conn(&url))
        .unwrap();
    let t = Instant::now();
    let r = client
        .acquire(
            "slow",
            &LockOptions::new(Duration::from_secs(5)).wait(Duration::ZERO),
        )
        .await;
    assert!(matches!(r, Err(Error::Redis { .. })), "{r:?}");
    assert!(
        t.elapsed() < Duration::from_millis(1400),
        "{:?}",
        t.elapsed()
    );
    // The EVALSHA runs when the pause ends; the compensating release that
    // follows the unknown outcome must clean it up.
    eventually(
        Duration::from_secs(3),
        "no lock left after the timeout",
        || !exists(&url, &keys("slow").lock()),
    )
    .await;
}

#[tokio::test]
async fn rediss_urls_speak_tls_and_fail_cleanly_against_a_plain_server() {
    // A plain-text server cannot complete a TLS handshake: a Redis error
    // within the connect timeout (and no crypto-provider panic).
    let server = Server::start();
    let url = format!("rediss://:tls-pass-12@127.0.0.1:{}/0", server.port);
    let t = Instant::now();
    match Client::connect_with(url.as_str(), fast()).await {
        Err(e @ Error::Redis { .. }) => {
            let shown = format!("{e} {e:?}");
            eprintln!("{shown}");
            assert!(!shown.contains("tls-pass-12"), "{shown}");
        }
        other => panic!("expected a Redis error, got {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test]
async fn rediss_with_a_self_signed_certificate_and_the_dangerous_option() {
    let dir = std::env::temp_dir().join(format!("fencelock-tls-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is needed to make a test certificate");
    assert!(status.success());
    let tls_port_claim = Port::claim();
    let tls_port = tls_port_claim.0;
    let (cert, key) = (
        cert.to_string_lossy().into_owned(),
        key.to_string_lossy().into_owned(),
    );
    let tls_port_arg = tls_port.to_string();
    let server = Server::start_with(&[
        "--tls-port",
        &tls_port_arg,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &cert,
        "--tls-auth-clients",
        "no",
        "--requirepass",
        "tls-pass-34",
    ]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
        assert!(Instant::now() < deadline, "TLS port did not open");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Unverified only through the loudly named option (`#insecure` alone is
    // refused; see tests/tls.rs).
    let url = format!("rediss://:tls-pass-34@127.0.0.1:{tls_port}/0");
    let insecure = ClientOptions {
        tls: fencelock::TlsOptions {
            dangerously_skip_verification: true,
            ..fencelock::TlsOptions::default()
        },
        ..fast()
    };
    let client = Client::connect_with(url.as_str(), insecure.clone())
        .await
        .unwrap();
    let name = unique("tls");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(5)))
        .await
        .unwrap();
    let plain = format!("redis://:tls-pass-34@127.0.0.1:{}/0", server.port);
    assert_eq!(
        get(&plain, &keys(&name).lock()).as_deref(),
        Some(lease.token().as_bytes())
    );
    // Waiting works over TLS too (the pub/sub connection is TLS as well).
    let other = Client::connect_with(url.as_str(), insecure).await.unwrap();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            other
                .acquire(&name, &LockOptions::new(Duration::from_secs(5)))
                .await
        }
    });
    eventually(Duration::from_secs(5), "the waiter subscribed", || {
        numsub(&plain, &keys(&name).channel()) >= 1
    })
    .await;
    lease.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    next.release().await.unwrap();
    // Without #insecure the self-signed certificate is rejected.
    let strict = format!("rediss://:tls-pass-34@127.0.0.1:{tls_port}/0");
    let refused = Client::connect_with(strict.as_str(), fast()).await;
    assert!(matches!(refused, Err(Error::Redis { .. })), "{refused:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
