//! `Client::inspect` and `Lease::held`: read-only views of a lock in Redis.

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, Error, LockOptions};

fn ttl(ms: u64) -> LockOptions {
    LockOptions::new(Duration::from_millis(ms))
}

#[tokio::test]
async fn inspect_free_held_released_and_expired() {
    let (url, _server) = redis_url();
    let me = Client::connect(url.clone()).await.unwrap();
    let other = Client::connect(url.clone()).await.unwrap();
    let name = unique("inspect");

    let free = me.inspect(&name).await.unwrap();
    assert!(!free.held && !free.held_by_me);
    assert_eq!((free.ttl, free.fence), (None, None));

    let lease = other.acquire(&name, &ttl(10_000)).await.unwrap();
    let info = me.inspect(&name).await.unwrap();
    assert!(info.held && !info.held_by_me);
    assert!(
        info.ttl.unwrap() <= Duration::from_secs(10) && info.ttl.unwrap() > Duration::from_secs(8)
    );
    assert_eq!(info.fence, Some(lease.fence()));
    assert!(other.inspect(&name).await.unwrap().held_by_me);
    assert!(lease.held().await.unwrap());
    let shown = format!("{info:?}");
    assert!(!shown.contains(lease.token()), "{shown}");

    lease.release().await.unwrap();
    assert!(!lease.held().await.unwrap());
    let after = me.inspect(&name).await.unwrap();
    assert!(!after.held && !after.held_by_me && after.ttl.is_none());
    // The fence key outlives the lock (ttl + fence grace).
    assert_eq!(after.fence, Some(lease.fence()));

    let mine = me
        .acquire(&name, &ttl(300).auto_renew(false))
        .await
        .unwrap();
    let info = me.inspect(&name).await.unwrap();
    assert!(info.held && info.held_by_me);
    assert!(info.fence.unwrap() > lease.fence());
    assert!(!other.inspect(&name).await.unwrap().held_by_me);
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(!me.inspect(&name).await.unwrap().held);
    assert!(!mine.held().await.unwrap());
}

#[tokio::test]
async fn inspect_bad_names_and_closed_clients() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.clone()).await.unwrap();
    assert!(matches!(
        client.inspect("").await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.inspect(vec![b'x'; 2000]).await,
        Err(Error::InvalidArgument(_))
    ));
    let name = unique("inspect-closed");
    let lease = client.acquire(&name, &ttl(5_000)).await.unwrap();
    client.close().await;
    let err = client.inspect(&name).await.unwrap_err();
    assert!(matches!(&err, Error::Closed { .. }), "{err:?}");
    assert_eq!(
        err.lock_name().map(|n| n.as_bytes().to_vec()),
        Some(name.clone().into_bytes())
    );
    assert!(matches!(lease.held().await, Err(Error::Closed { .. })));
}

#[tokio::test]
async fn inspect_redlock_majority() {
    let (urls, _servers) = redlock_urls();
    let me = Client::connect(urls.clone()).await.unwrap();
    let name = unique("inspect-redlock");
    let lease = me.acquire(&name, &ttl(10_000)).await.unwrap();
    let info = me.inspect(&name).await.unwrap();
    assert!(info.held && info.held_by_me);
    assert_eq!(info.fence, Some(lease.fence()));
    // Two of five nodes lose the key: a majority still holds it.
    for url in &urls[..2] {
        let _: () = redis::cmd("DEL")
            .arg(&*keys(&name).lock())
            .query(&mut conn(url))
            .unwrap();
    }
    let info = me.inspect(&name).await.unwrap();
    assert!(info.held && info.held_by_me);
    assert!(lease.held().await.unwrap());
    // A third: no majority.
    let _: () = redis::cmd("DEL")
        .arg(&*keys(&name).lock())
        .query(&mut conn(&urls[2]))
        .unwrap();
    let info = me.inspect(&name).await.unwrap();
    assert!(!info.held && !info.held_by_me && info.ttl.is_none());
    assert!(!lease.held().await.unwrap());
}

/// The tokens (36-byte arguments) of the one `inspect` of `name` made by
/// `client` while MONITOR watched.
async fn tokens_inspect_sends(client: &Client, server: &Server, name: &str) -> (bool, usize) {
    let monitor = Monitor::start(&server.url());
    let held_by_me = client.inspect(name).await.unwrap().held_by_me;
    monitor.sync();
    let inspects: Vec<_> = monitor
        .seen()
        .into_iter()
        .filter(|s| {
            s.args
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"evalsha"))
        })
        .collect();
    assert_eq!(inspects.len(), 1, "{inspects:?}");
    // EVALSHA sha numkeys key(s)... then ARGV: our leases' tokens.
    let tokens = inspects[0].args.iter().skip(3).filter(|a| a.len() == 36);
    (held_by_me, tokens.count())
}

/// A released lease's token is forgotten at its release, not when its
/// handle is dropped (Node drops it at garbage collection): inspect asks
/// Redis about the live leases' tokens only.
#[tokio::test]
async fn inspect_sends_no_token_of_a_released_lease_still_in_scope() {
    let server = Server::start();
    let client = Client::connect(server.url()).await.unwrap();
    let name = unique("inspect-released");
    let mut kept = Vec::new();
    for _ in 0..3 {
        let lease = client.acquire(&name, &ttl(10_000)).await.unwrap();
        lease.release().await.unwrap();
        kept.push(lease);
    }
    let held = client.acquire(&name, &ttl(10_000)).await.unwrap();
    assert_eq!(
        tokens_inspect_sends(&client, &server, &name).await,
        (true, 1)
    );
    held.release().await.unwrap();
    drop(kept);
    client.close().await;
}

/// A lease dropped while held leaves its key to expire, and its token is
/// forgotten with it: the client no longer counts the lock as its own.
#[tokio::test]
async fn a_lease_dropped_while_held_is_forgotten() {
    let server = Server::start();
    let client = Client::connect(server.url()).await.unwrap();
    let name = unique("inspect-dropped");
    let lease = client.acquire(&name, &ttl(10_000)).await.unwrap();
    assert_eq!(
        tokens_inspect_sends(&client, &server, &name).await,
        (true, 1)
    );
    drop(lease);
    assert!(
        client.inspect(&name).await.unwrap().held,
        "the key runs out by its TTL"
    );
    assert_eq!(
        tokens_inspect_sends(&client, &server, &name).await,
        (false, 0)
    );
    client.close().await;
}
