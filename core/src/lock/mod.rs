//! The lock state machine: one lease over N independent Redis nodes
//! (N = 1 is a single Redis, N >= 3 is Redlock), from acquire to release.
//!
//! Every decision about lock semantics lives here: quorum, validity, fencing
//! write-back, retry timing, renewal, loss detection and compensation. The
//! caller only moves [`Command`]s out and [`Reply`]s in, following the run
//! loop in the crate docs (input, drain both queues, wait).
//!
//! `mod.rs` holds the types and the public API; the other files add private
//! methods to [`Lock`], each calling only methods of the files after it:
//! - `mod.rs`: inputs, outputs, getters, and which timers count in which
//!   state;
//! - `acquire.rs`, `renew.rs`, `release.rs`: what a finished round means in
//!   each phase of a lease (attempts, handoffs taken and write-back;
//!   extends, renewals and reclaims; releases, with or without a handoff);
//! - `handoff.rs`: what a release hands to the next local waiter
//!   ([`Successor`] in, [`Handoff`] out);
//! - `outputs.rs`: what every phase shares: the quorum, the commands they
//!   queue (fan-outs, compensating releases, reclaims) and the events
//!   (lost, unsubscribe, done);
//! - `rounds.rs`: one fan-out to the nodes and the tallies over its replies;
//! - `outcomes.rs`: what one node's reply means;
//! - `outbox.rs`: the queue the commands and the events wait in;
//! - `timers.rs`: the timer table.

use std::time::Duration;

mod acquire;
mod handoff;
mod outbox;
mod outcomes;
mod outputs;
mod release;
mod renew;
mod rounds;
mod timers;

#[cfg(test)]
mod tests;

pub use self::handoff::{Handoff, Successor};
use self::outbox::{Outbox, Queued};
use self::outcomes::Outcome;
use self::rounds::{Round, RoundKind, Sent};
use self::timers::{Timer, TimerTable};
use crate::{
    Command, CommandId, Error, Event, FenceGrace, Instant, Kind, LockKeys, LockName, MaxHold,
    NotAcquiredReason, Reply, RetryPolicy, Ttl, Wait, WaitReplicas, WakeId,
};

/// Everything a lease is made from. The token comes from the caller (the core
/// has no RNG); so does `seed`, which only spreads retry jitter.
#[derive(Clone, Debug)]
pub struct LockConfig {
    pub name: LockName,
    /// What the lease holds: the mutex, a semaphore permit, a read or a
    /// write lock. It picks the scripts; `keys` must be
    /// `KeySpace::keys_for(name, kind)`.
    pub kind: Kind,
    pub keys: LockKeys,
    pub token: Token,
    pub ttl: Ttl,
    pub wait: Wait,
    pub nodes: usize,
    pub auto_renew: bool,
    /// With `auto_renew`: renew only while the lease has been held for less
    /// than this in total (from the acquire's send); after that it runs out
    /// at the end of its validity and is lost. Ignored without `auto_renew`.
    pub max_hold: Option<MaxHold>,
    pub retry: RetryPolicy,
    /// How long the fence key outlives the lock (see [`FenceGrace`]).
    pub fence_grace: FenceGrace,
    pub seed: u64,
}

/// A lease token. Readable on purpose, never printed. Shared, not copied:
/// the lease, its `Lock` and the client's bookkeeping hold the same one.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(pub std::sync::Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Where a lock is in its life; `poll_*` says what to do next.
/// [`State::Done`] ends the run loop (see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created, `acquire` not called yet.
    Idle,
    /// Attempting or waiting to attempt.
    Acquiring,
    /// Held (or lost but not yet released), possibly with an extend in flight.
    Held,
    /// A release or a compensating release is in flight.
    Releasing,
    /// Finished: released, failed to acquire, or cancelled. Replies to an
    /// abandoned renewal may still arrive; they are ignored.
    Done,
}

