//! What production Redis does to a lock: restarts without persistence,
//! Redlock nodes lost and found, rolling restarts. Real redis-servers that
//! the tests kill and start again (empty).

mod common;

use std::time::{Duration, Instant};

use common::{commandstats, eventually, get, keys, reset_stats, unique, Server};
use fencelock::{Client, ClientOptions, Error, LockOptions, NotAcquiredReason};

fn evalsha_calls(url: &str) -> u64 {
    commandstats(url)
        .into_iter()
        .find(|(command, _)| command == "evalsha")
        .map_or(0, |(_, calls)| calls)
}

fn fast() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

/// The fence is a hybrid logical clock (stored + 1, or the server's ms x
/// 1024): a counter lost to a restart does not send it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_after_a_restart_without_persistence_is_above_every_earlier_fence() {
    let mut server = Server::start();
    let url = server.url();
    let name = unique("restart-fence");
    let options = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let client = Client::connect_with(url.as_str(), fast()).await.unwrap();
    let mut highest = 0;
    for _ in 0..50 {
        let lease = client.acquire(&name, &options).await.unwrap();
        assert!(lease.fence() > highest);
        highest = lease.fence();
        lease.release().await.unwrap();
    }
    client.close().await;

    server.restart();
    assert_eq!(get(&url, &keys(&name).fence()), None, "the counter is gone");
    let client = Client::connect_with(url.as_str(), fast()).await.unwrap();
    let lease = client.acquire(&name, &options).await.unwrap();
    assert!(
        lease.fence() > highest,
        "fence {} after the restart, {highest} before",
        lease.fence()
    );
    lease.release().await.unwrap();
    client.close().await;
}

/// 5 nodes: 2 restart empty while 2 others are down, 3 of 5 reachable. The
/// acquire gets a majority within its wait; with too few nodes it keeps
/// trying until the wait runs out and then says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_3_of_5_with_2_restarted_empty_and_2_down_acquires_within_the_wait() {
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect_with(urls.clone(), fast()).await.unwrap();
    let name = unique("redlock-restart");
    let options = LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5));
    let before = client.acquire(&name, &options).await.unwrap();
    before.release().await.unwrap();

    servers[0].restart();
    servers[1].restart();
    servers[2].stop();
    servers[3].stop();
    let t = Instant::now();
    let lease = client.acquire(&name, &options).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(lease.fence() > before.fence());
    lease.release().await.unwrap();

    // Only 2 of 5 up: not a verdict on the lock, so it retries until the
    // wait is over, then reports `unreachable`.
    servers[4].stop();
    let t = Instant::now();
    let short = LockOptions::new(Duration::from_secs(10)).wait(Duration::from_millis(400));
    let err = client.acquire(&name, &short).await.unwrap_err();
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::NotAcquired {
                reason: NotAcquiredReason::Unreachable {
                    unreachable: 3,
                    nodes: 5
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("3 of 5 nodes unreachable"),
        "{err}"
    );
    let try_once = LockOptions::new(Duration::from_secs(10)).wait(Duration::ZERO);
    let t = Instant::now();
    let err = client.acquire(&name, &try_once).await.unwrap_err();
    assert_eq!(err.reason().map(|r| r.as_str()), Some("unreachable"));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    // A node coming back during the wait is found by the retries.
    reset_stats(&urls[0]);
    let waiting = tokio::spawn({
        let client = client.clone();
        let name = name.clone();
        async move { client.acquire(&name, &options).await }
    });
    eventually(
        Duration::from_secs(5),
        "two rounds (acquire + compensating release each) reached node 0",
        || evalsha_calls(&urls[0]) >= 4,
    )
    .await;
    assert!(!waiting.is_finished());
    servers[2].restart();
    let lease = waiting.await.unwrap().unwrap();
    lease.release().await.unwrap();
    client.close().await;
}

/// 3 nodes, ttl 1 s, auto-renewal: each node in turn is down for 2 s
/// (two TTLs) and comes back empty. (TTL and outage were 300 ms and 1 s; a
/// 1 s TTL lets a renewal run ~650 ms late on a loaded machine.) Renewals put the key back on the
/// restarted node while the other two hold it, so the lease survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_all_3_nodes_keeps_an_auto_renewed_lease() {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect_with(urls.clone(), fast()).await.unwrap();
    let name = unique("rolling");
    let options = LockOptions::new(Duration::from_secs(1))
        .wait(Duration::ZERO)
        .auto_renew(true);
    let lease = client.acquire(&name, &options).await.unwrap();
    let lock_key = keys(&name).lock();
    for (n, server) in servers.iter_mut().enumerate() {
        server.stop();
        // Down for longer than the TTL: the outage the renewals must ride out.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!lease.lost(), "lost while node {n} was down");
        server.restart();
        let url = urls[n].clone();
        eventually(
            Duration::from_secs(5),
            "a renewal put the key back on the restarted node",
            || get(&url, &lock_key).as_deref() == Some(lease.token().as_bytes()),
        )
        .await;
    }
    assert!(!lease.lost());
    assert!(lease.valid_for() > Duration::ZERO);
    lease.release().await.unwrap();
    for url in &urls {
        assert_eq!(get(url, &lock_key), None);
    }
    client.close().await;
}
