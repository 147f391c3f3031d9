//! Single-Redis semantics against a real redis-server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, Error, LockOptions};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_with_32_tasks_and_strictly_increasing_fences() {
    let (url, _server) = redis_url();
    let name = unique("mutex");
    // 4 clients x 8 tasks: exercises both the local FIFO and remote waiting.
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(Client::connect(url.as_str()).await.unwrap());
    }
    let holders = Arc::new(AtomicUsize::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let client = clients[i % 4].clone();
        let (name, holders, fences) = (name.clone(), holders.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..4 {
                let lease = client
                    .acquire(&name, &LockOptions::new(secs(10)).wait(secs(60)))
                    .await
                    .unwrap();
                assert_eq!(
                    holders.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                fences.lock().unwrap().push(lease.fence());
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                assert_eq!(holders.fetch_sub(1, Ordering::SeqCst), 1);
                lease.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let fences = fences.lock().unwrap().clone();
    assert_eq!(fences.len(), 128);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fences not strictly increasing: {fences:?}"
    );
    assert!(!exists(&url, &keys(&name).lock()));
}

#[tokio::test]
async fn expiry_gives_lock_lost_without_disturbing_the_new_holder() {
    let (url, _server) = redis_url();
    let name = unique("expiry");
    let a = Client::connect(url.as_str()).await.unwrap();
    let b = Client::connect(url.as_str()).await.unwrap();
    let old = a.acquire(&name, &LockOptions::new(ms(150))).await.unwrap();
    let new = b
        .acquire(&name, &LockOptions::new(secs(10)).wait(secs(5)))
        .await
        .unwrap();
    assert!(new.fence() > old.fence());
    // The old lease knows it is over (its validity ran out).
    tokio::time::timeout(secs(2), old.lost_signal())
        .await
        .expect("lost_signal");
    assert!(old.lost());
    assert_eq!(old.valid_for(), Duration::ZERO);
    assert!(matches!(
        old.extend(None).await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(old.release().await, Err(Error::LockLost { .. })));
    let k = keys(&name);
    assert_eq!(
        get(&url, &k.lock()).as_deref(),
        Some(new.token().as_bytes())
    );
    assert!(pttl(&url, &k.lock()) > 5_000);
    new.release().await.unwrap();
    assert!(!exists(&url, &k.lock()));
}

#[tokio::test]
async fn extend_resets_the_ttl() {
    let (url, _server) = redis_url();
    let name = unique("extend");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(secs(2)))
        .await
        .unwrap();
    let k = keys(&name);
    assert!(pttl(&url, &k.lock()) <= 2_000);
    lease.extend(Some(secs(30))).await.unwrap();
    assert!(pttl(&url, &k.lock()) > 20_000);
    assert!(lease.valid_for() > secs(20));
    lease.extend(None).await.unwrap();
    let left = pttl(&url, &k.lock());
    assert!(left > 1_000 && left <= 2_000, "{left}");
    assert!(lease.valid_for() <= secs(2));
    assert!(matches!(
        lease.extend(Some(Duration::ZERO)).await,
        Err(Error::InvalidArgument(_))
    ));
    lease.release().await.unwrap();
}

#[tokio::test]
async fn second_release_is_a_no_op() {
    let (url, _server) = redis_url();
    let name = unique("release2");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    lease.release().await.unwrap();
    lease.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
    let late = lease.extend(None).await;
    assert!(matches!(late, Err(Error::LockLost { .. })), "{late:?}");
    assert_eq!(lease.valid_for(), Duration::ZERO);
    assert!(!lease.lost());
    // Someone else may take it now; our stale lease must not disturb them.
    let other = client
        .acquire(&name, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    lease.release().await.unwrap();
    assert_eq!(
        get(&url, &keys(&name).lock()).as_deref(),
        Some(other.token().as_bytes())
    );
    other.release().await.unwrap();
}

#[tokio::test]
async fn try_acquire_returns_none_while_held() {
    let (url, _server) = redis_url();
    let name = unique("try");
    let a = Client::connect(url.as_str()).await.unwrap();
    let b = Client::connect(url.as_str()).await.unwrap();
    let opts = LockOptions::new(secs(10));
    let lease = a
        .try_acquire(&name, &opts)
        .await
        .unwrap()
        .expect("free lock");
    assert!(b.try_acquire(&name, &opts).await.unwrap().is_none());
    assert!(a.try_acquire(&name, &opts).await.unwrap().is_none());
    lease.release().await.unwrap();
    let again = b
        .try_acquire(&name, &opts)
        .await
        .unwrap()
        .expect("released");
    again.release().await.unwrap();
}

#[tokio::test]
async fn wait_zero_bounded_and_unbounded() {
    let (url, _server) = redis_url();
    let name = unique("wait");
    let a = Client::connect(url.as_str()).await.unwrap();
    let b = Client::connect(url.as_str()).await.unwrap();
    let held = a.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();

    let t = Instant::now();
    let zero = b
        .acquire(&name, &LockOptions::new(secs(10)).wait(Duration::ZERO))
        .await;
    assert!(matches!(zero, Err(Error::NotAcquired { .. })), "{zero:?}");
    assert!(t.elapsed() < ms(500));

    let t = Instant::now();
    let bounded = b
        .acquire(&name, &LockOptions::new(secs(10)).wait(ms(300)))
        .await;
    assert!(
        matches!(bounded, Err(Error::NotAcquired { .. })),
        "{bounded:?}"
    );
    assert!(
        t.elapsed() >= ms(300) && t.elapsed() < secs(2),
        "{:?}",
        t.elapsed()
    );

    // Same client: a local waiter whose wait runs out never reaches Redis.
    let t = Instant::now();
    let local = a
        .acquire(&name, &LockOptions::new(secs(10)).wait(ms(100)))
        .await;
    assert!(matches!(local, Err(Error::NotAcquired { .. })), "{local:?}");
    assert!(t.elapsed() >= ms(100) && t.elapsed() < secs(2));

    // A bound too large for the clock behaves like no bound (no overflow),
    // both in the local queue (a) and remotely (b).
    let huge = LockOptions::new(secs(10)).wait(Duration::MAX);
    let (local, remote) = tokio::join!(
        tokio::time::timeout(ms(100), a.acquire(&name, &huge)),
        tokio::time::timeout(ms(100), b.acquire(&name, &huge)),
    );
    assert!(local.is_err() && remote.is_err(), "both still waiting");

    let forever = tokio::spawn({
        let (b, name) = (b.clone(), name.clone());
        async move { b.acquire(&name, &LockOptions::new(secs(10))).await }
    });
    let channel = keys(&name).channel();
    eventually(secs(5), "the waiter subscribed", || {
        numsub(&url, &channel) >= 1
    })
    .await;
    held.release().await.unwrap();
    let lease = tokio::time::timeout(secs(5), forever)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        get(&url, &keys(&name).lock()).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.release().await.unwrap();
}

#[tokio::test]
async fn a_release_hands_over_to_a_waiter_within_milliseconds() {
    let (url, _server) = redis_url();
    let name = unique("handoff");
    let a = Client::connect(url.as_str()).await.unwrap();
    let b = Client::connect(url.as_str()).await.unwrap();
    let channel = keys(&name).channel();
    for round in 0..5 {
        let held = a.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();
        let waiter = tokio::spawn({
            let (b, name) = (b.clone(), name.clone());
            async move {
                let lease = b.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();
                (Instant::now(), lease)
            }
        });
        eventually(secs(5), "the waiter subscribed", || {
            numsub(&url, &channel) >= 1
        })
        .await;
        let released = Instant::now();
        held.release().await.unwrap();
        let (acquired, lease) = waiter.await.unwrap();
        let gap = acquired.saturating_duration_since(released);
        eprintln!("handoff round {round}: {gap:?}");
        assert!(
            gap < ms(250),
            "round {round}: handoff took {gap:?} (the timer fallback would take 1 s)"
        );
        lease.release().await.unwrap();
        eventually(secs(5), "the waiter unsubscribed", || {
            numsub(&url, &channel) == 0
        })
        .await;
    }

    // Inside one client the handoff is local (FIFO), no Redis wait needed.
    let held = a.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();
    let waiter = tokio::spawn({
        let (a, name) = (a.clone(), name.clone());
        async move {
            let lease = a.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();
            (Instant::now(), lease)
        }
    });
    tokio::task::yield_now().await;
    let released = Instant::now();
    held.release().await.unwrap();
    let (acquired, lease) = waiter.await.unwrap();
    assert!(acquired.saturating_duration_since(released) < ms(250));
    lease.release().await.unwrap();
}

#[tokio::test]
async fn auto_renew_keeps_the_lease_past_several_ttls() {
    let (url, _server) = redis_url();
    let name = unique("renew");
    let client = Client::connect(url.as_str()).await.unwrap();
    // A 1 s TTL (renewed every ~333 ms) lets a renewal run ~650 ms late
    // under load; 13 x 200 ms is still over 2.5 TTLs: without renewals the
    // key would be long gone.
    let lease = client
        .acquire(&name, &LockOptions::new(secs(1)).auto_renew(true))
        .await
        .unwrap();
    assert!(lease.auto_renew());
    let k = keys(&name);
    for _ in 0..13 {
        tokio::time::sleep(ms(200)).await;
        assert!(!lease.lost());
        assert!(lease.valid_for() > Duration::ZERO);
        assert_eq!(
            get(&url, &k.lock()).as_deref(),
            Some(lease.token().as_bytes())
        );
    }
    lease.release().await.unwrap();
    assert!(!exists(&url, &k.lock()));
}

#[tokio::test]
async fn lost_signal_fires_when_the_key_is_deleted_under_an_auto_renewing_lease() {
    let (url, _server) = redis_url();
    let name = unique("lostsig");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(ms(300)).auto_renew(true))
        .await
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg(&*keys(&name).lock())
        .query(&mut conn(&url))
        .unwrap();
    tokio::time::timeout(secs(2), lease.lost_signal())
        .await
        .expect("lost_signal within two TTLs");
    assert!(lease.lost());
    assert!(matches!(lease.release().await, Err(Error::LockLost { .. })));
    // The name is free for the next local waiter at once.
    let next = client
        .acquire(&name, &LockOptions::new(secs(5)).wait(secs(1)))
        .await
        .unwrap();
    next.release().await.unwrap();
}

#[tokio::test]
async fn lost_signal_never_fires_after_release() {
    let (_url, _server) = redis_url();
    let client = Client::connect(_url.as_str()).await.unwrap();
    let lease = client
        .acquire(unique("nolost"), &LockOptions::new(ms(100)))
        .await
        .unwrap();
    lease.release().await.unwrap();
    assert!(tokio::time::timeout(ms(300), lease.lost_signal())
        .await
        .is_err());
    assert!(!lease.lost());
}

#[tokio::test]
async fn cancelling_a_waiting_acquire_leaves_nothing_held() {
    let (url, _server) = redis_url();
    let name = unique("cancelwait");
    let a = Client::connect(url.as_str()).await.unwrap();
    let b = Client::connect(url.as_str()).await.unwrap();
    let held = a.acquire(&name, &LockOptions::new(secs(30))).await.unwrap();
    let waiting = tokio::spawn({
        let (b, name) = (b.clone(), name.clone());
        async move { b.acquire(&name, &LockOptions::new(secs(30))).await }
    });
    let channel = keys(&name).channel();
    eventually(secs(5), "the waiter subscribed", || {
        numsub(&url, &channel) >= 1
    })
    .await;
    waiting.abort();
    eventually(secs(5), "the cancelled waiter left", || {
        numsub(&url, &channel) == 0
    })
    .await;
    held.release().await.unwrap();
    let c = Client::connect(url.as_str()).await.unwrap();
    let lease = c
        .try_acquire(&name, &LockOptions::new(secs(5)))
        .await
        .unwrap()
        .expect("nobody may hold the lock after the waiter was cancelled");
    lease.release().await.unwrap();
}

/// Poll a future exactly once.
async fn poll_once<F: std::future::Future>(
    mut future: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(future.as_mut().poll(cx))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_acquire_in_flight_leaves_nothing_held() {
    let (url, _server) = redis_url();
    let name = unique("cancelflight");
    let client = Client::connect(url.as_str()).await.unwrap();
    let k = keys(&name);
    let mut cancelled = 0;
    let options = LockOptions::new(secs(60));
    for i in 0..300u64 {
        // Start an acquire, let it run for a varying sliver of time (before,
        // during and after its round trip), then drop it if not done.
        let mut acquire = Box::pin(client.acquire(&name, &options));
        let mut result = poll_once(acquire.as_mut()).await;
        if result.is_pending() {
            let spin = Instant::now();
            while spin.elapsed() < Duration::from_micros(i * 2) {
                std::hint::spin_loop();
            }
            result = poll_once(acquire.as_mut()).await;
        }
        match result {
            std::task::Poll::Ready(lease) => lease.unwrap().release().await.unwrap(),
            std::task::Poll::Pending => {
                drop(acquire);
                cancelled += 1;
            }
        }
    }
    assert!(cancelled > 10, "only {cancelled} acquires were cancelled");
    // Every compensating release completes; with a 60 s TTL a leaked lock
    // would still be there.
    eventually(secs(5), "no lock left behind", || !exists(&url, &k.lock())).await;
    let lease = client
        .acquire(&name, &LockOptions::new(secs(5)).wait(secs(5)))
        .await
        .unwrap();
    lease.release().await.unwrap();
}

#[tokio::test]
async fn script_flush_mid_run_is_transparent() {
    let server = Server::start();
    let url = server.url();
    let name = unique("flush");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut conn(&url))
        .unwrap();
    lease.extend(None).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut conn(&url))
        .unwrap();
    lease.release().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut conn(&url))
        .unwrap();
    let again = client
        .acquire(&name, &LockOptions::new(secs(10)))
        .await
        .unwrap();
    assert!(again.fence() > lease.fence());
    again.release().await.unwrap();
    assert!(!exists(&url, &keys(&name).lock()));
}