/// What the run loop has left to do for a lock, read after draining: the
/// question a driver asks before waiting ([`Lock::progress`]). [`State`]
/// says where the lock is in its life; this says whether stopping the loop
/// now would leave something unfinished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Something is under way that must be answered: an acquire, a release,
    /// a compensating release, or an extend a caller waits for. Keep running
    /// the loop (to give up an acquire, [`Lock::cancel`] and keep running).
    Underway,
    /// Held (or lost and not released), nothing anyone waits for under way:
    /// keep running the loop for renewal and expiry, or stop and let the key
    /// expire by its TTL.
    Holding,
    /// Nothing left to do: the loop may stop. A later `release` or `extend`
    /// is answered at once, without commands.
    Finished,
}

/// What one lock has been through so far, for metrics ([`Lock::stats`]):
/// the core counts, the driver records what changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Acquire attempts that found the lock held by someone else.
    pub contended_attempts: u32,
    /// Auto-renewals that extended the lease.
    pub renewals: u32,
    /// Auto-renewals that did not: the lease was lost, or too few nodes
    /// answered (it is then retried).
    pub failed_renewals: u32,
    /// When the acquire attempt that won was sent: the acquire's latency
    /// runs from here to the grant (a fence write-back included).
    pub granted_attempt_sent: Option<Instant>,
}

/// One lease's state machine, driven by the run loop in the crate docs.
#[derive(Debug)]
pub struct Lock {
    config: LockConfig,
    state: State,
    commands: Outbox<Command>,
    events: Outbox<Queued>,
    next_id: u64,
    rng: u64,

    /// Acquire/write-back/release rounds; renewals and user extends run in
    /// `extend` so a release can overtake them.
    round: Option<Round>,
    /// Boxed, as are the other rarely set fields below: a held lease keeps
    /// its `Lock` for as long as it is held.
    extend: Option<Box<Round>>,
    /// What we may have left on each node.
    on_node: OnNodes,
    /// Compensating releases and reclaims in flight (their replies change
    /// nothing but a refused wake-up).
    cleanup: Vec<CommandId>,
    /// An acquire failure waiting for `cleanup` to drain.
    failure: Option<Box<Error>>,

    /// Deadline, retry, expiry and renewal instants; `timer_armed` says
    /// which of them count in the current state.
    timers: TimerTable,
    subscribed: bool,
    /// A wake-up arrived while an attempt was in flight: retry at once if it fails.
    woken: bool,
    /// Ours, for a kind whose releases wake the first waiter by name.
    wake_id: Option<WakeId>,
    /// Why the last attempt failed (reported if the wait runs out).
    reason: NotAcquiredReason,
    /// Consecutive attempts without a quorum of answering nodes (backoff).
    unreachable_rounds: u32,

    /// The lease's fence once granted; 0 before (fences start at 1).
    fence: u64,
    current_ttl: Ttl,
    lost: bool,
    /// Auto-renewal still wanted: `auto_renew`, until `stop_renewing`.
    renewing: bool,
    /// No renewal is sent at or after this instant (the acquire's send plus
    /// `max_hold`, else never), set when the lease is granted.
    renew_until: Instant,
    /// `replicas=N`: grants and extensions need N replica acknowledgements.
    /// Boxed, as it is rarely set (read through `replicas()`).
    replicas: Option<Box<WaitReplicas>>,
    /// The waiter a release in flight hands the lock to (`release_to`).
    successor: Option<Box<Successor>>,
    stats: LockStats,
}

/// What one node may hold of ours.
#[derive(Clone, Copy, Debug, Default)]
struct OnNode {
    /// Our key may exist there: granted, or an unknown outcome.
    maybe_holding: bool,
    /// An attempt may have left us in the fair line there (kinds that
    /// queue): an acquire that ends without the lease leaves it there.
    queued: bool,
}

