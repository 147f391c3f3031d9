//! What flows between the core and whoever does the IO: commands out, replies
//! and events in/out. The driver only moves these; it never interprets them.

use std::fmt;
use std::time::Duration;

use crate::{Bytes, Error, Handoff, Instant, Script, WaitReplicas};

/// Identifies one command so its reply can be matched to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommandId(pub u64);

/// "Run `script` on node `node`": `EVALSHA sha1 len(keys) keys... args...`,
/// falling back to `EVAL` (or `SCRIPT LOAD`) on NOSCRIPT.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    pub id: CommandId,
    /// Index into the client's node list (always 0 for a single Redis).
    pub node: usize,
    pub script: Script,
    pub keys: Vec<Bytes>,
    /// Note: for acquire/release/extend, `args[0]` is the token, a secret.
    pub args: Vec<Bytes>,
    /// With `replicas=N`: run `WAIT` after the script (see [`WaitReplicas`]).
    pub wait_replicas: Option<WaitReplicas>,
}

impl fmt::Debug for Command {
    /// Keys are shown, arguments are not: they carry the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("id", &self.id)
            .field("node", &self.node)
            .field("script", &self.script)
            .field("keys", &self.keys)
            .field("wait_replicas", &self.wait_replicas)
            .finish_non_exhaustive()
    }
}

/// A Redis reply to a [`Command`], as the driver saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
    /// The server answered with an error (WRONGTYPE, NOPERM, ...).
    Error(String),
    /// The command may or may not have run: connection lost or timed out after
    /// it was sent, or the caller cancelled. The core assumes the worst.
    Unknown(String),
}

/// Something the caller must act on, drained with `poll_event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Start listening for release notifications on `LockKeys::channel`, then
    /// call `handle_wakeup` once the subscription is confirmed (a release that
    /// happened before that moment would otherwise be missed).
    Subscribe,
    /// Stop listening; this lock no longer waits.
    Unsubscribe,
    /// `acquire` succeeded.
    Acquired { fence: u64, valid_until: Instant },
    /// `acquire` failed (NotAcquired, Redis) or was cancelled (no error needed).
    AcquireFailed(Error),
    /// `extend` succeeded (auto-renewals report nothing).
    Extended { valid_until: Instant },
    /// `extend` failed (LockLost, Redis).
    ExtendFailed(Error),
    /// `release` finished: `Ok` or `LockLost`/`Redis`.
    Released(Result<(), Error>),
    /// `release_to` is done with its successor (comes just before
    /// `Released`): hand this to the successor's lock, `accept_handoff`
    /// (or `refuse_handoff` if its caller left). Its key may be set.
    Handoff(Handoff),
    /// A release (or a compensating release) deleted the key, but the server
    /// refused its PUBLISH — typically an ACL user without channel rights
    /// (`&prefix*`). The release itself succeeded; waiters in other clients
    /// fall back to their timer at the holder's TTL. Comes before the
    /// release's own outcome; drivers should log it once per client (it
    /// repeats on every release until the ACL is fixed).
    NotPublished,
    /// The lease is lost: a renewal, an extend or a release found the lock
    /// gone, or its validity ran out. Reported once, as soon as the core
    /// knows (before the failed call's own outcome); the lease stays lost
    /// and `Lock::is_lost` is the flag every front end reads.
    Lost,
}

/// Tunables with the defaults node-redlock and Redisson users expect.
/// Whole milliseconds (`u32`): every lease keeps one in its `Lock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    max_delay_ms: u32,
    jitter_ms: u32,
}

impl RetryPolicy {
    /// Both rounded down to whole milliseconds, at most `u32::MAX` ms.
    #[must_use]
    pub fn new(max_delay: Duration, jitter: Duration) -> Self {
        RetryPolicy {
            max_delay_ms: crate::time::millis_u32(max_delay),
            jitter_ms: crate::time::millis_u32(jitter),
        }
    }

    /// Upper bound on any single wait between attempts, so a missed
    /// notification costs at most this much latency.
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        Duration::from_millis(self.max_delay_ms.into())
    }

    /// Random extra delay (0..=jitter) so waiters on several clients do not
    /// stampede together.
    #[must_use]
    pub fn jitter(&self) -> Duration {
        Duration::from_millis(self.jitter_ms.into())
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::new(Duration::from_millis(1000), Duration::from_millis(5))
    }
}