#[tokio::test]
async fn a_lock_key_of_the_wrong_type_is_a_redis_error_and_writes_nothing() {
    let (url, _server) = redis_url();
    let name = unique("wrongtype");
    let k = keys(&name);
    let _: i64 = redis::cmd("HSET")
        .arg(&*k.lock())
        .arg("f")
        .arg("v")
        .query(&mut conn(&url))
        .unwrap();
    let client = Client::connect(url.as_str()).await.unwrap();
    for wait in [Duration::ZERO, secs(1)] {
        let t = Instant::now();
        let result = client
            .acquire(&name, &LockOptions::new(secs(10)).wait(wait))
            .await;
        match result {
            Err(Error::Redis { message, .. }) => {
                assert!(message.contains("WRONGTYPE"), "{message}")
            }
            other => panic!("expected a Redis error, got {other:?}"),
        }
        assert!(t.elapsed() < secs(3));
    }
    let kind: String = redis::cmd("TYPE")
        .arg(&*k.lock())
        .query(&mut conn(&url))
        .unwrap();
    assert_eq!(kind, "hash");
    assert!(
        !exists(&url, &k.fence()),
        "the fencing counter must not move"
    );
    let _: i64 = redis::cmd("DEL")
        .arg(&*k.lock())
        .query(&mut conn(&url))
        .unwrap();
}

