//! What the harness provides: its single Redis when `make test` exported
//! it (else a private server), and its topologies (a Redis Cluster,
//! Sentinels): their variables from the environment when `make test`
//! exported them, otherwise from `ci/redis.sh start` (what `make
//! redis-start` runs; idempotent, stopped by `make redis-stop`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `var` (e.g. `FENCELOCK_TEST_CLUSTER_URLS`) of the harness's env file.
pub fn harness_env(var: &str) -> String {
    if let Ok(value) = std::env::var(var) {
        if !value.is_empty() {
            return value;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let run_dir = std::env::var("FENCELOCK_REDIS_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".build/redis"));
    let status = Command::new("bash")
        .arg(root.join("ci/redis.sh"))
        .arg("start")
        .env("FENCELOCK_REDIS_RUN_DIR", &run_dir)
        .stdout(Stdio::null())
        .status()
        .expect("run ci/redis.sh");
    assert!(status.success(), "ci/redis.sh start failed");
    let env = std::fs::read_to_string(run_dir.join("env")).expect("ci/redis.sh wrote its env file");
    env.lines()
        .find_map(|line| line.strip_prefix(&format!("{var}=")))
        .unwrap_or_else(|| panic!("{var} missing from {}", run_dir.join("env").display()))
        .to_owned()
}

/// The single Redis of ordinary tests: `FENCELOCK_TEST_REDIS_URL` when the
/// harness exported it, else a private server (kept alive by the returned
/// guard).
pub fn redis_url() -> (String, Option<crate::Server>) {
    match std::env::var("FENCELOCK_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = crate::Server::start();
            (server.url(), Some(server))
        }
    }
}