/// An [`OnNode`] per node, read as a slice. Inline for a single node: a
/// held lease keeps no allocation for it.
#[derive(Clone, Debug)]
enum OnNodes {
    One(OnNode),
    Many(Box<[OnNode]>),
}

impl OnNodes {
    fn new(nodes: usize) -> Self {
        match nodes {
            1 => OnNodes::One(OnNode::default()),
            _ => OnNodes::Many(vec![OnNode::default(); nodes].into()),
        }
    }
}

impl std::ops::Deref for OnNodes {
    type Target = [OnNode];
    fn deref(&self) -> &[OnNode] {
        match self {
            OnNodes::One(node) => std::slice::from_ref(node),
            OnNodes::Many(nodes) => nodes,
        }
    }
}

impl std::ops::DerefMut for OnNodes {
    fn deref_mut(&mut self) -> &mut [OnNode] {
        match self {
            OnNodes::One(node) => std::slice::from_mut(node),
            OnNodes::Many(nodes) => nodes,
        }
    }
}

impl Lock {
    #[must_use]
    pub fn new(config: LockConfig) -> Self {
        let nodes = config.nodes.max(1);
        let renewing = config.auto_renew;
        let wake_id = config
            .kind
            .wakes_first_in_line()
            .then(|| WakeId::of(&config.token));
        Lock {
            rng: config.seed | 1,
            current_ttl: config.ttl,
            on_node: OnNodes::new(nodes),
            config: LockConfig { nodes, ..config },
            state: State::Idle,
            commands: Outbox::default(),
            events: Outbox::default(),
            next_id: 0,
            round: None,
            extend: None,
            cleanup: Vec::new(),
            failure: None,
            timers: TimerTable::default(),
            subscribed: false,
            woken: false,
            wake_id,
            reason: NotAcquiredReason::Held,
            unreachable_rounds: 0,
            fence: 0,
            lost: false,
            renewing,
            renew_until: Instant::NEVER,
            replicas: None,
            successor: None,
            stats: LockStats::default(),
        }
    }

    /// Count an acquire, extend or renewal only once `replicas` replicas
    /// acknowledged it (`WAIT replicas timeout` after the script). Too few:
    /// the lock is released and the acquire fails with `NotAcquired` (reason
    /// "replicas"), an extend or renewal with `LockLost`. 0 (the default)
    /// waits for nothing. Call before `acquire`.
    pub fn require_replicas(&mut self, replicas: u32, timeout: Duration) {
        let timeout_ms = crate::time::millis_u32(timeout);
        self.replicas = (replicas > 0).then(|| {
            Box::new(WaitReplicas {
                replicas,
                timeout_ms,
            })
        });
    }

    fn replicas(&self) -> Option<WaitReplicas> {
        self.replicas.as_deref().copied()
    }

    // ---- application commands -----------------------------------------------

    /// Start acquiring. Misuse (called twice) is `InvalidArgument`.
    pub fn acquire(&mut self, now: Instant) -> Result<(), Error> {
        if self.state != State::Idle {
            return Err(Error::invalid(format!(
                "acquire was already called for lock {}",
                self.config.name
            )));
        }
        self.state = State::Acquiring;
        if let Wait::Bounded(wait) = self.config.wait {
            self.timers.set(Timer::Deadline, now + wait);
        }
        self.start_attempt(now);
        Ok(())
    }