#[tokio::test]
async fn every_bad_input_is_invalid_argument_and_writes_nothing() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let mut monitor = Monitor::start(&server.url());
    let ok_ttl = LockOptions::new(secs(1));
    let long = vec![b'x'; 1025];
    let cases: Vec<(&[u8], LockOptions)> = vec![
        (b"", ok_ttl.clone()),
        (&long, ok_ttl.clone()),
        (b"ok", LockOptions::new(Duration::ZERO)),
        (
            b"ok",
            LockOptions::new(Duration::from_millis((1 << 40) + 1)),
        ),
        (b"ok", LockOptions::new(Duration::MAX)),
    ];
    for (name, options) in &cases {
        let r = client.acquire(name, options).await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
        let r = client.try_acquire(name, options).await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    assert_eq!(
        monitor.commands(),
        Vec::<String>::new(),
        "an invalid call reached Redis"
    );
    assert_eq!(dbsize(&url), 0, "an invalid call wrote to Redis");
    monitor.commands();
    // The largest valid TTL is fine.
    let lease = client
        .acquire("max-ttl", &LockOptions::new(Duration::from_millis(1 << 40)))
        .await
        .unwrap();
    assert!(matches!(
        lease.extend(Some(Duration::ZERO)).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        lease
            .extend(Some(Duration::from_millis((1 << 40) + 1)))
            .await,
        Err(Error::InvalidArgument(_))
    ));
    lease.release().await.unwrap();
    // Only the one valid acquire and its release reached Redis.
    assert_eq!(monitor.commands(), ["evalsha", "evalsha"]);
    // Only the fencing counter of the valid lock remains.
    assert_eq!(dbsize(&url), 1);
}

