//! `Client::force_release`: an operator removes a lock whoever holds it and
//! advances its fence, so the old holder is fenced off.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use std::time::Duration;

use common::*;
use fencelock::{Client, Error, LockOptions};
use recorder::Recorder;

fn ttl(ms: u64) -> LockOptions {
    LockOptions::new(Duration::from_millis(ms))
}

// Multi-threaded: the test's blocking polls must not starve the clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_release_fences_off_the_holder_and_wakes_waiters() {
    // One test sets the process's subscriber: the audit line is checked here.
    let recorder = Recorder::install();
    let (url, _server) = redis_url();
    let admin = Client::connect(url.clone()).await.unwrap();
    let holder = Client::connect(url.clone()).await.unwrap();
    let name = unique("force");
    let zombie = holder.acquire(&name, &ttl(30_000)).await.unwrap();
    // Another client: a waiter of the holder's own client queues behind the
    // zombie's lease locally, and that lease ends only at its next renewal.
    let other = Client::connect(url.clone()).await.unwrap();
    let waiter = {
        let name = name.clone();
        tokio::spawn(async move { other.acquire(&name, &ttl(30_000)).await })
    };
    // The waiter is waiting (subscribed to the release channel) first.
    let channel = keys(&name).channel();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while numsub(&url, &channel) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let fence = admin.force_release(&name).await.unwrap();
    assert!(fence > zombie.fence(), "{fence} after {}", zombie.fence());
    // Woken by the release notification, long before its 30 s TTL retry.
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was woken")
        .unwrap()
        .unwrap();
    assert!(next.fence() > fence, "{} after {fence}", next.fence());
    assert!(matches!(
        zombie.extend(None).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        zombie.release().await,
        Err(Error::LockLost { .. })
    ));
    assert!(next.held().await.unwrap());
    next.release().await.unwrap();

    // A free lock: nothing to remove, the fence still moves on.
    let again = admin.force_release(&name).await.unwrap();
    assert!(again > next.fence());
    assert!(!exists(&url, &keys(&name).lock()));
    assert_eq!(
        get(&url, &keys(&name).fence()),
        Some(again.to_string().into_bytes())
    );

    let audit: Vec<String> = recorder
        .lines()
        .into_iter()
        // This test's lock only: the other tests of the binary run alongside.
        .filter(|l| l.contains("lock force-released") && l.contains(&name))
        .collect();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(audit[0].starts_with("WARN"), "{audit:?}");
    assert!(
        audit[0].contains(&format!("pid={}", std::process::id())),
        "{audit:?}"
    );
    assert!(audit[0].contains("was_held=true") && audit[1].contains("was_held=false"));
    assert!(!audit[0].contains(zombie.token()), "{audit:?}");
}

#[tokio::test]
async fn force_release_bad_names_and_closed_clients_write_nothing() {
    // A private server: DBSIZE counts this test's keys only (the binary's
    // other tests write to the shared one meanwhile).
    let server = fencelock_testkit::Server::start();
    let url = server.url();
    let client = Client::connect(url.clone()).await.unwrap();
    let before = dbsize(&url);
    for bad in [vec![], vec![b'x'; 1025]] {
        let err = client.force_release(bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
    let name = unique("force-closed");
    client.close().await;
    let err = client.force_release(&name).await.unwrap_err();
    assert!(matches!(&err, Error::Closed { .. }), "{err:?}");
    assert!(err.to_string().contains("force release"), "{err}");
    assert_eq!(dbsize(&url), before);
}

#[tokio::test]
async fn force_release_redlock_everywhere() {
    let (urls, _servers) = redlock_urls();
    let admin = Client::connect(urls.clone()).await.unwrap();
    let holder = Client::connect(urls.clone()).await.unwrap();
    let name = unique("force-redlock");
    let zombie = holder.acquire(&name, &ttl(30_000)).await.unwrap();
    let fence = admin.force_release(&name).await.unwrap();
    assert!(fence > zombie.fence());
    for url in &urls {
        assert!(!exists(url, &keys(&name).lock()), "{url}");
    }
    let next = admin
        .try_acquire(&name, &ttl(5_000))
        .await
        .unwrap()
        .unwrap();
    assert!(next.fence() > fence);
    next.release().await.unwrap();
}
