//! Test support shared by the Rust suites (driver tests, conformance, the
//! safety checker, the core's simulator): ports from the harness's
//! allocator, private redis-servers on them, a raw RESP client, MONITOR
//! capture and the mutual-exclusion rule both checkers apply. Standard
//! library only (the core's tests may use it: no IO crates).

pub mod exclusion;
mod harness;
mod monitor;
mod ports;
pub mod resp;
mod server;

pub use harness::{harness_env, redis_url};
pub use monitor::{parse_monitor_line, Monitor, Seen};
pub use ports::{claim, release, Port};
pub use server::{Config, Server};