#[tokio::test]
async fn odd_names_work() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let mut max = format!("{tag}:").into_bytes();
    max.resize(1024, b'n');
    let names: Vec<Vec<u8>> = vec![
        format!("{{{tag}").into_bytes(),
        format!("}}{tag}{{").into_bytes(),
        format!("a{{{tag}}}c").into_bytes(),
        format!("{tag}%7B").into_bytes(),
        format!("ключ🔒{tag}").into_bytes(),
        [b"\x00\xff\x01raw".as_slice(), tag.as_bytes()].concat(),
        max,
    ];
    for name in &names {
        let lease = client
            .acquire(name, &LockOptions::new(secs(10)))
            .await
            .unwrap();
        assert_eq!(lease.name(), name.as_slice());
        let k = keys(name);
        assert_eq!(
            get(&url, &k.lock()).as_deref(),
            Some(lease.token().as_bytes())
        );
        if !name.contains(&b'{') && !name.contains(&b'}') {
            assert!(k.lock().windows(name.len()).any(|w| w == name.as_slice()));
        }
        // Each name is its own lock.
        assert!(client
            .try_acquire(name, &LockOptions::new(secs(1)))
            .await
            .unwrap()
            .is_none());
        lease.release().await.unwrap();
        assert!(!exists(&url, &k.lock()));
    }
}

