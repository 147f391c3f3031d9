//! The counting semaphore against real redis-servers: permits, the fair
//! line across clients, crashed and cancelled waiters, renewal and loss,
//! bad inputs, Redlock.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fencelock::{Client, Error, Kind, LockOptions, Permits};
use fencelock_core::{KeySpace, LockKeys, LockName};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// The semaphore's keys (any permit count: the layout does not depend on it).
fn sem_keys(name: &str) -> LockKeys {
    let kind = Kind::Semaphore(Permits::new(1).unwrap());
    KeySpace::default().keys_for(&LockName::new(name).unwrap(), kind)
}

fn zcard(url: &str, key: &[u8]) -> i64 {
    redis::cmd("ZCARD").arg(key).query(&mut conn(url)).unwrap()
}

fn zrange(url: &str, key: &[u8]) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(&mut conn(url))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits_and_fences_increase() {
    let (url, _server) = redis_url();
    let name = unique("sem");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(url.as_str()).await.unwrap());
    }
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let sem = clients[i % 3].semaphore(&name, 3).unwrap();
        let (holders, most, fences) = (holders.clone(), most.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let permit = sem
                    .acquire(&LockOptions::new(secs(10)).wait(secs(60)))
                    .await
                    .unwrap();
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                assert!(now <= 3, "{now} holders of 3 permits");
                fences.lock().unwrap().push(permit.fence());
                tokio::time::sleep(ms(2)).await;
                holders.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len(), 36);
    fences.sort_unstable();
    fences.dedup();
    assert_eq!(fences.len(), 36, "one node issues every fence once");
    assert!(most.load(Ordering::SeqCst) >= 2, "permits were shared");
    let k = sem_keys(&name);
    assert!(!exists(&url, &k.lock()), "no holder left");
    assert_eq!(zcard(&url, &k.line().unwrap().waiting), 0, "nobody in line");
}

#[tokio::test]
async fn permits_are_zset_members_that_expire_and_one_client_holds_several() {
    let (url, _server) = redis_url();
    let name = unique("sem-keys");
    let client = Client::connect(url.as_str()).await.unwrap();
    let sem = client.semaphore(&name, 2).unwrap();
    assert_eq!(sem.permits(), 2);
    let options = LockOptions::new(secs(5));
    let a = sem.acquire(&options).await.unwrap();
    let b = sem
        .acquire(&options.clone().wait(Duration::ZERO))
        .await
        .unwrap();
    assert!(b.fence() > a.fence());
    assert_eq!(a.kind(), Kind::Semaphore(Permits::new(2).unwrap()));
    let k = sem_keys(&name);
    let mut members = zrange(&url, &k.lock());
    members.sort();
    let mut tokens = vec![a.token().to_owned(), b.token().to_owned()];
    tokens.sort();
    assert_eq!(members, tokens);
    let left = pttl(&url, &k.lock());
    assert!(
        left > 0 && left <= 5_000,
        "the set expires with its last permit: {left}"
    );
    assert_eq!(
        get(&url, &k.fence()),
        Some(b.fence().to_string().into_bytes())
    );
    // Full: a try-once finds no permit and leaves no place in line.
    assert!(sem.try_acquire(&options).await.unwrap().is_none());
    assert_eq!(zcard(&url, &k.line().clone().unwrap().waiting), 0);
    assert!(a.held().await.unwrap());
    let info = sem.inspect().await.unwrap();
    assert!(info.held && info.held_by_me && info.fence == Some(b.fence()));
    a.release().await.unwrap();
    assert!(!a.held().await.unwrap());
    a.release().await.unwrap(); // a second release is a no-op
    let c = sem
        .try_acquire(&options)
        .await
        .unwrap()
        .expect("a permit was freed");
    assert!(c.fence() > b.fence());
    b.release().await.unwrap();
    c.release().await.unwrap();
    assert!(!exists(&url, &k.lock()));
    let info = sem.inspect().await.unwrap();
    assert!(!info.held && !info.held_by_me);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_different_clients_are_served_in_arrival_order() {
    let (url, _server) = redis_url();
    let name = unique("sem-fifo");
    let holder = Client::connect(url.as_str()).await.unwrap();
    let first = Client::connect(url.as_str()).await.unwrap();
    let second = Client::connect(url.as_str()).await.unwrap();
    let held = holder
        .semaphore(&name, 1)
        .unwrap()
        .acquire(&LockOptions::new(secs(10)))
        .await
        .unwrap();
    let k = sem_keys(&name);
    let waiting = k.line().clone().unwrap().waiting;
    let order = Arc::new(Mutex::new(Vec::new()));
    let spawn = |client: Client, who: &'static str| {
        let (name, order) = (name.clone(), order.clone());
        tokio::spawn(async move {
            let sem = client.semaphore(&name, 1).unwrap();
            let permit = sem
                .acquire(&LockOptions::new(secs(10)).wait(secs(30)))
                .await
                .unwrap();
            order.lock().unwrap().push(who);
            tokio::time::sleep(ms(20)).await;
            permit.release().await.unwrap();
        })
    };
    let a = spawn(first, "first");
    eventually(secs(5), "first in line", || zcard(&url, &waiting) == 1).await;
    let b = spawn(second, "second");
    eventually(secs(5), "second in line", || zcard(&url, &waiting) == 2).await;
    held.release().await.unwrap();
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(*order.lock().unwrap(), ["first", "second"]);
}