    /// Extend a held lease to `ttl` (default: the lease's ttl) from now.
    /// Completes with `Extended` or `ExtendFailed` (`LockLost` at once if the
    /// lease is already known lost).
    pub fn extend(&mut self, now: Instant, ttl: Option<Ttl>) -> Result<(), Error> {
        match self.state {
            State::Idle | State::Acquiring => {
                return Err(Error::invalid(format!(
                    "lock {} is not acquired yet",
                    self.config.name
                )));
            }
            // Released (or lost and released): no longer held.
            State::Releasing | State::Done => {
                self.events.push_back(Event::ExtendFailed(self.lock_lost()));
                return Ok(());
            }
            State::Held if self.lost => {
                self.events.push_back(Event::ExtendFailed(self.lock_lost()));
                return Ok(());
            }
            State::Held => {}
        }
        // A new extend supersedes one in flight (a renewal or the caller's):
        // the later PEXPIRE wins on every node anyway, and every caller
        // waiting gets the outcome of the last one.
        let callers = match self.extend.as_deref() {
            Some(Round {
                kind: RoundKind::Extend { callers },
                ..
            }) => callers + 1,
            _ => 1,
        };
        self.current_ttl = ttl.unwrap_or(self.config.ttl);
        self.send_extend(now, callers);
        Ok(())
    }

    /// Release the lease; completes with `Released`. After the first release
    /// (or a failed acquire) it completes with `Released(Ok(()))` at once.
    pub fn release(&mut self, now: Instant) -> Result<(), Error> {
        self.release_with(now, None)
    }

    /// Release the lease and, in the same round trip, hand the lock to
    /// `successor`, the next waiter of this client for the same name (see
    /// [`Successor`]): where the lock holds our token and no other client
    /// listens for its release, the node sets the successor's token with its
    /// ttl and issues the next fence, as the successor's own acquire would.
    /// Completes like `release` (`Released`), preceded by exactly one
    /// `Event::Handoff` for the successor's lock ([`Lock::accept_handoff`],
    /// or [`Lock::refuse_handoff`] if its caller left meanwhile), also when
    /// nothing was handed over: the successor then makes a normal attempt.
    pub fn release_to(&mut self, now: Instant, successor: Successor) -> Result<(), Error> {
        self.release_with(now, Some(successor))
    }

    fn release_with(&mut self, now: Instant, successor: Option<Successor>) -> Result<(), Error> {
        if successor.is_some() && self.config.kind != Kind::Mutex {
            // Permits and readers do not line up locally: nobody to hand to.
            return Err(Error::invalid(format!(
                "only a lock is handed over in its release, not a {}",
                self.config.kind.noun()
            )));
        }
        match self.state {
            State::Idle | State::Acquiring => {
                Err(Error::invalid("release needs an acquired lease"))
            }
            State::Releasing | State::Done if self.round.is_none() => {
                if let Some(successor) = successor {
                    let handoff = Handoff::nothing(&successor, now, self.config.nodes);
                    self.events.push_back(Event::Handoff(handoff));
                }
                self.events.push_back(Event::Released(Ok(())));
                Ok(())
            }
            State::Releasing | State::Done => Err(Error::invalid(
                "a release is already in progress on this lease",
            )),
            State::Held => {
                self.abandon_extend();
                self.timers.stop(Timer::Renew);
                self.state = State::Releasing;
                let kind = match successor {
                    Some(_) => RoundKind::Handoff,
                    None => RoundKind::Release,
                };
                self.successor = successor.map(Box::new);
                self.round = Some(self.fan_out(now, kind, self.current_ttl, |_| true));
                Ok(())
            }
        }
    }

    /// Start acquiring with the handoff a release of this client made for
    /// this lease (`Event::Handoff` of the releaser's lock), instead of
    /// [`Lock::acquire`]: it is the first attempt's result, counted from the
    /// release's send. A majority handed over is a grant (`Acquired`, after
    /// a fence write-back if needed); anything less is given back and a
    /// normal attempt follows. Misuse (not idle, or a handoff made for
    /// another lease) is `InvalidArgument`.
    pub fn accept_handoff(&mut self, now: Instant, handoff: Handoff) -> Result<(), Error> {
        self.take_handoff(&handoff)?;
        self.state = State::Acquiring;
        if let Wait::Bounded(wait) = self.config.wait {
            self.timers.set(Timer::Deadline, now + wait);
        }
        let round = self.handoff_round(handoff);
        self.finish_handoff(now, round);
        Ok(())
    }

