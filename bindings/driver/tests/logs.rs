//! Diagnostics go through `tracing` and never carry a token or a password:
//! every event (all levels) of a run full of failures is recorded and
//! searched.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, LockOptions};
use recorder::Recorder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_password_in_any_log_event() {
    let recorder = Recorder::default();
    tracing::subscriber::set_global_default(recorder.clone()).unwrap();
    let fast = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    };
    let mut tokens = Vec::new();

    // Password-protected Redlock nodes, one of them down.
    let mut servers: Vec<Server> = (0..3)
        .map(|_| Server::start_with(&["--requirepass", "log-pass-77"]))
        .collect();
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("redis://:log-pass-77@127.0.0.1:{}/0", s.port))
        .collect();
    servers[0].stop();
    let client = Client::connect_with(urls.clone(), fast.clone())
        .await
        .unwrap();
    let name = unique("logs");
    let lease = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_millis(300)).auto_renew(true),
        )
        .await
        .unwrap();
    tokens.push(lease.token().to_owned());
    // Lost: the key vanishes everywhere while auto-renewing.
    for s in &servers[1..] {
        let url = format!("redis://:log-pass-77@127.0.0.1:{}/0", s.port);
        let _: i64 = redis::cmd("DEL")
            .arg(&*keys(&name).lock())
            .query(&mut conn(&url))
            .unwrap();
    }
    tokio::time::timeout(Duration::from_secs(3), lease.lost_signal())
        .await
        .unwrap();
    assert!(lease.release().await.is_err());

    // A server error (wrong type), a wrong password, a cancelled acquire.
    let (url, _server) = redis_url();
    let single = Client::connect(url.as_str()).await.unwrap();
    let bad = unique("logs-wrongtype");
    let _: i64 = redis::cmd("HSET")
        .arg(&*keys(&bad).lock())
        .arg("f")
        .arg("v")
        .query(&mut conn(&url))
        .unwrap();
    assert!(single
        .acquire(&bad, &LockOptions::new(Duration::from_secs(5)))
        .await
        .is_err());
    let wrong = format!("redis://:log-wrong-88@127.0.0.1:{}/0", servers[1].port);
    assert!(Client::connect_with(wrong.as_str(), fast.clone())
        .await
        .is_err());
    let held = single
        .acquire(
            unique("logs-held"),
            &LockOptions::new(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    tokens.push(held.token().to_owned());
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        single.acquire(
            String::from_utf8_lossy(held.name()).into_owned(),
            &LockOptions::new(Duration::from_secs(5)),
        ),
    )
    .await;
    assert!(cancelled.is_err());
    held.release().await.unwrap();
    servers[1].stop();
    let _ = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(5)).wait(Duration::ZERO),
        )
        .await;

    let lines = recorder.0.lock().unwrap().clone();
    assert!(!lines.is_empty(), "the driver logged nothing at all");
    for line in &lines {
        for secret in tokens
            .iter()
            .map(String::as_str)
            .chain(["log-pass-77", "log-wrong-88"])
        {
            assert!(!line.contains(secret), "secret in log line: {line}");
        }
    }
}
