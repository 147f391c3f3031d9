//! A connection the server closes (CLIENT KILL, a proxy cutting it, a
//! server-side timeout) costs no failed lock operation: the dead connection
//! is noticed at once, replaced, and a command that was on it is retried
//! once on the fresh one (safety checker finding F3).

mod common;

use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ClientOptions, LockOptions};

/// A 1 s response timeout, as in the safety checker's client-kill scenario:
/// a command that waited for it would show up in the elapsed times.
fn options() -> ClientOptions {
    ClientOptions {
        response_timeout: Duration::from_secs(1),
        ..ClientOptions::default()
    }
}

/// How many connections were killed. (Ours, and possibly a second one of
/// ours: redis-rs may open a replacement both when a command fails on the
/// dead connection and when the connection reports its death, and the
/// surplus one closes when its last user is done.)
fn kill(url: &str, kind: &str) -> i64 {
    // SKIPME yes (the default): the connection sending it survives.
    redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", kind])
        .query(&mut conn(url))
        .unwrap()
}

fn blocked_clients(url: &str) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut conn(url))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO clients has blocked_clients")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_right_after_client_kill_succeeds() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect_with(url.as_str(), options()).await.unwrap();
    let name = unique("killed");
    let now = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    client
        .acquire(&name, &now)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    for round in 0..5 {
        // The kill is done (its reply came back) before each operation is
        // sent, so each one meets a connection the server already closed.
        assert!(kill(&url, "normal") >= 1, "round {round}: our connection");
        let t = Instant::now();
        let lease = client.acquire(&name, &now).await.unwrap_or_else(|e| {
            panic!(
                "round {round}: acquire after CLIENT KILL failed after {:?}: {e}",
                t.elapsed()
            )
        });
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(
            get(&url, &keys(&name).lock).as_deref(),
            Some(lease.token().as_bytes())
        );

        assert!(kill(&url, "normal") >= 1);
        lease.extend(Some(Duration::from_secs(20))).await.unwrap();
        assert!(pttl(&url, &keys(&name).lock) > 10_000);

        assert!(kill(&url, "normal") >= 1);
        let t = Instant::now();
        lease.release().await.unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert!(!exists(&url, &keys(&name).lock));
    }
    // try_acquire, and a client that never waited before (no pub/sub yet).
    assert!(kill(&url, "normal") >= 1);
    let lease = client.try_acquire(&name, &now).await.unwrap().unwrap();
    lease.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_on_a_connection_killed_under_it_is_retried_once() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect_with(url.as_str(), options()).await.unwrap();
    let name = unique("inflight");
    // A counter ahead of the server clock: each run of the acquire script
    // adds exactly one.
    let ahead: u64 = 1 << 62;
    let _: () = redis::cmd("SET")
        .arg(&keys(&name).fence)
        .arg(ahead)
        .query(&mut conn(&url))
        .unwrap();
    // Scripts are write commands: the acquire reaches the server and waits
    // there, unanswered, until the pause ends.
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "20000", "WRITE"])
        .query(&mut conn(&url))
        .unwrap();
    let acquiring = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move {
            let opts = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
            client.acquire(&name, &opts).await
        }
    });
    eventually(
        Duration::from_secs(5),
        "the acquire is parked by the pause",
        || blocked_clients(&url) == 1,
    )
    .await;
    // The server drops the parked command unrun along with the connection.
    assert_eq!(kill(&url, "normal"), 1);
    eventually(
        Duration::from_secs(5),
        "the retry is parked by the pause",
        || blocked_clients(&url) == 1,
    )
    .await;
    assert!(!acquiring.is_finished(), "{:?}", acquiring.await);
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut conn(&url))
        .unwrap();
    let lease = tokio::time::timeout(Duration::from_secs(5), acquiring)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The killed attempt never ran: the retry got the first fence.
    assert_eq!(lease.fence(), ahead + 1);
    assert_eq!(
        get(&url, &keys(&name).lock).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock));
}