#[tokio::test]
async fn acquire_and_release_are_one_command_each() {
    let server = Server::start();
    let url = server.url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let mut monitor = Monitor::start(&server.url());
    let lease = client
        .acquire("rt", &LockOptions::new(secs(5)))
        .await
        .unwrap();
    assert_eq!(monitor.commands(), ["evalsha"], "acquire: one round trip");
    lease.release().await.unwrap();
    assert_eq!(monitor.commands(), ["evalsha"], "release: one round trip");
    let lease = client
        .try_acquire("rt", &LockOptions::new(secs(5)))
        .await
        .unwrap()
        .unwrap();
    lease.extend(None).await.unwrap();
    assert_eq!(
        monitor.commands(),
        ["evalsha", "evalsha"],
        "try_acquire + extend"
    );
    lease.release().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut conn(&url))
        .unwrap();
    monitor.commands();
    let lease = client
        .acquire("rt", &LockOptions::new(secs(5)))
        .await
        .unwrap();
    assert_eq!(
        monitor.commands(),
        ["evalsha", "eval"],
        "NOSCRIPT: one reload"
    );
    lease.release().await.unwrap();
    assert_eq!(
        monitor.commands(),
        ["evalsha", "eval"],
        "NOSCRIPT: one reload"
    );
    let lease = client
        .acquire("rt", &LockOptions::new(secs(5)))
        .await
        .unwrap();
    lease.release().await.unwrap();
    assert_eq!(monitor.commands(), ["evalsha", "evalsha"], "cached again");
}

