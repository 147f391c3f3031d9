//! The README's least-privilege ACL line is exactly enough: a user created
//! with it (read from the README, so the two cannot drift apart) acquires,
//! extends, waits, is handed the lock on release, and releases; a release
//! hands the lock to a waiter of the same client in its round trip, and
//! without `pubsub|numsub` (an older ACL) it still frees it.

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, LockOptions};

/// The `ACL SETUSER app ...` line of the README's Security section.
fn readme_acl() -> Vec<String> {
    let readme = include_str!("../../../README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("ACL SETUSER app on "))
        .expect("the README has the ACL line");
    line.split_whitespace().skip(1).map(str::to_owned).collect()
}

/// Create the README's `app` user on `server`, without the ACL rules in
/// `except`; its URL.
fn app_user(server: &Server, except: &[&str]) -> String {
    let mut acl: Vec<String> = readme_acl();
    acl.retain(|arg| !except.contains(&arg.as_str()));
    for arg in &mut acl {
        if arg == ">password" {
            *arg = ">acl-pass".to_owned();
        }
    }
    let _: () = redis::cmd("ACL")
        .arg(&acl)
        .query(&mut conn(&server.url()))
        .unwrap();
    format!("redis://app:acl-pass@127.0.0.1:{}/0", server.port)
}

/// The scripts run on `name`'s lock key, by name, in order (MONITOR).
fn scripts_on(monitor: &Monitor, name: &str) -> Vec<&'static str> {
    monitor.sync();
    let lock = keys(name).lock().to_vec();
    monitor
        .seen()
        .iter()
        .filter(|s| s.client != "lua" && s.args[0].eq_ignore_ascii_case(b"evalsha"))
        .filter(|s| s.args.get(3) == Some(&lock))
        .map(|s| {
            fencelock_core::Script::ALL
                .into_iter()
                .find(|script| script.sha1().as_bytes() == s.args[1].as_slice())
                .expect("one of ours")
                .name()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_is_handed_the_lock_and_without_numsub_the_release_still_frees_it() {
    for (except, scripts) in [
        (&[][..], &["handoff"][..]),
        (&["+pubsub|numsub"][..], &["handoff", "acquire"][..]),
    ] {
        let server = Server::start();
        let url = app_user(&server, except);
        let client = Client::connect(url.as_str()).await.unwrap();
        let name = unique("acl-handoff");
        let opts = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(5));
        let holder = client.acquire(&name, &opts).await.unwrap();
        let waiting = client.acquire(&name, &opts);
        let monitor = Monitor::start(&server.url());
        holder.release().await.unwrap();
        let lease = waiting.await.unwrap();
        assert!(lease.fence() > holder.fence());
        assert_eq!(scripts_on(&monitor, &name), scripts, "without {except:?}");
        lease.release().await.unwrap();
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_acl_is_enough_for_every_operation() {
    let server = Server::start();
    let url = app_user(&server, &[]);
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("acl");
    let opts = LockOptions::new(Duration::from_secs(5)).wait(Duration::from_secs(5));
    let holder = client.acquire(&name, &opts).await.unwrap();
    holder.extend(None).await.unwrap();
    // A waiter in another client (its own pub/sub connection) is handed the
    // lock by the release notification, well before the 1 s retry timer.
    let other = Client::connect(url.as_str()).await.unwrap();
    assert!(other.try_acquire(&name, &opts).await.unwrap().is_none());
    let waiting = tokio::spawn({
        let name = name.clone();
        let opts = opts.clone();
        async move { other.acquire(&name, &opts).await }
    });
    eventually(Duration::from_secs(5), "the waiter subscribed", || {
        numsub(&server.url(), &keys(&name).channel()) == 1
    })
    .await;
    let t = std::time::Instant::now();
    holder.release().await.unwrap();
    let lease = waiting.await.unwrap().unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    lease.release().await.unwrap();
    // Auto-renewal works too: past its 1 s TTL only through renewals (each
    // may run ~650 ms late under load).
    let renewed = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(1)).auto_renew(true),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!renewed.lost());
    renewed.release().await.unwrap();
    client.close().await;
}
