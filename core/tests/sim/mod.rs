//! A deterministic simulator for the sans-IO lock core.
//!
//! The world, in one page:
//!
//! - **Time** is one global virtual clock in microseconds ([`Micros`]). Nothing
//!   sleeps; the simulator jumps from one scheduled event to the next.
//! - **Nodes** ([`Node`]) are fake Redis servers: a map `key -> (value,
//!   expiry)` that executes exactly the scripts' semantics (and counts the
//!   channel's subscribers, which the handoff script asks), with a clock
//!   that may run a little fast or slow. A node can crash (all data lost) and
//!   come back later, or be unreachable for a while (data kept).
//! - **Clients** ([`Client`]) are processes with their own clock (offset and a
//!   rate within the drift bound) and optional pauses (stop-the-world: nothing
//!   on that client is processed until the pause ends). A client runs one
//!   `fencelock_core::Lock` per lease ([`LeaseSim`]), one after another if
//!   planned, or, with the driver's local line (`Sim::local_line`), lined up
//!   behind the one holding the turn: a release then hands the lock to the
//!   first in line in its own round trip (`Lock::release_to`), and the
//!   successor takes the handoff (or refuses it, if cancelled meanwhile).
//! - **The network** ([`Net`]) carries each command to its node after a random
//!   delay, in order per (client, node) connection like TCP. A request may be
//!   dropped (never runs), a reply may be dropped (ran, but the client never
//!   hears), and any message may be slow. The client side plays the driver:
//!   a command not answered within `Net::timeout` is answered `Reply::Unknown`,
//!   and a late reply is then ignored. Pub/sub release notifications are
//!   delivered to subscribed leases, possibly late or not at all.
//!   Waiters may also get spurious wake-ups at any moment.
//! - Everything random comes from one seeded [`Rng`]: same seed, same run.
//!
//! The simulator records what each lease *believed* (the windows during which
//! `state() == Held`, not lost, and `now < valid_until()`, in global time), so
//! properties such as mutual exclusion and fence ordering can be checked
//! afterwards with [`Sim::check_mutual_exclusion`] and [`Sim::check_fences`].
//!
//! Files: `clock.rs` (RNG, clocks), `node.rs` (fake Redis), `world.rs` (the
//! event loop: network, leases, checks), `scenario.rs` (random worlds).
//! Drive a world by hand (`Sim::new`, `add_client`, `add_lease`, `at`,
//! `crash_at`, `run_until`) or build one from a [`Scenario`].
#![allow(dead_code)]

mod clock;
mod node;
mod scenario;
mod world;

// Each test file uses a different subset.
#[allow(unused_imports)]
pub use clock::{Clock, Rng};
#[allow(unused_imports)]
pub use node::Node;
#[allow(unused_imports)]
pub use scenario::{Primitive, Scenario};
#[allow(unused_imports)]
pub use world::{AppAction, Arrival, Client, LeaseOpts, LeaseSim, Net, Plan, Sim};

/// Global (real) time in microseconds.
pub type Micros = u64;
pub const MS: Micros = 1_000;

// Helpers shared by the primitives' and the fair mutex's stories.

/// Whether `e` ends an acquire (granted or failed).
pub fn is_acquire_done(e: &fencelock_core::Event) -> bool {
    matches!(
        e,
        fencelock_core::Event::Acquired { .. } | fencelock_core::Event::AcquireFailed(_)
    )
}

/// A lease of `kind` on a client of its own (a perfect clock).
pub fn lease(
    sim: &mut Sim,
    kind: fencelock_core::Kind,
    ttl_ms: u64,
    wait: fencelock_core::Wait,
) -> usize {
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(ttl_ms, wait);
    opts.kind = kind;
    sim.add_lease(c, opts)
}

/// When lease `l` was granted; panics with the world's story otherwise.
pub fn acquired_at(sim: &mut Sim, l: usize, limit: Micros) -> Micros {
    match sim.run_until_event(l, limit, is_acquire_done) {
        Some((t, fencelock_core::Event::Acquired { .. })) => t,
        other => panic!("L{l}: {other:?}\n{}", sim.describe()),
    }
}

/// The scripts lease `l` has sent, in order.
pub fn scripts_sent(sim: &Sim, l: usize) -> Vec<fencelock_core::Script> {
    sim.leases[l].sent.iter().map(|c| c.1.script).collect()
}
