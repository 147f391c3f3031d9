//! The lock state machine: one lease over N independent Redis nodes
//! (N = 1 is a single Redis, N >= 3 is Redlock), from acquire to release.
//! STUB: the API is final, the bodies are being written.

use std::collections::VecDeque;
use std::time::Duration;

use crate::{
    Command, CommandId, Error, Event, Instant, LockKeys, LockName, Reply, RetryPolicy, Ttl, Wait,
};

/// Everything a lease is made from. The token comes from the caller (the core
/// has no RNG); so does `seed`, which only spreads retry jitter.
#[derive(Clone, Debug)]
pub struct LockConfig {
    pub name: LockName,
    pub keys: LockKeys,
    pub token: Token,
    pub ttl: Ttl,
    pub wait: Wait,
    pub nodes: usize,
    pub auto_renew: bool,
    pub retry: RetryPolicy,
    pub seed: u64,
}

/// A lease token. Readable on purpose, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Where a lock is in its life; `poll_*` says what to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created, `acquire` not called yet.
    Idle,
    /// Attempting or waiting to attempt.
    Acquiring,
    /// Held, possibly with an extend in flight.
    Held,
    /// Release (or a compensating release) in flight.
    Releasing,
    /// Finished: released, failed to acquire, or cancelled. Nothing in flight.
    Done,
}

#[derive(Debug)]
pub struct Lock {
    config: LockConfig,
    state: State,
    commands: VecDeque<Command>,
    events: VecDeque<Event>,
    next_id: u64,
    fence: Option<u64>,
    valid_until: Option<Instant>,
    lost: bool,
}

impl Lock {
    pub fn new(config: LockConfig) -> Self {
        Lock {
            config,
            state: State::Idle,
            commands: VecDeque::new(),
            events: VecDeque::new(),
            next_id: 0,
            fence: None,
            valid_until: None,
            lost: false,
        }
    }

    // ---- application commands -------------------------------------------

    /// Start acquiring. Misuse (called twice) is `InvalidArgument`.
    pub fn acquire(&mut self, now: Instant) -> Result<(), Error> {
        let _ = now;
        unimplemented!()
    }

    /// Extend a held lease to `ttl` (default: the lease's ttl) from now.
    /// Completes with `Extended` or `ExtendFailed`. `LockLost` right away
    /// (as an event) if the lease is already known lost.
    pub fn extend(&mut self, now: Instant, ttl: Option<Ttl>) -> Result<(), Error> {
        let _ = (now, ttl);
        unimplemented!()
    }

    /// Release the lease; completes with `Released`. A second call is a no-op
    /// that completes with `Released(Ok(()))` at once.
    pub fn release(&mut self, now: Instant) -> Result<(), Error> {
        let _ = now;
        unimplemented!()
    }

    /// The caller gave up on an acquire (dropped future, AbortSignal,
    /// KeyboardInterrupt). Any node that may hold our key gets a compensating
    /// release; keep driving the machine until `state()` is `Done`.
    pub fn cancel(&mut self, now: Instant) {
        let _ = now;
        unimplemented!()
    }

    // ---- inputs ------------------------------------------------------------

    pub fn handle_reply(&mut self, now: Instant, id: CommandId, reply: Reply) {
        let _ = (now, id, reply);
        unimplemented!()
    }

    /// A release notification arrived on the lock's channel (or the
    /// subscription asked for by `Event::Subscribe` is now active).
    pub fn handle_wakeup(&mut self, now: Instant) {
        let _ = now;
        unimplemented!()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
        unimplemented!()
    }

    // ---- outputs -----------------------------------------------------------

    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// When to call `handle_timeout` next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        unimplemented!()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- getters -----------------------------------------------------------

    pub fn state(&self) -> State {
        self.state
    }
    pub fn name(&self) -> &LockName {
        &self.config.name
    }
    pub fn token(&self) -> &Token {
        &self.config.token
    }
    pub fn ttl(&self) -> Ttl {
        self.config.ttl
    }
    /// The fencing token, once acquired.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }
    /// Until when the holder may assume exclusivity (drift already taken off).
    pub fn valid_until(&self) -> Option<Instant> {
        self.valid_until
    }
    /// Time left at `now`; zero once lost or expired.
    pub fn valid_for(&self, now: Instant) -> Duration {
        match self.valid_until {
            Some(until) if !self.lost => until.saturating_duration_since(now),
            _ => Duration::ZERO,
        }
    }
    pub fn is_lost(&self) -> bool {
        self.lost
    }
}
