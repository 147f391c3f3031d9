//! Test fixture: real redis-servers, and checks of what is in them.
//!
//! `redis_url()` / `redlock_urls()` use FENCELOCK_TEST_REDIS_URL /
//! FENCELOCK_TEST_REDLOCK_URLS when the harness exported them and otherwise
//! start private servers. `Server::start*` (the workspace's one launcher,
//! `fencelock-testkit`) always starts a private server (for tests that stop,
//! kill, restart or password-protect one, or that need an otherwise idle
//! server to count commands with `Monitor`), on a port from `ci/ports.sh`.
//! Every private server is a child process killed when its `Server` is
//! dropped.

#![allow(dead_code)]

use std::time::{Duration, Instant};

// Not every test binary uses all of them.
#[allow(unused_imports)]
pub use fencelock_testkit::{redis_url, Monitor, Server};

/// Five independent nodes for Redlock tests.
pub fn redlock_urls() -> (Vec<String>, Vec<Server>) {
    match std::env::var("FENCELOCK_TEST_REDLOCK_URLS") {
        Ok(urls) if !urls.is_empty() => (split_urls(&urls), Vec::new()),
        _ => {
            let servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
            (servers.iter().map(Server::url).collect(), servers)
        }
    }
}

/// A lock name no other test (or run) uses.
pub fn unique(what: &str) -> String {
    format!("test:{what}:{}", uuid::Uuid::new_v4().simple())
}

/// A plain synchronous connection for checking what is in Redis.
pub fn conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .expect("valid url")
        .get_connection_with_timeout(Duration::from_secs(5))
        .expect("connect to the test redis")
}

/// The keys of `name` under the default prefix.
pub fn keys(name: impl AsRef<[u8]>) -> fencelock_core::LockKeys {
    fencelock_core::KeySpace::default().keys(&fencelock_core::LockName::new(name).unwrap())
}

pub fn get(url: &str, key: &[u8]) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(&mut conn(url)).unwrap()
}

pub fn exists(url: &str, key: &[u8]) -> bool {
    let n: i64 = redis::cmd("EXISTS").arg(key).query(&mut conn(url)).unwrap();
    n == 1
}

pub fn pttl(url: &str, key: &[u8]) -> i64 {
    redis::cmd("PTTL").arg(key).query(&mut conn(url)).unwrap()
}

/// Subscribers of `channel` (to know a waiter is really waiting).
pub fn numsub(url: &str, channel: &[u8]) -> i64 {
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query(&mut conn(url))
        .unwrap();
    match reply.get(1) {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("unexpected NUMSUB reply {other:?}"),
    }
}

/// `CLIENT PAUSE ms WRITE`: the server holds every write (scripts included)
/// that reaches it, unanswered, until the pause ends or `unpause`.
pub fn pause_writes(url: &str, ms: u64) {
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(ms)
        .arg("WRITE")
        .query(&mut conn(url))
        .unwrap();
}

pub fn unpause(url: &str) {
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut conn(url))
        .unwrap();
}

/// Poll `condition` until it holds (a state check, not a sleep-to-fix):
/// panics with `what` after `within`. The condition is a blocking call to
/// a server: between polls the runtime gets at least as long as the poll
/// took, so on a loaded machine the clients under test are not starved.
pub async fn eventually(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    loop {
        let polled = Instant::now();
        if condition() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(polled.elapsed().max(Duration::from_millis(2))).await;
    }
}

/// Calls per command since the last `CONFIG RESETSTAT`, from
/// `INFO commandstats`, e.g. `[("evalsha", 1)]`.
pub fn commandstats(url: &str) -> Vec<(String, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn(url))
        .unwrap();
    let mut stats = Vec::new();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        let calls = fields
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        stats.push((name.to_owned(), calls));
    }
    stats.sort();
    stats
}

pub fn reset_stats(url: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn(url))
        .unwrap();
}

pub fn dbsize(url: &str) -> i64 {
    redis::cmd("DBSIZE").query(&mut conn(url)).unwrap()
}

/// The message of the `Redis` error a connect failed with (panics on any
/// other outcome).
pub fn redis_message(result: Result<fencelock::Client, fencelock::Error>) -> String {
    match result {
        Err(fencelock::Error::Redis { message, .. }) => message,
        Err(other) => panic!("expected a Redis error, got {other:?}"),
        Ok(_) => panic!("connected"),
    }
}

/// A comma-separated list of URLs, e.g. a harness variable.
pub fn split_urls(urls: &str) -> Vec<String> {
    urls.split(',').map(|u| u.trim().to_owned()).collect()
}