    /// The caller of this lease's acquire left while a release was handing
    /// the lock to it: release its token at once wherever the handoff may
    /// have set it (waking waiters), like a cancelled acquire's compensating
    /// release. No acquire outcome is reported; keep driving until
    /// `State::Done`. Misuse as for [`Lock::accept_handoff`].
    pub fn refuse_handoff(&mut self, now: Instant, handoff: Handoff) -> Result<(), Error> {
        self.take_handoff(&handoff)?;
        self.state = State::Releasing;
        self.compensate(now, true);
        self.settle_if_idle();
        Ok(())
    }

    /// Check a handoff is for this idle lease, and note the nodes where it
    /// may have set our key.
    fn take_handoff(&mut self, handoff: &Handoff) -> Result<(), Error> {
        if self.state != State::Idle {
            return Err(Error::invalid(format!(
                "acquire was already called for lock {}",
                self.config.name
            )));
        }
        if !handoff.is_for(&self.config) {
            return Err(Error::invalid(format!(
                "a handoff made for another lease of lock {}",
                self.config.name
            )));
        }
        for (node, outcome) in handoff.outcomes.iter().enumerate() {
            self.on_node[node].maybe_holding = matches!(
                outcome,
                Outcome::Yes(_) | Outcome::Unknown(_) | Outcome::Unreplicated { .. }
            );
        }
        Ok(())
    }

    /// A handoff as the attempt round it stands for (already complete: its
    /// ids are never matched against a reply).
    fn handoff_round(&self, handoff: Handoff) -> Round {
        Round {
            kind: RoundKind::Attempt,
            sent_at: handoff.sent_at,
            ttl: handoff.ttl,
            sent: handoff
                .outcomes
                .into_iter()
                .enumerate()
                .map(|(node, outcome)| Sent {
                    id: CommandId(u64::MAX),
                    node,
                    outcome: Some(outcome),
                })
                .collect(),
        }
    }

    /// Stop auto-renewal for good: no renewal is sent from now on (one
    /// already in flight still counts), so the lease stays valid until its
    /// validity ends and is then lost, unless it is released or extended
    /// first (an explicit `extend` still works, once each time, and does not
    /// restart renewal). Idempotent; nothing to do for a lease that does not
    /// auto-renew, or one that is not held.
    pub fn stop_renewing(&mut self, now: Instant) {
        let _ = now;
        self.renewing = false;
        self.timers.stop(Timer::Renew);
    }

    /// Whether auto-renewal may still send an extend: `auto_renew`, neither
    /// `stop_renewing` nor `max_hold` ended it, and the lease is not lost.
    #[must_use]
    pub fn is_renewing(&self, now: Instant) -> bool {
        self.state == State::Held && self.renewing && !self.lost && now < self.renew_until
    }

    /// The caller gave up on an acquire (dropped future, AbortSignal,
    /// KeyboardInterrupt), or dropped a held lease. Any node that may hold our
    /// key gets a compensating release; keep driving until `State::Done`.
    pub fn cancel(&mut self, now: Instant) {
        match self.state {
            State::Idle => self.state = State::Done,
            State::Acquiring | State::Held => {
                self.round = None;
                self.abandon_extend();
                self.timers.stop(Timer::Renew);
                self.timers.stop(Timer::Retry);
                self.unsubscribe();
                if self.state == State::Held {
                    self.on_node.iter_mut().for_each(|n| n.maybe_holding = true);
                }
                self.state = State::Releasing;
                self.compensate(now, true);
                self.leave_line();
                self.settle_if_idle();
            }
            State::Releasing | State::Done => {}
        }
    }

    // ---- inputs -------------------------------------------------------------

