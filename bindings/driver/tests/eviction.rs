//! A server whose `maxmemory-policy` may evict our keys is warned about at
//! connect (a lock evicted while held can be taken twice); `noeviction` is
//! not, and a user without `CONFIG` rights is not bothered.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use common::*;
use fencelock::Client;
use recorder::Recorder;

fn warnings(recorder: &Recorder, port: u16) -> Vec<String> {
    recorder
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("WARN") && l.contains("maxmemory-policy"))
        .filter(|l| l.contains(&format!(":{port}/")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicting_memory_policy_is_warned_about_at_connect() {
    let recorder = Recorder::install();
    let lru = Server::start_with(&["--maxmemory-policy", "allkeys-lru"]);
    let ttl = Server::start_with(&["--maxmemory-policy", "volatile-ttl"]);
    let safe = Server::start();
    for server in [&lru, &ttl, &safe] {
        Client::connect(server.url().as_str())
            .await
            .unwrap()
            .close()
            .await;
    }
    let lru_warnings = warnings(&recorder, lru.port);
    assert_eq!(lru_warnings.len(), 1, "{:?}", recorder.lines());
    assert!(lru_warnings[0].contains("allkeys-lru"), "{lru_warnings:?}");
    assert!(lru_warnings[0].contains("noeviction"), "{lru_warnings:?}");
    assert_eq!(warnings(&recorder, ttl.port).len(), 1);
    assert!(warnings(&recorder, safe.port).is_empty());

    // An ACL user without CONFIG: connects, no warning, no error.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config",
        ])
        .query(&mut conn(&lru.url()))
        .unwrap();
    let before = warnings(&recorder, lru.port).len();
    let url = format!("redis://noconfig:pw@127.0.0.1:{}/0", lru.port);
    Client::connect(url.as_str()).await.unwrap().close().await;
    assert_eq!(warnings(&recorder, lru.port).len(), before);
}