/// A waiter that crashed (its process gone: no compensating release, no
/// more attempts) leaves its place behind. It blocks the permits it was
/// first in line for only until its place expires, 3 s after its last
/// attempt. Its place is written here as a crashed client leaves it.
#[tokio::test]
async fn a_crashed_waiter_blocks_the_line_only_until_its_place_expires() {
    let (url, _server) = redis_url();
    let name = unique("sem-crash");
    let k = sem_keys(&name);
    let line = k.line().clone().unwrap();
    let mut c = conn(&url);
    let (now_s, now_us): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let now_ms = now_s * 1000 + now_us / 1000;
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg(&*line.waiting)
        .arg(now_s * 1_000_000 + now_us)
        .arg("crashed-waiter")
        .cmd("ZADD")
        .arg(&*line.until)
        .arg(now_ms + 400)
        .arg("crashed-waiter")
        .query(&mut c)
        .unwrap();
    let client = Client::connect(url.as_str()).await.unwrap();
    let sem = client.semaphore(&name, 1).unwrap();
    let started = std::time::Instant::now();
    // The permit is free, but goes to the (crashed) waiter ahead first.
    assert!(sem
        .try_acquire(&LockOptions::new(secs(5)))
        .await
        .unwrap()
        .is_none());
    let permit = sem
        .acquire(&LockOptions::new(secs(5)).wait(secs(5)))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= ms(300),
        "served only once the place expired ({waited:?})"
    );
    assert_eq!(
        zcard(&url, &line.waiting),
        0,
        "the crashed place was pruned"
    );
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_or_timed_out_waiter_leaves_the_line_and_holds_nothing() {
    let (url, _server) = redis_url();
    let name = unique("sem-cancel");
    let client = Client::connect(url.as_str()).await.unwrap();
    let sem = client.semaphore(&name, 1).unwrap();
    let held = sem.acquire(&LockOptions::new(secs(10))).await.unwrap();
    let k = sem_keys(&name);
    let waiting = k.line().clone().unwrap().waiting;
    // Dropped while waiting: out of the line at once.
    let acquire = sem.acquire(&LockOptions::new(secs(10)));
    let waiter = tokio::spawn(acquire);
    eventually(secs(5), "in line", || zcard(&url, &waiting) == 1).await;
    waiter.abort();
    eventually(secs(5), "left the line", || zcard(&url, &waiting) == 0).await;
    // A bounded wait that runs out: NotAcquired, and out of the line.
    let out = sem.acquire(&LockOptions::new(secs(10)).wait(ms(150))).await;
    assert!(matches!(out, Err(Error::NotAcquired { .. })), "{out:?}");
    assert_eq!(zcard(&url, &waiting), 0);
    assert_eq!(zrange(&url, &k.lock()), [held.token().to_owned()]);
    held.release().await.unwrap();
    assert!(!exists(&url, &k.lock()));
    client.close().await;
}

