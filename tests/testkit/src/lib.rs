//! Test support shared by the Rust suites (driver tests, conformance, the
//! safety checker): ports from the harness's allocator and private
//! redis-servers on them. Standard library only.

mod ports;
mod server;

pub use ports::{claim, release, Port};
pub use server::Server;
