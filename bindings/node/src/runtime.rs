//! The addon's tokio runtime: one thread of its own, started on first use
//! and kept for the life of the process (a runtime thread never keeps Node
//! alive).
//!
//! Every call of the addon runs there, and so does each client's background
//! work (the driver keeps the runtime its client connected on). One thread
//! serves the one JS thread of an environment: a call crosses threads twice,
//! JS to runtime and back (`completions`). napi's default multi-thread
//! runtime also woke a second worker to steal each new task: about 9–11
//! context switches per acquire + release instead of 5–7, for work that
//! takes a few microseconds.

use std::sync::OnceLock;

use tokio::runtime::Handle;

static RUNTIME: OnceLock<Handle> = OnceLock::new();

/// The addon's runtime.
pub fn handle() -> &'static Handle {
    RUNTIME.get_or_init(|| fencelock::runtime_thread("fencelock-tokio"))
}
