//! One line of a worker's history (JSON Lines, one file per worker process,
//! written and flushed line by line so a SIGKILLed worker loses nothing it
//! recorded). The same schema is written by the Rust, Python and Node
//! workers:
//!
//! | ev | fields | meaning |
//! | --- | --- | --- |
//! | `start` | `pid`, `lang` | worker process started |
//! | `acquire_start` | | about to call acquire |
//! | `acquired` | `lease`, `fence`, `valid_ms`, `t0`, `role` | acquire returned a lease (`t0`: its `acquire_start`; `role`: `permit`, `read` or `write` for a semaphore or read-write lock, absent for the mutex) |
//! | `acquire_failed` | `err` | `not_acquired`, `redis`, `other` |
//! | `write_start` | `lease`, `fence`, `valid_ms` | about to write to the resource |
//! | `write_end` | `lease`, `fence`, `accepted` | the resource's answer |
//! | `release_start` | `lease`, `valid_ms` | about to release |
//! | `released` / `release_lost` / `release_error` | `lease`, `err` | release outcome |
//! | `done` | | worker finished normally |
//!
//! `t` is CLOCK_MONOTONIC in ns; `lease` is the sha256 (hex) of the token,
//! never the token; `valid_ms` is what the lease believed (`valid_for`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    pub t: u64,
    pub w: String,
    pub ev: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// Read a history file; a torn last line (SIGKILL mid-write) is skipped.
pub fn read(path: &std::path::Path) -> Vec<Record> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