#[tokio::test]
async fn tokens_never_show_in_debug_or_errors() {
    let (url, _server) = redis_url();
    let name = unique("secret");
    let client = Client::connect(url.as_str()).await.unwrap();
    let lease = client
        .acquire(&name, &LockOptions::new(ms(100)))
        .await
        .unwrap();
    let token = lease.token().to_owned();
    assert_eq!(token.len(), 36);
    assert_eq!(token, token.to_lowercase());
    assert_eq!(uuid::Uuid::parse_str(&token).unwrap().get_version_num(), 4);
    let shown = format!("{lease:?} {client:?}");
    assert!(!shown.contains(&token), "{shown}");
    tokio::time::timeout(secs(2), lease.lost_signal())
        .await
        .unwrap();
    let err = lease.release().await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains(&token));
    let err = lease.extend(None).await.unwrap_err();
    assert!(!format!("{err} {err:?}").contains(&token));
}

#[tokio::test]
async fn a_dropped_lease_stops_renewing_and_expires() {
    let (url, _server) = redis_url();
    let name = unique("dropped");
    let client = Client::connect(url.as_str()).await.unwrap();
    // 1 s, not 300 ms: a stall between acquire and the check below must not
    // let the key expire before "dropping does not release" is seen.
    let lease = client
        .acquire(&name, &LockOptions::new(secs(1)).auto_renew(true))
        .await
        .unwrap();
    let k = keys(&name);
    drop(lease);
    assert!(exists(&url, &k.lock()), "dropping does not release");
    eventually(secs(5), "the dropped lease's key expired", || {
        !exists(&url, &k.lock())
    })
    .await;
    let next = client
        .acquire(&name, &LockOptions::new(secs(5)).wait(secs(1)))
        .await
        .unwrap();
    next.release().await.unwrap();
}

#[tokio::test]
async fn a_closed_client_refuses_new_work() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let clone = client.clone();
    // A waiter blocked behind another client's lease is told at once.
    let name = unique("closing");
    let holder = Client::connect(url.as_str()).await.unwrap();
    let held = holder
        .acquire(&name, &LockOptions::new(secs(30)))
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let (client, name) = (client.clone(), name.clone());
        async move { client.acquire(&name, &LockOptions::new(secs(30))).await }
    });
    let channel = keys(&name).channel();
    eventually(secs(5), "the waiter subscribed", || {
        numsub(&url, &channel) >= 1
    })
    .await;
    client.close().await;
    let r = tokio::time::timeout(secs(2), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(r, Err(Error::Closed { .. })), "{r:?}");
    held.release().await.unwrap();
    client.close().await;
    assert!(clone.is_closed());
    let r = clone
        .acquire(unique("closed"), &LockOptions::new(secs(1)))
        .await;
    assert!(matches!(r, Err(Error::Closed { .. })), "{r:?}");
}

#[test]
fn blocking_callers_can_use_block_on_from_any_thread() {
    let (url, _server) = redis_url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(Client::connect(url.as_str())).unwrap();
    let name = unique("blocking");
    let handle = runtime.handle().clone();
    std::thread::scope(|s| {
        s.spawn(|| {
            let lease = handle
                .block_on(client.acquire(&name, &LockOptions::new(secs(5))))
                .unwrap();
            // A plain futures executor (no tokio context) works too.
            futures_executor_block_on(lease.release()).unwrap();
        });
    });
}