#[tokio::test]
async fn auto_renew_keeps_a_permit_and_a_removed_one_is_lost() {
    let (url, _server) = redis_url();
    let name = unique("sem-renew");
    let client = Client::connect(url.as_str()).await.unwrap();
    let sem = client.semaphore(&name, 2).unwrap();
    let permit = sem
        .acquire(&LockOptions::new(ms(300)).auto_renew(true))
        .await
        .unwrap();
    tokio::time::sleep(ms(700)).await;
    assert!(!permit.lost() && permit.held().await.unwrap(), "renewed");
    let lost = Arc::new(AtomicUsize::new(0));
    let count = lost.clone();
    permit.on_lost(move || {
        count.fetch_add(1, Ordering::SeqCst);
    });
    let k = sem_keys(&name);
    let _: i64 = redis::cmd("ZREM")
        .arg(&*k.lock())
        .arg(permit.token())
        .query(&mut conn(&url))
        .unwrap();
    tokio::time::timeout(secs(2), permit.lost_signal())
        .await
        .expect("the next renewal finds it gone");
    eventually(secs(2), "on_lost ran", || lost.load(Ordering::SeqCst) == 1).await;
    assert!(matches!(
        permit.release().await,
        Err(Error::LockLost { .. })
    ));
}

#[tokio::test]
async fn bad_inputs_are_refused_before_anything_is_sent() {
    // An idle private server: nothing else's commands in its stats.
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    reset_stats(&url);
    for permits in [0, 1_000_001, u32::MAX] {
        assert!(matches!(
            client.semaphore("pool", permits),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(matches!(
        client.semaphore("", 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.semaphore(vec![b'x'; 1025], 1),
        Err(Error::InvalidArgument(_))
    ));
    let sem = client.semaphore("pool", 2).unwrap();
    for options in [
        LockOptions::new(Duration::ZERO),
        LockOptions::new(ms((1 << 40) + 1)),
    ] {
        assert!(matches!(
            sem.acquire(&options).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            sem.try_acquire(&options).await,
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(
        !commandstats(&url)
            .iter()
            .any(|(c, _)| c.starts_with("eval")),
        "{:?}",
        commandstats(&url)
    );
    assert_eq!(dbsize(&url), 0);
    // A holders key of the wrong type: a Redis error, and nothing written.
    let k = sem_keys("pool");
    let _: () = redis::cmd("SET")
        .arg(&*k.lock())
        .arg("x")
        .query(&mut conn(&url))
        .unwrap();
    let out = sem.acquire(&LockOptions::new(secs(1))).await;
    assert!(matches!(out, Err(Error::Redis { .. })), "{out:?}");
    assert_eq!(dbsize(&url), 1);
    assert_eq!(get(&url, &k.lock()).as_deref(), Some(&b"x"[..]));
    client.close().await;
    assert!(matches!(
        sem.acquire(&LockOptions::new(secs(1))).await,
        Err(Error::Closed { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_needs_every_one_of_three_nodes_for_two_permits() {
    // Private nodes: one is stopped and restarted.
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let client = Client::connect(urls.clone()).await.unwrap();
    let name = unique("sem-redlock");
    let sem = client.semaphore(&name, 2).unwrap();
    let a = sem.acquire(&LockOptions::new(ms(600))).await.unwrap();
    let k = sem_keys(&name);
    for url in &urls {
        assert_eq!(zrange(url, &k.lock()), [a.token().to_owned()]);
    }
    // More than 3 x 2 / 3 nodes must grant: with one down, none.
    servers[2].stop();
    let out = sem.acquire(&LockOptions::new(secs(10)).wait(ms(300))).await;
    assert!(
        matches!(&out, Err(e) if e.reason().map(|r| r.as_str()) == Some("unreachable")),
        "{out:?}"
    );
    for url in &urls[..2] {
        assert_eq!(zrange(url, &k.lock()), [a.token().to_owned()], "given back");
    }
    // Back (empty) once a's permit has run out: every node grants again.
    a.lost_signal().await;
    servers[2].restart();
    let b = sem
        .acquire(&LockOptions::new(secs(10)).wait(secs(5)))
        .await
        .unwrap();
    assert!(b.fence() > a.fence());
    assert!(matches!(a.release().await, Err(Error::LockLost { .. })));
    b.release().await.unwrap();
    for url in &urls {
        assert!(!exists(url, &k.lock()));
    }
}
