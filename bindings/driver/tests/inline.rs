//! The inline fast path against a real redis-server: an uncontended,
//! non-renewing acquire and its release run in the caller's future (no
//! task is spawned for them), a dropped acquire still leaves nothing held,
//! a local waiter queued behind an inline lease is handed the lock by its
//! release, loss is reported as for any lease, and an auto-renewing lease
//! still gets its actor. A Redlock acquire takes the same path: its round
//! goes out from the caller's future, and a drop mid-round compensates on
//! every node; a release dropped mid-round still frees the name for this
//! client's next acquire.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{conn, dbsize, eventually, exists, get, keys, pause_writes, redis_url, unique};
use fencelock::{Client, Error, LockOptions};
use fencelock_testkit::Server;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Tasks alive on this runtime (the client's connection tasks included).
fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// A client whose connections are open, so that counting tasks counts
/// what an acquire adds. Inspected, not locked: `inspect` waits for every
/// node, while a Redlock release may leave a node's reply to a short task
/// that would still be alive, or not, when the test counts.
async fn warmed_up(urls: impl fencelock::IntoUrls) -> Client {
    let client = Client::connect(urls).await.unwrap();
    client.inspect("warm").await.unwrap();
    client
}

/// The next lease of `name` gets a higher fence than `last`.
async fn fence_goes_on(client: &Client, name: &str, options: &LockOptions, last: u64) {
    let again = client.acquire(name, options).await.unwrap();
    assert!(again.fence() > last);
    again.release().await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn an_uncontended_acquire_and_its_release_spawn_no_task() {
    let (url, _server) = redis_url();
    let client = warmed_up(&url).await;
    let options = LockOptions::new(secs(10));

    let name = unique("inline");
    let before = tasks();
    let lease = client.acquire(&name, &options).await.unwrap();
    assert_eq!(tasks(), before, "no lease actor for an uncontended acquire");
    assert_eq!(
        get(&url, &keys(&name).lock()),
        Some(lease.token().as_bytes().to_vec())
    );
    assert!(lease.fence() > 0);
    assert!(!lease.lost());
    assert!(lease.valid_for() > secs(9));
    assert!(lease.held().await.unwrap());
    let info = client.inspect(&name).await.unwrap();
    assert!(info.held_by_me, "inspect knows the inline lease is ours");
    lease.extend(Some(secs(20))).await.unwrap();
    assert!(lease.valid_for() > secs(19));
    lease.release().await.unwrap();
    assert_eq!(tasks(), before);
    assert!(!exists(&url, &keys(&name).lock()));
    assert!(!lease.held().await.unwrap());
    assert_eq!(lease.valid_for(), Duration::ZERO);
    // A second release is a no-op, as for any lease.
    lease.release().await.unwrap();
    fence_goes_on(&client, &name, &options, lease.fence()).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_inline_acquire_leaves_nothing_held() {
    // A private server: DBSIZE counts this test's keys only.
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let options = LockOptions::new(secs(60));
    client
        .acquire("warm", &options)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let name = unique("dropped");
    // The server holds every write while paused: the attempt reaches it,
    // and its outcome is unknown when the future is dropped.
    pause_writes(&url, 300);
    let attempt = tokio::time::timeout(ms(50), client.acquire(&name, &options)).await;
    assert!(attempt.is_err(), "the attempt was still in flight");
    // The same client's try-once waits for that compensating release
    // instead of meeting the abandoned key.
    let lease = client
        .try_acquire(&name, &options)
        .await
        .unwrap()
        .expect("the dropped acquire is not a holder");
    lease.release().await.unwrap();
    // A third drop, mid-flight again, then close: close waits for the
    // compensating release, so nothing is left once it returns.
    pause_writes(&url, 200);
    let attempt = tokio::time::timeout(ms(30), client.acquire(&name, &options)).await;
    assert!(attempt.is_err());
    client.close().await;
    assert!(!exists(&url, &keys(&name).lock()));
    // Only the fence keys remain.
    let mut left: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut conn(&url)).unwrap();
    left.sort();
    let fences = [keys("warm").fence(), keys(&name).fence()];
    assert!(
        left.iter().all(|k| fences.iter().any(|f| f == k)),
        "only fences left: {:?}",
        left.iter()
            .map(|k| String::from_utf8_lossy(k))
            .collect::<Vec<_>>()
    );
    assert_eq!(dbsize(&url), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_behind_an_inline_lease_is_handed_the_lock() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("inline-handoff");
    let holder = client
        .acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    // In line inside the call: it waits for the inline holder's turn.
    let waiting = client.acquire(&name, &LockOptions::new(secs(5)).wait(secs(30)));
    let waiter = tokio::spawn(waiting);
    // Let the waiter's actor run and wait (no timing asserted: the handoff
    // works whether it started waiting or not).
    tokio::task::yield_now().await;
    holder.release().await.unwrap();
    let lease = waiter.await.unwrap().unwrap();
    assert!(
        lease.fence() > holder.fence(),
        "handed over with a newer fence"
    );
    assert_eq!(
        get(&url, &keys(&name).lock()),
        Some(lease.token().as_bytes().to_vec())
    );
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));

    // A waiter behind an inline lease that is kept but runs out: the
    // lease has no timer of its own, yet the waiter gets the lock once its
    // validity ends (not only when it is dropped).
    let kept = client
        .acquire(&name, &LockOptions::new(ms(300)))
        .await
        .unwrap();
    let next = client
        .acquire(&name, &LockOptions::new(secs(5)).wait(secs(10)))
        .await
        .unwrap();
    assert!(
        kept.lost(),
        "the waiter got it after the kept lease ran out"
    );
    assert!(next.fence() > kept.fence());
    next.release().await.unwrap();
    drop(kept);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_release_after_loss_are_lock_lost() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("inline-lost");
    let lease = client
        .acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    let lost = Arc::new(AtomicBool::new(false));
    lease.on_lost({
        let lost = Arc::clone(&lost);
        move || lost.store(true, Ordering::SeqCst)
    });
    // Someone deletes the key behind our back.
    let _: i64 = redis::cmd("DEL")
        .arg(&*keys(&name).lock())
        .query(&mut conn(&url))
        .unwrap();
    assert!(matches!(
        lease.extend(None).await,
        Err(Error::LockLost { .. })
    ));
    assert!(lease.lost());
    eventually(secs(5), "on_lost ran", || lost.load(Ordering::SeqCst)).await;
    assert!(matches!(lease.release().await, Err(Error::LockLost { .. })));

    // Validity running out, with nobody driving the lease: the getters
    // and a loss watcher see it all the same.
    let short = client
        .acquire(unique("inline-expired"), &LockOptions::new(ms(200)))
        .await
        .unwrap();
    tokio::time::timeout(secs(5), short.lost_signal())
        .await
        .expect("the loss is signalled when the validity runs out");
    assert!(short.lost());
    assert_eq!(short.valid_for(), Duration::ZERO);
    assert!(matches!(
        short.extend(None).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(short.release().await, Err(Error::LockLost { .. })));

    // After close: Closed, as for an actor's lease.
    let held = client
        .acquire(unique("inline-closed"), &LockOptions::new(secs(60)))
        .await
        .unwrap();
    client.close().await;
    assert!(matches!(held.release().await, Err(Error::Closed { .. })));
}

#[tokio::test(flavor = "current_thread")]
async fn an_auto_renewing_lease_takes_the_actor_path_and_renews() {
    let (url, _server) = redis_url();
    let client = warmed_up(&url).await;
    let options = LockOptions::new(ms(300)).auto_renew(true);
    let name = unique("renewing");
    let before = tasks();
    let lease = client.acquire(&name, &options).await.unwrap();
    assert_eq!(tasks(), before + 1, "a renewing lease has its actor");
    // Three TTLs later it still holds: the actor renewed it.
    tokio::time::sleep(ms(900)).await;
    assert!(!lease.lost());
    assert!(lease.held().await.unwrap());
    assert_eq!(
        get(&url, &keys(&name).lock()),
        Some(lease.token().as_bytes().to_vec())
    );
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    client.close().await;
}

/// Three private nodes (Redlock): `CLIENT PAUSE` and `DBSIZE` see this
/// test's keys only.
fn three_nodes() -> (Vec<String>, Vec<Server>) {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    (servers.iter().map(Server::url).collect(), servers)
}

#[tokio::test(flavor = "current_thread")]
async fn a_redlock_acquire_and_its_release_spawn_no_task() {
    let (urls, _servers) = three_nodes();
    let client = warmed_up(urls.clone()).await;
    let options = LockOptions::new(secs(10));

    let name = unique("inline-redlock");
    let before = tasks();
    let lease = client.acquire(&name, &options).await.unwrap();
    // A node that answers after the majority decided finishes in a short
    // task of its own; an actor would live as long as the lease.
    let token = lease.token().as_bytes().to_vec();
    eventually(secs(5), "granted on every node, no lease actor", || {
        tasks() == before
            && urls
                .iter()
                .all(|url| get(url, &keys(&name).lock()).as_ref() == Some(&token))
    })
    .await;
    assert!(lease.fence() > 0);
    assert!(lease.held().await.unwrap());
    lease.extend(Some(secs(20))).await.unwrap();
    assert!(lease.valid_for() > secs(19));
    lease.release().await.unwrap();
    eventually(secs(5), "released on every node, no task left", || {
        tasks() == before && urls.iter().all(|url| !exists(url, &keys(&name).lock()))
    })
    .await;
    fence_goes_on(&client, &name, &options, lease.fence()).await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_acquire_dropped_mid_round_leaves_nothing_held() {
    let (urls, _servers) = three_nodes();
    let client = warmed_up(urls.clone()).await;
    let options = LockOptions::new(secs(60));
    let name = unique("dropped-redlock");
    // Every node holds its writes: the round's commands reach them all,
    // and all three outcomes are unknown when the future is dropped.
    for url in &urls {
        pause_writes(url, 300);
    }
    let attempt = tokio::time::timeout(ms(50), client.acquire(&name, &options)).await;
    assert!(attempt.is_err(), "the round was still in flight");
    // close waits for the compensating releases on every node.
    client.close().await;
    for url in &urls {
        assert!(!exists(url, &keys(&name).lock()), "nothing held on {url}");
    }
}

/// A Redlock release dropped mid-round: every node's outcome is unknown to
/// the core, which finishes the release in a task, so the lease gives up
/// its place in the local line and this client's next acquire of the name
/// gets the lock once the nodes answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_release_dropped_mid_round_frees_the_name() {
    let (urls, _servers) = three_nodes();
    let client = warmed_up(urls.clone()).await;
    let name = unique("dropped-release");
    let lease = client
        .acquire(&name, &LockOptions::new(secs(60)))
        .await
        .unwrap();
    for url in &urls {
        pause_writes(url, 300);
    }
    let release = tokio::time::timeout(ms(50), lease.release()).await;
    assert!(release.is_err(), "the round was still in flight");
    // The lease is still alive: only its finished release lets this in
    // before its 60 s TTL.
    let next = client
        .acquire(&name, &LockOptions::new(secs(60)).wait(secs(5)))
        .await
        .unwrap();
    assert!(next.fence() > lease.fence());
    next.release().await.unwrap();
    drop(lease);
    // close waits for any node still finishing the release.
    client.close().await;
    for url in &urls {
        assert!(!exists(url, &keys(&name).lock()), "nothing held on {url}");
    }
}
