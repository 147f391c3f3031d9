//! fencelock-core: the sans-IO heart of fencelock.
//!
//! No sockets, no clock, no RNG. Time comes in as `now`, tokens come in with
//! the [`LockConfig`], Redis replies come in through [`Lock::handle_reply`],
//! and what to send comes out of [`Lock::poll_command`]. The one IO driver
//! (crate `fencelock`) and the WebAssembly build both drive this same code,
//! so every language gets identical semantics.

mod error;
mod io;
pub mod keys;
mod lock;
mod name;
mod replicas;
mod scripts;
mod time;
mod ttl;

pub use error::{Error, NotAcquiredReason};
pub use io::{Command, CommandId, Event, Reply, RetryPolicy};
pub use keys::{KeySpace, LockKeys};
pub use lock::{Lock, LockConfig, State, Token};
pub use name::{LockName, MAX_NAME_BYTES};
pub use replicas::WaitReplicas;
pub use scripts::Script;
pub use time::Instant;
pub use ttl::{FenceGrace, Ttl, Wait, MAX_TTL_MS, MIN_TTL_MS};
