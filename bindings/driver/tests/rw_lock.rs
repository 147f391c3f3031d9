//! The read-write lock against a real redis-server: readers share, a
//! writer excludes everyone, a waiting writer holds new readers off, and a
//! writer that gives up leaves the line.

mod common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use fencelock::{Client, Error, Kind, LockOptions};
use fencelock_core::{KeySpace, LockKeys, LockName};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}
fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn rw_keys(name: &str, kind: Kind) -> LockKeys {
    KeySpace::default().keys_for(&LockName::new(name).unwrap(), kind)
}

fn zcard(url: &str, key: &[u8]) -> i64 {
    redis::cmd("ZCARD").arg(key).query(&mut conn(url)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude_and_fences_increase() {
    let (url, _server) = redis_url();
    let name = unique("rw");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(url.as_str()).await.unwrap());
    }
    // > 0: that many readers; -1: a writer.
    let state = Arc::new(AtomicI64::new(0));
    let most_readers = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let rw = clients[i % 3].rw_lock(&name).unwrap();
        let (state, most) = (state.clone(), most_readers.clone());
        tasks.push(tokio::spawn(async move {
            let options = LockOptions::new(secs(10)).wait(secs(60));
            for round in 0..3 {
                if (i + round) % 4 == 0 {
                    let lease = rw.write(&options).await.unwrap();
                    let before = state.swap(-1, Ordering::SeqCst);
                    assert_eq!(before, 0, "a writer beside {before}");
                    tokio::time::sleep(ms(2)).await;
                    assert_eq!(state.swap(0, Ordering::SeqCst), -1);
                    lease.release().await.unwrap();
                } else {
                    let lease = rw.read(&options).await.unwrap();
                    let now = state.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now > 0, "a reader beside a writer");
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(ms(2)).await;
                    state.fetch_sub(1, Ordering::SeqCst);
                    lease.release().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert!(most_readers.load(Ordering::SeqCst) >= 2, "readers shared");
    let k = rw_keys(&name, Kind::Write);
    assert!(!exists(&url, &k.lock()) && !exists(&url, k.other().as_ref().unwrap()));
    assert_eq!(zcard(&url, &k.line().unwrap().waiting), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_holds_new_readers_off() {
    let (url, _server) = redis_url();
    let name = unique("rw-pref");
    let client = Client::connect(url.as_str()).await.unwrap();
    let rw = client.rw_lock(&name).unwrap();
    let options = LockOptions::new(secs(10));
    let r1 = rw.read(&options).await.unwrap();
    let r2 = rw.try_read(&options).await.unwrap().expect("readers share");
    assert!(r2.fence() > r1.fence());
    assert_eq!(r1.kind(), Kind::Read);
    assert!(rw.try_write(&options).await.unwrap().is_none());
    let writer = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write(&LockOptions::new(secs(10)).wait(secs(30))).await }
    });
    let waiting = rw_keys(&name, Kind::Write).line().unwrap().waiting;
    eventually(secs(5), "the writer waits", || zcard(&url, &waiting) == 1).await;
    assert!(
        rw.try_read(&options).await.unwrap().is_none(),
        "writer preference"
    );
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    assert!(w.fence() > r2.fence() && w.held().await.unwrap());
    assert!(rw.try_read(&options).await.unwrap().is_none());
    w.release().await.unwrap();
    let r3 = rw.try_read(&options).await.unwrap().expect("free again");
    assert!(r3.fence() > w.fence());
    r3.release().await.unwrap();
}

#[tokio::test]
async fn a_writer_that_gives_up_lets_the_readers_in() {
    let (url, _server) = redis_url();
    let name = unique("rw-cancel");
    let client = Client::connect(url.as_str()).await.unwrap();
    let rw = client.rw_lock(&name).unwrap();
    let reader = rw.read(&LockOptions::new(secs(10))).await.unwrap();
    let out = rw.write(&LockOptions::new(secs(10)).wait(ms(150))).await;
    assert!(matches!(out, Err(Error::NotAcquired { .. })), "{out:?}");
    let k = rw_keys(&name, Kind::Write);
    assert_eq!(zcard(&url, &k.line().clone().unwrap().waiting), 0);
    assert!(!exists(&url, &k.lock()), "no writer left");
    let again = rw.try_read(&LockOptions::new(secs(10))).await.unwrap();
    assert!(again.is_some(), "no writer waits any more");
    reader.release().await.unwrap();
    again.unwrap().release().await.unwrap();
    assert!(matches!(client.rw_lock(""), Err(Error::InvalidArgument(_))));
}
