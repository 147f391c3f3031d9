//! A lock's life as Redis and the caller see it: what its keys leave behind
//! (the fence key expires ttl + grace after the last use), the TTL floor,
//! the `lost` flag, and why an acquire failed. Real redis-servers.

mod common;

use std::time::{Duration, Instant};

use common::{conn, dbsize, eventually, keys, pttl, redis_url, unique, Server};
use fencelock::{Client, ClientOptions, Error, LockOptions, NotAcquiredReason, Operation};
use futures_util::stream::{self, StreamExt};

/// Keys matching `pattern`, by SCAN (which skips expired keys).
fn scan_count(url: &str, pattern: &str) -> usize {
    let mut c = conn(url);
    let mut cursor: u64 = 0;
    let mut n = 0;
    loop {
        let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(&mut c)
            .unwrap();
        n += batch.len();
        if next == 0 {
            return n;
        }
        cursor = next;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_names_used_once_leave_no_key_once_the_grace_has_passed() {
    let server = Server::start();
    let url = server.url();
    let options = ClientOptions {
        fence_grace: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(url.as_str(), options).await.unwrap();
    let lock = LockOptions::new(Duration::from_secs(1)).wait(Duration::ZERO);
    let run = unique("once");
    let fences = stream::iter(0..20_000)
        .map(|i| {
            let (client, lock, name) = (client.clone(), lock.clone(), format!("{run}:{i}"));
            async move {
                let lease = client.acquire(&name, &lock).await.unwrap();
                // A machine stalled past the 1 s ttl makes this LockLost (the
                // key expired first): keys must leave Redis either way.
                match lease.release().await {
                    Ok(()) | Err(Error::LockLost { .. }) => {}
                    Err(e) => panic!("release: {e:?}"),
                }
                lease.fence()
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<u64>>()
        .await;
    assert_eq!(fences.len(), 20_000);
    let sample = format!("{run}:0");
    let fence_ttl = pttl(&url, &keys(&sample).fence());
    assert!(
        fence_ttl == -2 || (0..=1_300).contains(&fence_ttl),
        "fence key ttl {fence_ttl}"
    );
    // Released at once: only the fence keys are left, until ttl + grace.
    let pattern = format!("fencelock:{{{run}:*");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = scan_count(&url, &pattern);
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} keys left after 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(dbsize(&url), 0, "nothing else was written either");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_renewal_push_the_fence_key_expiry_too() {
    let (url, _server) = redis_url();
    let options = ClientOptions {
        fence_grace: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(url.as_str(), options).await.unwrap();
    let name = unique("fence-ttl");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(10)))
        .await
        .unwrap();
    let fence_ttl = pttl(&url, &keys(&name).fence());
    assert!((10_000..=15_000).contains(&fence_ttl), "{fence_ttl}");
    lease.extend(Some(Duration::from_secs(100))).await.unwrap();
    let fence_ttl = pttl(&url, &keys(&name).fence());
    assert!((100_000..=105_000).contains(&fence_ttl), "{fence_ttl}");
    lease.release().await.unwrap();
    client.close().await;
}

/// ttl must leave validity after the drift allowance (ttl/100 + 2 ms): 1 and
/// 2 ms are bad arguments with one URL and with three, before any Redis call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_without_validity_after_the_drift_is_invalid_in_every_topology() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    for client_urls in [vec![urls[0].clone()], urls.clone()] {
        let client = Client::connect(client_urls).await.unwrap();
        for ms in [1, 2] {
            let lock = LockOptions::new(Duration::from_millis(ms)).wait(Duration::ZERO);
            let err = client.acquire(unique("tiny"), &lock).await.unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
            let err = client.try_acquire(unique("tiny"), &lock).await.unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        }
        client.close().await;
    }
    for url in &urls {
        let scripts: Vec<(String, u64)> = common::commandstats(url)
            .into_iter()
            .filter(|(c, _)| c.starts_with("eval"))
            .collect();
        assert_eq!(scripts, vec![], "nothing was sent");
        assert_eq!(dbsize(url), 0, "nothing was written");
    }
    // 3 ms is the smallest valid ttl (accepted: any error but a bad
    // argument); an extend to 2 ms is refused before anything is sent. The
    // wait is bounded: with 3 nodes a round under load can take more than the
    // 0.97 ms of validity a 3 ms ttl leaves, and every attempt then fails.
    let client = Client::connect(urls.clone()).await.unwrap();
    let smallest = LockOptions::new(Duration::from_millis(3)).wait(Duration::from_secs(2));
    match client.acquire(unique("smallest"), &smallest).await {
        Ok(lease) => {
            let err = lease
                .extend(Some(Duration::from_millis(2)))
                .await
                .unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        }
        Err(err) => assert!(!matches!(err, Error::InvalidArgument(_)), "{err:?}"),
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_is_true_once_a_release_or_extend_found_the_lock_gone() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let lock = LockOptions::new(Duration::from_millis(50)).wait(Duration::ZERO);
    for op in ["release", "extend"] {
        let name = unique("lost");
        let lease = client.acquire(&name, &lock).await.unwrap();
        let lock_key = keys(&name).lock();
        eventually(Duration::from_secs(5), "the lock key expired", || {
            pttl(&url, &lock_key) == -2
        })
        .await;
        let err = match op {
            "release" => lease.release().await.unwrap_err(),
            _ => lease.extend(None).await.unwrap_err(),
        };
        assert!(matches!(err, Error::LockLost { .. }), "{op}: {err:?}");
        assert!(lease.lost(), "{op}: lost after LockLost");
        assert_eq!(lease.valid_for(), Duration::ZERO);
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_acquired_says_held_and_names_the_lock() {
    let (url, _server) = redis_url();
    let holder = Client::connect(url.as_str()).await.unwrap();
    let other = Client::connect(url.as_str()).await.unwrap();
    let name = unique("held");
    let lock = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let lease = holder.acquire(&name, &lock).await.unwrap();
    for wait in [Duration::ZERO, Duration::from_millis(100)] {
        let err = other
            .acquire(&name, &lock.clone().wait(wait))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), Some(NotAcquiredReason::Held), "{err:?}");
        assert_eq!(err.lock_name().unwrap().as_bytes(), name.as_bytes());
        assert!(!err.to_string().contains(lease.token()));
    }
    lease.release().await.unwrap();
    holder.close().await;
    other.close().await;
}

/// An ACL user without channel rights (Redis 7's default for new users):
/// the release script's PUBLISH is refused, the release still succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_release_notification_does_not_fail_the_release() {
    let server = Server::start();
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "app",
            "on",
            ">pw",
            "~fencelock:*",
            "+@all",
            "resetchannels",
        ])
        .query(&mut conn(&server.url()))
        .unwrap();
    let url = format!("redis://app:pw@127.0.0.1:{}/0", server.port);
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("acl");
    let lock = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    for _ in 0..2 {
        let lease = client.acquire(&name, &lock).await.unwrap();
        lease.release().await.unwrap();
        assert_eq!(pttl(&server.url(), &keys(&name).lock()), -2, "released");
        assert!(!lease.lost());
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_client_is_its_own_kind_naming_the_lock_and_the_call() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("closed-kind");
    let lease = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(30)))
        .await
        .unwrap();
    client.close().await;

    let err = client
        .acquire(&name, &LockOptions::new(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Closed { name: n, operation: Operation::Acquire } if n.as_bytes() == name.as_bytes()),
        "{err:?}"
    );
    assert_eq!(err.code(), "CLIENT_CLOSED");
    assert_eq!(
        err.to_string(),
        format!("cannot acquire lock {name:?}: the client is closed")
    );
    let err = client
        .try_acquire(&name, &LockOptions::new(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed { .. }), "{err:?}");

    // The lease outlives its client: extend and release are refused the
    // same way (the key expires by its TTL), and say which call it was.
    let err = lease.extend(None).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Closed {
                operation: Operation::Extend,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("cannot extend lock"), "{err}");
    let err = lease.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Closed {
                operation: Operation::Release,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.lock_name().map(|n| n.as_bytes()), Some(name.as_bytes()));
    assert!(
        pttl(&url, &keys(&name).lock()) > 0,
        "left to expire, not released"
    );
}