/// A minimal executor with no tokio context, to prove the lease API does not
/// need one.
fn futures_executor_block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_won_after_its_acquire_future_was_dropped_is_released() {
    let (url, _server) = redis_url();
    let name = unique("unclaimed");
    let client = Client::connect(url.as_str()).await.unwrap();
    let k = keys(&name);
    let options = LockOptions::new(secs(60));
    let mut rounds = 0;
    for _ in 0..100 {
        if rounds == 10 {
            break;
        }
        let mut acquire = Box::pin(client.acquire(&name, &options));
        if let std::task::Poll::Ready(lease) = poll_once(acquire.as_mut()).await {
            // The machine preempted us long enough for the whole acquire to
            // finish: not the case under test.
            lease.unwrap().release().await.unwrap();
            continue;
        }
        rounds += 1;
        // Let the lease task win and hand the lease over (into the channel
        // the dropped future would have read it from).
        eventually(secs(5), "the lock was won", || exists(&url, &k.lock())).await;
        tokio::time::sleep(ms(5)).await;
        drop(acquire);
        // With a 60 s TTL, a lease left to expire would still be there.
        eventually(secs(5), "the unclaimed lease was released", || {
            !exists(&url, &k.lock())
        })
        .await;
    }
    assert_eq!(rounds, 10);
}

/// The acquire script reads a counter below 2^53 - 1 as one Lua number and
/// any other through (high, low) halves: both sides of that line, and what
/// neither can read, give the exact next fence or a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_counter_is_exact_on_both_sides_of_2_pow_53() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let options = LockOptions::new(secs(10)).wait(Duration::ZERO);
    // A fresh name whose fence counter holds `stored`, and its keys.
    let counter_at = |stored: &str| {
        let name = unique("counter");
        let keys = keys(&name);
        let _: () = redis::cmd("SET")
            .arg(&*keys.fence())
            .arg(stored)
            .query(&mut conn(&url))
            .unwrap();
        (name, keys)
    };
    let next = [
        ("9007199254740989", "9007199254740990"),
        ("9007199254740990", "9007199254740991"),
        ("9007199254740991", "9007199254740992"),
        ("9007199254740992", "9007199254740993"),
        ("0009007199254740990", "9007199254740991"),
        ("18446744073709551614", "18446744073709551615"),
    ];
    for (stored, fence) in next {
        let (name, keys) = counter_at(stored);
        let lease = client.acquire(&name, &options).await.unwrap();
        assert_eq!(lease.fence().to_string(), fence, "after {stored}");
        assert_eq!(get(&url, &keys.fence()), Some(fence.as_bytes().to_vec()));
        lease.release().await.unwrap();
    }
    // Below the clock (server ms x 1024), the clock wins, leading zeros or not.
    for stored in ["42", "000000000000042"] {
        let (name, _) = counter_at(stored);
        let lease = client.acquire(&name, &options).await.unwrap();
        let fence = lease.fence();
        assert!(fence > 1 << 50 && fence % 1024 == 0, "{fence}");
        lease.release().await.unwrap();
    }
    for unreadable in ["18446744073709551615", "1e15", "-5", "", "12a"] {
        let (name, keys) = counter_at(unreadable);
        let err = client.acquire(&name, &options).await.unwrap_err();
        assert!(
            matches!(err, Error::Redis { .. }),
            "{unreadable:?}: {err:?}"
        );
        assert!(
            !exists(&url, &keys.lock()),
            "{unreadable:?} left the lock held"
        );
        assert_eq!(
            get(&url, &keys.fence()),
            Some(unreadable.as_bytes().to_vec())
        );
    }
    client.close().await;
}
