//! fencelock-core: the sans-IO heart of fencelock.
//!
//! No sockets, no clock, no RNG. Time comes in as `now`, tokens come in with
//! the [`LockConfig`], Redis replies come in through [`Lock::handle_reply`],
//! and what to send comes out of [`Lock::poll_command`]. The one IO driver
//! (crate `fencelock`) and the WebAssembly build both drive this same code,
//! so every language gets identical semantics.
//!
//! # The run loop
//!
//! A [`Lock`] never acts on its own. Whoever does the IO (the driver) runs
//! this loop for it, and this section is the contract both sides keep:
//!
//! 1. **Input.** Make one call with the current time:
//!    - an application call: [`Lock::acquire`] (or [`Lock::accept_handoff`],
//!      [`Lock::refuse_handoff`]), [`Lock::extend`], [`Lock::release`] (or
//!      [`Lock::release_to`]), [`Lock::cancel`], [`Lock::stop_renewing`];
//!    - or what happened outside: [`Lock::handle_reply`] (the reply to a
//!      command sent earlier), [`Lock::handle_message`] (a message
//!      published on the lock's channel: the core reads whom it wakes),
//!      [`Lock::handle_wakeup`] (the subscription asked for is active or
//!      was made anew, or any reason to look again),
//!      [`Lock::handle_timeout`] (the instant from `poll_timeout` came).
//! 2. **Drain.** Call [`Lock::poll_command`] until it returns `None`, sending
//!    each command to node [`Command::node`]; then [`Lock::poll_event`] until
//!    it returns `None`, acting on each [`Event`]. If acting on an event
//!    makes another input (releasing a lease nobody holds any more, say),
//!    that is step 1 again: drain again.
//! 3. **Wait** for whichever comes first: the instant [`Lock::poll_timeout`]
//!    returns (read it after draining; any input may move or clear it), a
//!    reply, a wake-up while subscribed, or an application call. Go to 1.
//!
//! ## Rules
//!
//! - **Drain after every input, before waiting.** An input may queue several
//!   commands and events; nothing is sent or reported until polled, and a
//!   command left in the queue never gets the reply its round waits for.
//! - **Every command sent gets exactly one [`Lock::handle_reply`].** When the
//!   driver cannot tell whether it ran (connection lost or timed out after
//!   sending, caller gave up), the reply is [`Reply::Unknown`]: the core then
//!   assumes the worst and compensates, so the driver need not interpret
//!   replies.
//!   Replies may arrive in any order; stale or unknown ids are ignored.
//! - **`now` is monotonic**: the same never-decreasing clock for every call on
//!   one lock (`std::time::Instant` since a fixed epoch, `performance.now()`),
//!   never wall-clock time, which can jump. Read it just before the call:
//!   validity counts from the `now` of the input that queued the attempt, so
//!   an older value only shortens it, a later one would overstate it.
//! - **Timeouts may be early or late.** `handle_timeout` before the instant
//!   does nothing; after it, it acts as of `now`.
//! - **Extra wake-ups are harmless**: outside an acquire they are ignored.
//!
//! ## When it is over
//!
//! [`Lock::state`] is [`State::Done`] once nothing is left to do: no timer
//! (`poll_timeout` is `None`), every compensating release answered, the
//! final event queued. After draining, the driver may stop and drop the lock;
//! replies to an abandoned renewal may still come and are ignored. A later
//! `release` or `extend` is answered at once, without commands. After
//! [`Lock::cancel`] keep running the loop until `Done`: that is when the
//! compensating releases have been answered. A lost lease stays
//! [`State::Held`] (with [`Lock::is_lost`]) until it is released or
//! cancelled.
//!
//! [`Lock::progress`] answers the driver's question after draining, "may I
//! stop?", so it need not work it out from [`State`]:
//! [`Progress::Underway`] (an acquire, a release, a compensating release or
//! an extend a caller waits for: keep running), [`Progress::Holding`] (keep
//! running to renew, or stop and let the key expire), [`Progress::Finished`].

mod bytes;
mod error;
mod fenced;
mod force;
mod inspect;
mod io;
pub mod keys;
mod kind;
mod listing;
mod lock;
mod majority;
mod many;
mod name;
mod pattern;
mod replicas;
mod scripts;
mod sql;
mod time;
mod ttl;
mod wake;

pub use bytes::Bytes;
pub use error::{Error, NotAcquiredReason, Operation};
pub use fenced::{FencedWrite, Writer, FENCE_FIELD, VALUE_FIELD};
pub use force::{ForceRelease, Forced};
pub use inspect::{Inspect, LockInfo, NodeView};
pub use io::{Command, CommandId, Event, Reply, RetryPolicy};
pub use keys::{KeySpace, LineKeys, LockKeys};
pub use kind::{Kind, Permits};
pub use listing::{Listing, Page, SCAN_COUNT};
pub use lock::{Handoff, Lock, LockConfig, LockStats, Progress, State, Successor, Token};
pub use many::{AcquireMany, ManyEvent, MAX_MANY_NAMES};
pub use name::{LockName, MAX_NAME_BYTES};
pub use pattern::NamePattern;
pub use replicas::{replica_count, replica_count_int, WaitReplicas};
pub use scripts::Script;
pub use sql::{FencedUpdate, Placeholders};
pub use time::Instant;
pub use ttl::{FenceGrace, MaxHold, Timeout, Ttl, Wait, MAX_TTL_MS, MIN_TTL_MS};
pub use wake::WakeId;