    pub fn handle_reply(&mut self, now: Instant, id: CommandId, reply: Reply) {
        if let Some(at) = self.cleanup.iter().position(|&c| c == id) {
            self.cleanup.swap_remove(at);
            if outcomes::not_published(&reply) {
                self.events.push_back(Event::NotPublished);
            }
            self.settle_if_idle();
            return;
        }
        let replicas = self.replicas();
        let quorum = self.quorum();
        if let Some(at) = self.round.as_ref().and_then(|round| round.position(id)) {
            let round = self.round.as_mut().expect("matched above");
            round.record(at, reply, replicas);
            if round.kind == RoundKind::Attempt {
                let Sent {
                    node, ref outcome, ..
                } = round.sent[at];
                // Only a node that surely did not set our key can be forgotten.
                if let Some(Outcome::No(_) | Outcome::Failed(_)) = outcome {
                    self.on_node[node].maybe_holding = false;
                }
                // A grant or a refusal left no place in the line there.
                if let Some(Outcome::Yes(_) | Outcome::Failed(_)) = outcome {
                    self.on_node[node].queued = false;
                }
            }
            if round.is_decided(quorum) {
                let round = self.round.take().expect("matched above");
                self.finish_round(now, round);
            }
        } else if let Some(at) = self.extend.as_ref().and_then(|round| round.position(id)) {
            let round = self.extend.as_mut().expect("matched above");
            round.record(at, reply, replicas);
            if round.is_decided(quorum) {
                let round = self.extend.take().expect("matched above");
                self.finish_extend(now, *round);
            }
        }
        // Anything else is a stale or unknown id: ignored.
    }

    /// A message published on the lock's channel (its bytes as they came):
    /// a wake-up ([`Lock::handle_wakeup`]) unless it names another waiter
    /// (see [`WakeId`]): a fair mutex's release wakes only the first in
    /// line, the others keep waiting on their retry timers.
    pub fn handle_message(&mut self, now: Instant, message: &[u8]) {
        if self
            .wake_id
            .as_ref()
            .is_some_and(|id| id.names_another(message))
        {
            return;
        }
        self.handle_wakeup(now);
    }

    /// Look at the lock again: the subscription asked for by
    /// `Event::Subscribe` is now active (or was made anew after a lost
    /// connection), or a release notification whose content the driver
    /// does not pass ([`Lock::handle_message`] reads it).
    pub fn handle_wakeup(&mut self, now: Instant) {
        if self.state != State::Acquiring {
            return;
        }
        if self.round.is_some() {
            self.woken = true;
        } else {
            self.start_attempt(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        // Each firing may disarm the ones after it (a failed acquire stops
        // retrying, a lost lease stops renewing), so ask again every time.
        for timer in Timer::VALUES {
            if self.timer_armed(timer) && self.timers.is_expired(timer, now) {
                match timer {
                    Timer::Deadline => self.fail_acquire(self.not_acquired()),
                    Timer::Retry => self.start_attempt(now),
                    Timer::Expiry => self.mark_lost(),
                    Timer::Renew => self.renew(now),
                }
            }
        }
    }

    /// Whether `timer` counts in the current state: the one rule both
    /// `poll_timeout` and `handle_timeout` follow. Acquire timers wait while
    /// no attempt is in flight; a held lease's only while it is not lost,
    /// and renewal only while no extend is in flight.
    fn timer_armed(&self, timer: Timer) -> bool {
        match timer {
            Timer::Deadline | Timer::Retry => {
                self.state == State::Acquiring && self.round.is_none()
            }
            Timer::Expiry => self.state == State::Held && !self.lost,
            Timer::Renew => self.state == State::Held && !self.lost && self.extend.is_none(),
        }
    }

    fn finish_round(&mut self, now: Instant, round: Round) {
        match round.kind {
            RoundKind::Attempt => self.finish_attempt(now, round),
            RoundKind::WriteBack { fence, already } => {
                self.finish_write_back(now, round, fence, already as usize)
            }
            RoundKind::Release | RoundKind::Handoff => self.finish_release(round),
            RoundKind::Extend { .. } => unreachable!("extends run in their own slot"),
        }
    }

    // ---- outputs ------------------------------------------------------------

    /// The next command to send, in order; drain until `None` after every input.
    #[must_use = "a command not sent never gets the reply its round waits for"]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// When to call `handle_timeout` next, if ever. Read after draining:
    /// any input may move or clear it.
    #[must_use = "without waiting for it, retries, renewals and expiry never happen"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_timeout(|timer| self.timer_armed(timer))
    }

    /// The next event to act on, in order; drain until `None` after the commands.
    #[must_use = "an event polled and dropped is lost: it is reported once"]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front().map(Event::from)
    }

