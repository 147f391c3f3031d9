//! A Redis restart is invisible to the next call: a command that provably
//! never reached the server (no connection could be made, or the last one is
//! known dead) goes out on a fresh connection, retried with a short backoff
//! within the call's bounds — the wait for an acquire, the response timeout
//! for the rest. A command that may have run is never resent.

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions};

fn ttl(secs: u64) -> LockOptions {
    LockOptions::new(Duration::from_secs(secs))
}

/// A command written before the client hears of the shutdown (broken pipe,
/// EOF) has an unknown outcome and fails the call at once, never resent;
/// only a link known dead makes the next acquire wait for the server. One
/// try-once call fails either way and leaves the link known dead.
async fn until_known_down(client: &Client) {
    let probe = client
        .acquire(unique("probe"), &ttl(5).wait(Duration::ZERO))
        .await;
    assert!(matches!(probe, Err(Error::Redis { .. })), "{probe:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_call_after_a_restart_succeeds() {
    let mut server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("restart");
    for round in 0..3 {
        client
            .acquire(&name, &ttl(5).wait(Duration::ZERO))
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
        server.restart();
        // try-once, wait and the default (forever) all answer at once.
        let t = Instant::now();
        let lease = match round {
            0 => client.acquire(&name, &ttl(5).wait(Duration::ZERO)).await,
            1 => {
                client
                    .acquire(&name, &ttl(5).wait(Duration::from_secs(2)))
                    .await
            }
            _ => client.acquire(&name, &ttl(5)).await,
        }
        .unwrap_or_else(|e| panic!("round {round}: {e} after {:?}", t.elapsed()));
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(
            get(&url, &keys(&name).lock()).as_deref(),
            Some(lease.token().as_bytes())
        );
        lease.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_extends_and_releases_across_a_restart() {
    let mut server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("held-restart");
    let lease = client.acquire(&name, &ttl(10)).await.unwrap();
    server.restart();
    // The key went with the restart (no persistence): the server answers
    // at once, and it says the lock is gone.
    let t = Instant::now();
    assert!(matches!(
        lease.extend(None).await,
        Err(Error::LockLost { .. })
    ));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let lease = client.acquire(&name, &ttl(10)).await.unwrap();
    server.restart();
    let t = Instant::now();
    assert!(matches!(lease.release().await, Err(Error::LockLost { .. })));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_acquire_succeeds_once_the_server_is_back() {
    let mut server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("down-up");
    server.stop();
    until_known_down(&client).await;
    let acquiring = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move {
            client
                .acquire(&name, &ttl(5).wait(Duration::from_secs(10)))
                .await
        }
    });
    // The server stays down for a while: the acquire keeps trying.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!acquiring.is_finished(), "{:?}", acquiring.await);
    server.restart();
    let back = Instant::now();
    let lease = tokio::time::timeout(Duration::from_secs(5), acquiring)
        .await
        .expect("the acquire finishes once the server is back")
        .unwrap()
        .unwrap();
    // The backoff between attempts is at most 250 ms.
    assert!(
        back.elapsed() < Duration::from_millis(1000),
        "{:?}",
        back.elapsed()
    );
    assert_eq!(
        get(&url, &keys(&name).lock()).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_within_the_bounds() {
    let mut server = Server::start();
    let url = server.url();
    let options = ClientOptions {
        response_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(url.as_str(), options).await.unwrap();
    let name = unique("down");
    let lease = client.acquire(&name, &ttl(10)).await.unwrap();
    server.stop();
    // Down for a while before the calls (see above).
    tokio::time::sleep(Duration::from_millis(100)).await;

    // try-once: one fresh attempt, refused, a Redis error at once.
    let t = Instant::now();
    let err = client
        .acquire(unique("down-1"), &ttl(5).wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );

    // A bounded wait keeps trying until its end.
    let t = Instant::now();
    let err = client
        .acquire(unique("down-2"), &ttl(5).wait(Duration::from_millis(700)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );

    // Release: within the response timeout.
    let t = Instant::now();
    let err = lease.release().await.unwrap_err();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(50),
        "{:?}",
        t.elapsed()
    );
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    assert!(err.to_string().contains("refused"), "{err}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stops_an_acquire_waiting_for_a_down_server() {
    let mut server = Server::start();
    let client = Client::connect(server.url().as_str()).await.unwrap();
    server.stop();
    until_known_down(&client).await;
    let acquiring = tokio::spawn({
        let client = client.clone();
        async move { client.acquire(unique("closing"), &ttl(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!acquiring.is_finished());
    let t = Instant::now();
    client.close().await;
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let err = acquiring.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");
}
