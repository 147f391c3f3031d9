//! Test support shared by the Rust suites (driver tests, conformance, the
//! safety checker): ports from the harness's allocator and private
//! redis-servers on them. Standard library only.

mod harness;
mod ports;
mod server;

pub use harness::harness_env;
pub use ports::{claim, release, Port};
pub use server::Server;