    // ---- getters ------------------------------------------------------------

    #[must_use]
    pub fn state(&self) -> State {
        self.state
    }

    /// What the run loop has left to do (see [`Progress`]); read it after
    /// draining, like `poll_timeout`.
    #[must_use]
    pub fn progress(&self) -> Progress {
        match self.state {
            State::Acquiring | State::Releasing => Progress::Underway,
            // A renewal (no callers) may be abandoned; a caller's extend not.
            State::Held
                if matches!(
                    self.extend.as_deref(),
                    Some(Round {
                        kind: RoundKind::Extend { callers },
                        ..
                    }) if *callers > 0
                ) =>
            {
                Progress::Underway
            }
            State::Held => Progress::Holding,
            State::Idle | State::Done => Progress::Finished,
        }
    }

    #[must_use]
    pub fn name(&self) -> &LockName {
        &self.config.name
    }

    #[must_use]
    pub fn token(&self) -> &Token {
        &self.config.token
    }

    #[must_use]
    pub fn ttl(&self) -> Ttl {
        self.config.ttl
    }

    #[must_use]
    pub fn keys(&self) -> &LockKeys {
        &self.config.keys
    }

    /// What the lease holds.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.config.kind
    }

    /// The fencing token, once acquired.
    #[must_use]
    pub fn fence(&self) -> Option<u64> {
        (self.fence > 0).then_some(self.fence)
    }

    /// Until when the holder may assume exclusivity (drift already taken off).
    #[must_use]
    pub fn valid_until(&self) -> Option<Instant> {
        self.timers.get(Timer::Expiry)
    }

    /// Time left at `now`; zero once lost or expired.
    #[must_use]
    pub fn valid_for(&self, now: Instant) -> Duration {
        match self.valid_until() {
            Some(until) if !self.lost && self.state == State::Held => {
                until.saturating_duration_since(now)
            }
            _ => Duration::ZERO,
        }
    }

    /// Whether a round is under way (an attempt, a fence write-back, a
    /// release): sent or queued, its replies decide what the caller hears
    /// next. Compensating releases are not rounds. After an attempt's
    /// replies, `false` means the acquire is decided or waits for a timer.
    #[must_use]
    pub fn round_in_flight(&self) -> bool {
        self.round.is_some()
    }

    /// Whether the reply to command `id` is still wanted. A Redlock round
    /// that a majority decided no longer waits for the rest of its nodes
    /// (see `Round::is_decided`): a driver need not either.
    #[must_use]
    pub fn awaits(&self, id: CommandId) -> bool {
        self.cleanup.contains(&id)
            || self.round.as_ref().is_some_and(|r| r.awaits(id))
            || self.extend.as_ref().is_some_and(|r| r.awaits(id))
    }

    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// What this lock has been through so far (see [`LockStats`]).
    #[must_use]
    pub fn stats(&self) -> LockStats {
        self.stats
    }

    /// An acquire failure already decided but not yet reported:
    /// `Event::AcquireFailed` waits for the compensating releases, while a
    /// driver may tell its caller at once (and keep driving them).
    #[must_use]
    pub fn acquire_failure(&self) -> Option<&Error> {
        self.failure.as_deref()
    }
}
