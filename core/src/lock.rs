//! The lock state machine: one lease over N independent Redis nodes
//! (N = 1 is a single Redis, N >= 3 is Redlock), from acquire to release.
//!
//! Every decision about lock semantics lives here: quorum, validity, fencing
//! write-back, retry timing, renewal, loss detection and compensation. The
//! caller only moves [`Command`]s out and [`Reply`]s in, following the run
//! loop in the crate docs (input, drain both queues, wait).

use std::collections::VecDeque;
use std::time::Duration;

mod timers;

use self::timers::{Timer, TimerTable};
use crate::replicas;
use crate::{
    Command, CommandId, Error, Event, FenceGrace, Instant, LockKeys, LockName, NotAcquiredReason,
    Reply, RetryPolicy, Script, Ttl, Wait, WaitReplicas,
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
    /// How long the fence key outlives the lock (see [`FenceGrace`]).
    pub fence_grace: FenceGrace,
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

/// What one node said to one command.
#[derive(Clone, Debug)]
enum Outcome {
    /// Acquire: granted with this counter value. RaiseFence: counter now.
    /// Extend: 1. Release: 1, or 2 if the wake-up was not published.
    Yes(u64),
    /// Acquire: held by someone else, with this PTTL. Extend/Release: 0.
    No(i64),
    /// The server refused (the script did not write anything).
    Failed(String),
    /// May or may not have run.
    Unknown(String),
    /// Acquire/Extend: the script said yes, but fewer replicas than required
    /// acknowledged it (`replicas=N`); our key may be there.
    Unreplicated { acked: u32 },
}

/// One fan-out of a script to the nodes, waiting for every reply.
#[derive(Debug)]
struct Round {
    kind: RoundKind,
    sent_at: Instant,
    ttl: Ttl,
    ids: Vec<(CommandId, usize)>,
    outcomes: Vec<Option<Outcome>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RoundKind {
    Attempt,
    /// Raising lagging fencing counters to `fence` before the lease is returned.
    WriteBack {
        fence: u64,
        /// Granting nodes already at `fence`.
        already: usize,
    },
    Extend {
        /// Extend calls waiting for this round; 0 for an auto-renewal.
        callers: usize,
    },
    Release,
}

/// One lease's state machine, driven by the run loop in the crate docs.
#[derive(Debug)]
pub struct Lock {
    config: LockConfig,
    state: State,
    commands: VecDeque<Command>,
    events: VecDeque<Event>,
    next_id: u64,
    rng: u64,

    /// Acquire/write-back/release rounds; renewals and user extends run in
    /// `extend` so a release can overtake them.
    round: Option<Round>,
    extend: Option<Round>,
    /// Nodes where our key may exist: granted, or an unknown outcome.
    maybe_holding: Vec<bool>,
    /// Compensating releases and reclaims in flight (their replies change
    /// nothing but a refused wake-up).
    cleanup: Vec<CommandId>,
    /// An acquire failure waiting for `cleanup` to drain.
    failure: Option<Error>,

    /// Deadline, retry, expiry and renewal instants; `timer_armed` says
    /// which of them count in the current state.
    timers: TimerTable,
    subscribed: bool,
    /// A wake-up arrived while an attempt was in flight: retry at once if it fails.
    woken: bool,
    /// Why the last attempt failed (reported if the wait runs out).
    reason: NotAcquiredReason,
    /// Consecutive attempts without a quorum of answering nodes (backoff).
    unreachable_rounds: u32,

    fence: Option<u64>,
    current_ttl: Ttl,
    lost: bool,
    /// `replicas=N`: grants and extensions need N replica acknowledgements.
    replicas: Option<WaitReplicas>,
}

impl Lock {
    #[must_use]
    pub fn new(config: LockConfig) -> Self {
        let nodes = config.nodes.max(1);
        Lock {
            rng: config.seed | 1,
            current_ttl: config.ttl,
            maybe_holding: vec![false; nodes],
            config: LockConfig { nodes, ..config },
            state: State::Idle,
            commands: VecDeque::new(),
            events: VecDeque::new(),
            next_id: 0,
            round: None,
            extend: None,
            cleanup: Vec::new(),
            failure: None,
            timers: TimerTable::default(),
            subscribed: false,
            woken: false,
            reason: NotAcquiredReason::Held,
            unreachable_rounds: 0,
            fence: None,
            lost: false,
            replicas: None,
        }
    }

    /// Count an acquire, extend or renewal only once `replicas` replicas
    /// acknowledged it (`WAIT replicas timeout` after the script). Too few:
    /// the lock is released and the acquire fails with `NotAcquired` (reason
    /// "replicas"), an extend or renewal with `LockLost`. 0 (the default)
    /// waits for nothing. Call before `acquire`.
    pub fn require_replicas(&mut self, replicas: u32, timeout: Duration) {
        self.replicas = (replicas > 0).then_some(WaitReplicas { replicas, timeout });
    }

    fn quorum(&self) -> usize {
        self.config.nodes / 2 + 1
    }

    // ---- application commands -------------------------------------------

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
        let callers = match self.extend {
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
        match self.state {
            State::Idle | State::Acquiring => {
                Err(Error::invalid("release needs an acquired lease"))
            }
            State::Releasing | State::Done if self.round.is_none() => {
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
                self.round =
                    Some(self.fan_out(now, RoundKind::Release, self.current_ttl, |_| true));
                Ok(())
            }
        }
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
                    self.maybe_holding.iter_mut().for_each(|m| *m = true);
                }
                self.state = State::Releasing;
                self.compensate(now, true);
                self.settle_if_idle();
            }
            State::Releasing | State::Done => {}
        }
    }

    // ---- inputs ------------------------------------------------------------

    pub fn handle_reply(&mut self, now: Instant, id: CommandId, reply: Reply) {
        if let Some(at) = self.cleanup.iter().position(|&c| c == id) {
            self.cleanup.swap_remove(at);
            if reply == Reply::Int(2) {
                // Only compensating releases answer 2.
                self.events.push_back(Event::NotPublished);
            }
            self.settle_if_idle();
            return;
        }
        let replicas = self.replicas;
        let in_round = |round: &mut Option<Round>| -> bool {
            let Some(round) = round.as_mut() else {
                return false;
            };
            let Some(at) = round.ids.iter().position(|&(c, _)| c == id) else {
                return false;
            };
            if round.outcomes[at].is_none() {
                round.outcomes[at] = Some(match replicas {
                    Some(wanted)
                        if matches!(round.kind, RoundKind::Attempt | RoundKind::Extend { .. }) =>
                    {
                        let (reply, acked) = replicas::split(reply.clone());
                        match Outcome::parse(round.kind, reply) {
                            Outcome::Yes(_) if acked < wanted.replicas => {
                                Outcome::Unreplicated { acked }
                            }
                            outcome => outcome,
                        }
                    }
                    _ => Outcome::parse(round.kind, reply.clone()),
                });
            }
            true
        };
        if in_round(&mut self.round) {
            let round = self.round.as_ref().expect("matched above");
            if round.kind == RoundKind::Attempt {
                // Only a node that surely did not set our key can be forgotten.
                let at = round
                    .ids
                    .iter()
                    .position(|&(c, _)| c == id)
                    .expect("matched above");
                if let Some(Outcome::No(_) | Outcome::Failed(_)) = round.outcomes[at] {
                    self.maybe_holding[round.ids[at].1] = false;
                }
            }
            if round.outcomes.iter().all(Option::is_some) {
                let round = self.round.take().expect("matched above");
                self.finish_round(now, round);
            }
        } else if in_round(&mut self.extend)
            && self
                .extend
                .as_ref()
                .is_some_and(|r| r.outcomes.iter().all(Option::is_some))
        {
            let round = self.extend.take().expect("matched above");
            self.finish_extend(now, round);
        }
        // Anything else is a stale or unknown id: ignored.
    }

    /// A release notification arrived on the lock's channel (or the
    /// subscription asked for by `Event::Subscribe` is now active).
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
                    Timer::Renew => self.send_extend(now, 0),
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

    // ---- outputs -----------------------------------------------------------

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
        self.events.pop_front()
    }

    // ---- getters -----------------------------------------------------------

    #[must_use]
    pub fn state(&self) -> State {
        self.state
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

    /// The fencing token, once acquired.
    #[must_use]
    pub fn fence(&self) -> Option<u64> {
        self.fence
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

    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// An acquire failure already decided but not yet reported:
    /// `Event::AcquireFailed` waits for the compensating releases, while a
    /// driver may tell its caller at once (and keep driving them).
    #[must_use]
    pub fn acquire_failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    // ---- acquiring ---------------------------------------------------------

    fn deadline(&self) -> Option<Instant> {
        self.timers.get(Timer::Deadline)
    }

    fn start_attempt(&mut self, now: Instant) {
        self.timers.stop(Timer::Retry);
        self.woken = false;
        self.maybe_holding.iter_mut().for_each(|m| *m = true);
        self.round = Some(self.fan_out(now, RoundKind::Attempt, self.config.ttl, |_| true));
    }

    fn finish_round(&mut self, now: Instant, round: Round) {
        match round.kind {
            RoundKind::Attempt => self.finish_attempt(now, round),
            RoundKind::WriteBack { fence, already } => {
                self.finish_write_back(now, round, fence, already)
            }
            RoundKind::Release => self.finish_release(round),
            RoundKind::Extend { .. } => unreachable!("extends run in their own slot"),
        }
    }

    fn finish_attempt(&mut self, now: Instant, round: Round) {
        let quorum = self.quorum();
        let granted: Vec<(usize, u64)> = round
            .outcomes
            .iter()
            .enumerate()
            .filter_map(|(node, o)| match o {
                Some(Outcome::Yes(fence)) => Some((round.ids[node].1, *fence)),
                _ => None,
            })
            .collect();
        let valid_until = round.sent_at + round.ttl.as_duration().saturating_sub(round.ttl.drift());
        // Redlock needs positive validity; a single Redis hands over what it
        // granted, however short (the lease then reports itself lost at once).
        if granted.len() >= quorum && (valid_until > now || self.config.nodes == 1) {
            self.timers.set(Timer::Expiry, valid_until);
            let max = granted.iter().map(|&(_, f)| f).max().unwrap_or(0);
            let lagging: Vec<usize> = granted
                .iter()
                .filter(|&&(_, f)| f < max)
                .map(|&(n, _)| n)
                .collect();
            if granted.len() - lagging.len() >= quorum {
                self.grant(round.sent_at, max);
            } else {
                let kind = RoundKind::WriteBack {
                    fence: max,
                    already: granted.len() - lagging.len(),
                };
                let mut write_back =
                    self.fan_out(now, kind, round.ttl, |node| lagging.contains(&node));
                // Validity and renewal still count from the attempt's send.
                write_back.sent_at = round.sent_at;
                self.round = Some(write_back);
            }
            return;
        }
        if let Some(error) = self.unreplicated_grant(&round, granted.len()) {
            // Ours, but not on enough replicas to survive a failover: give
            // it back (waking waiters: it was held) and say so.
            self.compensate(now, true);
            return self.fail_acquire(error);
        }
        // No usable majority: give back what we may hold, then retry or fail.
        self.compensate(now, false);
        let failures: Vec<&str> = round
            .outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Failed(m) | Outcome::Unknown(m)) => Some(m.as_str()),
                _ => None,
            })
            .collect();
        if failures.len() > self.config.nodes - quorum {
            if self.config.nodes == 1 {
                let message = failures.first().copied().unwrap_or("no reply").to_owned();
                return self.fail_acquire(Error::redis(Some(&self.config.name), message));
            }
            // Redlock: too few nodes answered for a majority. Not a verdict
            // on the lock: back off and ask again until the wait runs out
            // (a rolling restart or a short partition heals).
            self.reason = NotAcquiredReason::Unreachable {
                unreachable: failures.len(),
                nodes: self.config.nodes,
            };
            return self.back_off(now);
        }
        self.reason = NotAcquiredReason::Held;
        if granted.len() >= quorum {
            // Granted, but the round took longer than the validity: retrying
            // at once would only repeat that; back off instead.
            return self.back_off(now);
        }
        self.unreachable_rounds = 0;
        let holder_pttl = round
            .outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::No(pttl)) => Some(*pttl),
                _ => None,
            })
            .min_by_key(|&p| if p < 0 { i64::MAX } else { p });
        self.wait_for_retry(now, holder_pttl);
    }

    fn not_acquired(&self) -> Error {
        Error::NotAcquired {
            name: self.config.name.clone(),
            reason: self.reason,
        }
    }

    /// Retry a round that found too few nodes, with exponential backoff
    /// (10 ms doubling up to `max_delay`) and jitter over its upper half.
    fn back_off(&mut self, now: Instant) {
        if self.deadline().is_some_and(|d| now >= d) {
            return self.fail_acquire(self.not_acquired());
        }
        let step = Duration::from_millis(10)
            .saturating_mul(1 << self.unreachable_rounds.min(16))
            .min(self.config.retry.max_delay);
        self.unreachable_rounds = self.unreachable_rounds.saturating_add(1);
        let delay = step / 2 + self.random_up_to(step / 2);
        self.timers.set(Timer::Retry, now + delay);
    }

    fn wait_for_retry(&mut self, now: Instant, holder_pttl: Option<i64>) {
        let deadline = self.deadline();
        if deadline.is_some_and(|d| now >= d) {
            return self.fail_acquire(self.not_acquired());
        }
        if self.woken {
            // A release happened while we were asking: ask again at once.
            return self.start_attempt(now);
        }
        if !self.subscribed {
            self.subscribed = true;
            self.events.push_back(Event::Subscribe);
        }
        let policy = self.config.retry;
        let base = match holder_pttl {
            Some(pttl) if pttl >= 0 => Duration::from_millis(pttl as u64),
            // -1: a key without expiry (not ours to judge); -2 or none: gone.
            Some(-1) => policy.max_delay,
            _ => Duration::ZERO,
        };
        let jitter = self.random_up_to(policy.jitter);
        self.timers
            .set(Timer::Retry, now + base.min(policy.max_delay) + jitter);
    }

    fn finish_write_back(&mut self, now: Instant, round: Round, fence: u64, already: usize) {
        let raised = round
            .outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::Yes(f)) if *f >= fence))
            .count();
        let valid = self.valid_until().is_some_and(|v| v > now);
        if already + raised >= self.quorum() && valid {
            self.grant(round.sent_at, fence);
        } else {
            self.timers.stop(Timer::Expiry);
            self.compensate(now, false);
            self.wait_for_retry(now, None);
        }
    }

    fn grant(&mut self, sent_at: Instant, fence: u64) {
        self.unsubscribe();
        self.fence = Some(fence);
        self.state = State::Held;
        if self.config.auto_renew {
            self.timers
                .set(Timer::Renew, sent_at + renew_interval(self.current_ttl));
        }
        let valid_until = self.valid_until().expect("set before granting");
        self.events
            .push_back(Event::Acquired { fence, valid_until });
    }

    /// The failure is reported once the compensating releases are answered,
    /// so a caller that gets it (and may close the client) leaves nothing
    /// behind in Redis.
    fn fail_acquire(&mut self, error: Error) {
        self.unsubscribe();
        self.timers.stop(Timer::Retry);
        self.failure = Some(error);
        self.state = State::Releasing;
        self.settle_if_idle();
    }

    fn unsubscribe(&mut self) {
        if std::mem::take(&mut self.subscribed) {
            self.events.push_back(Event::Unsubscribe);
        }
    }

    // ---- holding -----------------------------------------------------------

    fn send_extend(&mut self, now: Instant, callers: usize) {
        // The PEXPIRE may run whatever the reply says, so from the send on a
        // shorter ttl shortens what the holder may rely on; success then
        // sets the new window.
        let window = self
            .current_ttl
            .as_duration()
            .saturating_sub(self.current_ttl.drift());
        if let Some(until) = self.valid_until() {
            self.timers.set(Timer::Expiry, until.min(now + window));
        }
        self.extend = Some(self.fan_out(
            now,
            RoundKind::Extend { callers },
            self.current_ttl,
            |_| true,
        ));
    }

    fn finish_extend(&mut self, now: Instant, round: Round) {
        let RoundKind::Extend { callers } = round.kind else {
            unreachable!("only extends here")
        };
        let lost = self.lock_lost();
        let tell = |events: &mut VecDeque<Event>, event: Event| {
            events.extend(std::iter::repeat_n(event, callers));
        };
        let yes = round
            .outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::Yes(_))))
            .count();
        let no = round
            .outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::No(_))))
            .count();
        let valid_until = round.sent_at + round.ttl.as_duration().saturating_sub(round.ttl.drift());
        let quorum = self.quorum();
        if self.lost {
            // Lost while the extend was in flight (validity ran out): too late.
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else if self.unreplicated_grant(&round, yes).is_some() {
            // Extended, but not on enough replicas: a failover could lose it,
            // so it no longer counts as held. Give it back.
            self.mark_lost();
            self.maybe_holding.iter_mut().for_each(|m| *m = true);
            self.compensate(now, true);
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else if yes >= quorum && valid_until > now {
            self.timers.set(Timer::Expiry, valid_until);
            if self.config.auto_renew {
                self.timers
                    .set(Timer::Renew, round.sent_at + renew_interval(round.ttl));
            }
            self.reclaim(&round);
            tell(&mut self.events, Event::Extended { valid_until });
        } else if no > self.config.nodes - quorum || (yes >= quorum) {
            // The lock is someone else's (or expired) on a majority.
            self.mark_lost();
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else {
            // Redis trouble, not a verdict: the lease stays valid until its
            // deadline; a renewal tries again soon.
            let message =
                first_failure(&round).unwrap_or_else(|| "no majority answered".to_owned());
            tell(
                &mut self.events,
                Event::ExtendFailed(Error::redis(Some(&self.config.name), message)),
            );
            if self.config.auto_renew {
                let retry = (self.current_ttl.as_duration() / 10).min(self.config.retry.max_delay);
                self.timers.set(Timer::Renew, now + retry);
            }
        }
    }

    /// With `replicas=N`: the round fell short of a majority of replicated
    /// yeses only because of missing replica acknowledgements. The error
    /// says how many acknowledged (the best node's count).
    fn unreplicated_grant(&self, round: &Round, yes: usize) -> Option<Error> {
        let wanted = self.replicas?.replicas;
        let short: Vec<u32> = round
            .outcomes
            .iter()
            .filter_map(|o| match o {
                Some(Outcome::Unreplicated { acked }) => Some(*acked),
                _ => None,
            })
            .collect();
        if yes >= self.quorum() || yes + short.len() < self.quorum() {
            return None;
        }
        let acked = short.iter().copied().max().unwrap_or(0);
        Some(replicas::too_few(&self.config.name, acked, wanted))
    }

    /// A majority still holds our token, so put it back where a node lost
    /// it (restarted empty, or the key expired while the node was away):
    /// otherwise every node restarting in turn would leave us below quorum.
    fn reclaim(&mut self, round: &Round) {
        let Some(fence) = self.fence else { return };
        for (at, &(_, node)) in round.ids.iter().enumerate() {
            if matches!(round.outcomes[at], Some(Outcome::No(_))) {
                let id = self.push_reclaim(node, round.ttl, fence);
                self.maybe_holding[node] = true;
                self.cleanup.push(id);
            }
        }
    }

    fn mark_lost(&mut self) {
        if !self.lost {
            self.lost = true;
            self.timers.stop(Timer::Renew);
            self.events.push_back(Event::Lost);
        }
    }

    fn lock_lost(&self) -> Error {
        Error::LockLost {
            name: self.config.name.clone(),
        }
    }

    // ---- releasing ---------------------------------------------------------

    fn finish_release(&mut self, round: Round) {
        let yes = round
            .outcomes
            .iter()
            .filter(|o| matches!(o, Some(Outcome::Yes(_))))
            .count();
        if round
            .outcomes
            .iter()
            .any(|o| matches!(o, Some(Outcome::Yes(2))))
        {
            self.events.push_back(Event::NotPublished);
        }
        let result = if self.lost {
            Err(self.lock_lost())
        } else if yes >= self.quorum() {
            Ok(())
        } else if let Some(message) = first_failure(&round) {
            Err(Error::redis(Some(&self.config.name), message))
        } else {
            // Expired or taken over before we released: the lease was lost.
            self.mark_lost();
            Err(self.lock_lost())
        };
        self.maybe_holding.iter_mut().for_each(|m| *m = false);
        self.events.push_back(Event::Released(result));
        self.settle_if_idle();
    }

    /// Fire-and-forget releases to every node that may hold our key. `wake`:
    /// also notify waiters (we may have held the lock, not just a minority).
    fn compensate(&mut self, now: Instant, wake: bool) {
        let _ = now;
        for node in 0..self.config.nodes {
            if std::mem::take(&mut self.maybe_holding[node]) {
                let id = self.push_release(node, wake);
                self.cleanup.push(id);
            }
        }
    }

    /// Extend calls still waiting when the lease is released or dropped
    /// learn that it is no longer held.
    fn abandon_extend(&mut self) {
        if let Some(Round {
            kind: RoundKind::Extend { callers },
            ..
        }) = self.extend.take()
        {
            let lost = self.lock_lost();
            self.events
                .extend(std::iter::repeat_n(Event::ExtendFailed(lost), callers));
        }
    }

    fn settle_if_idle(&mut self) {
        if self.state == State::Releasing && self.round.is_none() && self.cleanup.is_empty() {
            if let Some(error) = self.failure.take() {
                self.events.push_back(Event::AcquireFailed(error));
            }
            self.state = State::Done;
        }
    }

    // ---- plumbing ----------------------------------------------------------

    fn fan_out(
        &mut self,
        now: Instant,
        kind: RoundKind,
        ttl: Ttl,
        to: impl Fn(usize) -> bool,
    ) -> Round {
        let script = match kind {
            RoundKind::Attempt => Script::Acquire,
            RoundKind::WriteBack { .. } => Script::RaiseFence,
            RoundKind::Extend { .. } => Script::Extend,
            RoundKind::Release => Script::Release,
        };
        let mut ids = Vec::new();
        for node in (0..self.config.nodes).filter(|&n| to(n)) {
            let id = match kind {
                RoundKind::WriteBack { fence, .. } => self.push_raise_fence(node, fence),
                RoundKind::Release => self.push_release(node, true),
                _ => self.push_command(node, script, ttl),
            };
            ids.push((id, node));
        }
        let outcomes = vec![None; ids.len()];
        Round {
            kind,
            sent_at: now,
            ttl,
            ids,
            outcomes,
        }
    }

    fn push_command(&mut self, node: usize, script: Script, ttl: Ttl) -> CommandId {
        let keys = &self.config.keys;
        let token = self.config.token.0.as_bytes().to_vec();
        let ttl_ms = ttl.as_millis().to_string().into_bytes();
        let fence_ttl_ms = self.fence_ttl(ttl);
        let keys = vec![keys.lock.clone(), keys.fence.clone()];
        let args = match script {
            Script::Acquire | Script::Extend => vec![token, ttl_ms, fence_ttl_ms],
            Script::Release => unreachable!("built by push_release"),
            Script::RaiseFence => unreachable!("built by push_raise_fence"),
            Script::Reclaim => unreachable!("built by push_reclaim"),
        };
        self.push(node, script, keys, args)
    }

    /// The fence key's PX: the lock's ttl plus the grace.
    fn fence_ttl(&self, ttl: Ttl) -> Vec<u8> {
        self.config
            .fence_grace
            .fence_ttl(ttl)
            .to_string()
            .into_bytes()
    }

    fn push_reclaim(&mut self, node: usize, ttl: Ttl, fence: u64) -> CommandId {
        let keys = vec![
            self.config.keys.lock.clone(),
            self.config.keys.fence.clone(),
        ];
        let args = vec![
            self.config.token.0.as_bytes().to_vec(),
            ttl.as_millis().to_string().into_bytes(),
            fence.to_string().into_bytes(),
            self.fence_ttl(ttl),
        ];
        self.push(node, Script::Reclaim, keys, args)
    }

    fn push_release(&mut self, node: usize, wake: bool) -> CommandId {
        let keys = &self.config.keys;
        let keys = if wake {
            vec![keys.lock.clone(), keys.channel.clone()]
        } else {
            vec![keys.lock.clone()]
        };
        let token = self.config.token.0.as_bytes().to_vec();
        self.push(node, Script::Release, keys, vec![token])
    }

    fn push_raise_fence(&mut self, node: usize, fence: u64) -> CommandId {
        let keys = vec![self.config.keys.fence.clone()];
        let args = vec![
            fence.to_string().into_bytes(),
            self.fence_ttl(self.config.ttl),
        ];
        self.push(node, Script::RaiseFence, keys, args)
    }

    fn push(
        &mut self,
        node: usize,
        script: Script,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    ) -> CommandId {
        let id = CommandId(self.next_id);
        self.next_id += 1;
        self.commands.push_back(Command {
            id,
            node,
            script,
            keys,
            args,
            wait_replicas: self
                .replicas
                .filter(|_| matches!(script, Script::Acquire | Script::Extend)),
        });
        id
    }

    /// xorshift64*: deterministic jitter from the caller's seed.
    fn random_up_to(&mut self, max: Duration) -> Duration {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let nanos = max.as_nanos() as u64;
        if nanos == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(r % (nanos + 1))
        }
    }
}

impl Outcome {
    fn parse(kind: RoundKind, reply: Reply) -> Outcome {
        match (kind, reply) {
            (_, Reply::Error(message)) => Outcome::Failed(message),
            (_, Reply::Unknown(message)) => Outcome::Unknown(message),
            (RoundKind::Attempt, Reply::Array(items)) => match items.as_slice() {
                [Reply::Int(1), fence] if fence_value(fence).is_some_and(|f| f > 0) => {
                    Outcome::Yes(fence_value(fence).expect("checked"))
                }
                [Reply::Int(0), Reply::Int(pttl)] => Outcome::No(*pttl),
                // A reply we cannot read may still mean the script ran.
                _ => Outcome::Unknown("unexpected reply to the acquire script".to_owned()),
            },
            (RoundKind::WriteBack { .. }, counter) if fence_value(&counter).is_some() => {
                Outcome::Yes(fence_value(&counter).expect("checked"))
            }
            (RoundKind::Release, Reply::Int(2)) => Outcome::Yes(2),
            (RoundKind::Extend { .. } | RoundKind::Release, Reply::Int(1)) => Outcome::Yes(1),
            (RoundKind::Extend { .. } | RoundKind::Release, Reply::Int(0)) => Outcome::No(0),
            (RoundKind::Attempt, _) => {
                Outcome::Unknown("unexpected reply to the acquire script".to_owned())
            }
            _ => Outcome::Failed("unexpected reply from Redis".to_owned()),
        }
    }
}

/// A fence as the scripts return it: a decimal string (exact u64), or an
/// integer reply from a server that converted it.
fn fence_value(reply: &Reply) -> Option<u64> {
    match reply {
        Reply::Bulk(digits) => std::str::from_utf8(digits).ok()?.parse().ok(),
        Reply::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn first_failure(round: &Round) -> Option<String> {
    round.outcomes.iter().find_map(|o| match o {
        Some(Outcome::Failed(m) | Outcome::Unknown(m)) => Some(m.clone()),
        _ => None,
    })
}

/// Auto-renewal runs every ttl/3: two renewals can fail before expiry.
fn renew_interval(ttl: Ttl) -> Duration {
    Duration::from_millis((ttl.as_millis() / 3).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeySpace;

    fn ms(n: u64) -> Instant {
        Instant::from_epoch(Duration::from_millis(n))
    }

    fn lock(nodes: usize, wait: Wait, auto_renew: bool) -> Lock {
        let name = LockName::new("job").unwrap();
        Lock::new(LockConfig {
            keys: KeySpace::default().keys(&name),
            name,
            token: Token("t".into()),
            ttl: Ttl::from_millis(1000).unwrap(),
            wait,
            nodes,
            auto_renew,
            retry: RetryPolicy::default(),
            fence_grace: FenceGrace::DEFAULT,
            seed: 7,
        })
    }

    fn commands(lock: &mut Lock) -> Vec<Command> {
        std::iter::from_fn(|| lock.poll_command()).collect()
    }

    fn events(lock: &mut Lock) -> Vec<Event> {
        std::iter::from_fn(|| lock.poll_event()).collect()
    }

    fn granted(fence: i64) -> Reply {
        Reply::Array(vec![Reply::Int(1), Reply::Int(fence)])
    }

    fn held(pttl: i64) -> Reply {
        Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)])
    }

    #[test]
    fn single_node_acquire_then_release_is_one_command_each() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        assert_eq!(c.script, Script::Acquire);
        l.handle_reply(ms(1), c.id, granted(5));
        assert_eq!(
            events(&mut l),
            vec![Event::Acquired {
                fence: 5,
                valid_until: ms(1000 - 12)
            }]
        );
        l.release(ms(2)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(3), c.id, Reply::Int(1));
        assert_eq!(events(&mut l), vec![Event::Released(Ok(()))]);
        assert_eq!(l.state(), State::Done);
        l.release(ms(4)).unwrap();
        assert_eq!(events(&mut l), vec![Event::Released(Ok(()))]);
        assert!(commands(&mut l).is_empty());
    }

    #[test]
    fn contended_waiter_subscribes_and_retries_on_wakeup() {
        let mut l = lock(1, Wait::Bounded(Duration::from_secs(5)), false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, held(800));
        assert_eq!(events(&mut l), vec![Event::Subscribe]);
        let retry = l.poll_timeout().unwrap();
        assert!(retry >= ms(801) && retry <= ms(806), "{retry:?}");
        l.handle_wakeup(ms(10));
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(11), c.id, granted(6));
        assert_eq!(
            events(&mut l),
            vec![
                Event::Unsubscribe,
                Event::Acquired {
                    fence: 6,
                    valid_until: ms(10 + 988)
                }
            ]
        );
    }

    #[test]
    fn wait_bound_ends_in_not_acquired() {
        let mut l = lock(1, Wait::Bounded(Duration::from_millis(50)), false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, held(800));
        assert_eq!(l.poll_timeout(), Some(ms(50)));
        l.handle_timeout(ms(50));
        let ev = events(&mut l);
        assert!(
            matches!(
                ev.as_slice(),
                [
                    Event::Subscribe,
                    Event::Unsubscribe,
                    Event::AcquireFailed(Error::NotAcquired { .. })
                ]
            ),
            "{ev:?}"
        );
        assert_eq!(l.state(), State::Done);
    }

    #[test]
    fn try_once_fails_without_subscribing() {
        let mut l = lock(1, Wait::TRY_ONCE, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, held(800));
        let ev = events(&mut l);
        assert!(
            matches!(
                ev.as_slice(),
                [Event::AcquireFailed(Error::NotAcquired { .. })]
            ),
            "{ev:?}"
        );
    }

    #[test]
    fn unknown_outcome_is_compensated() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, Reply::Unknown("timed out".into()));
        let [r] = commands(&mut l).try_into().unwrap();
        assert_eq!(r.script, Script::Release);
        // The failure waits for the compensating release.
        assert!(events(&mut l).is_empty());
        assert_eq!(l.state(), State::Releasing);
        l.handle_reply(ms(2), r.id, Reply::Int(0));
        assert!(matches!(
            events(&mut l).as_slice(),
            [Event::AcquireFailed(Error::Redis { .. })]
        ));
        assert_eq!(l.state(), State::Done);
    }

    #[test]
    fn cancel_mid_flight_releases() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.cancel(ms(1));
        let [r] = commands(&mut l).try_into().unwrap();
        assert_eq!(r.script, Script::Release);
        l.handle_reply(ms(2), c.id, granted(1));
        l.handle_reply(ms(2), r.id, Reply::Int(1));
        assert!(events(&mut l).is_empty());
        assert_eq!(l.state(), State::Done);
    }

    #[test]
    fn auto_renew_extends_every_third_and_loss_is_reported() {
        let mut l = lock(1, Wait::Forever, true);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, granted(1));
        events(&mut l);
        assert_eq!(l.poll_timeout(), Some(ms(333)));
        l.handle_timeout(ms(333));
        let [e] = commands(&mut l).try_into().unwrap();
        assert_eq!(e.script, Script::Extend);
        l.handle_reply(ms(334), e.id, Reply::Int(1));
        assert!(events(&mut l).is_empty());
        assert_eq!(l.valid_until(), Some(ms(333 + 988)));
        l.handle_timeout(ms(666));
        let [e] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(667), e.id, Reply::Int(0));
        assert_eq!(events(&mut l), vec![Event::Lost]);
        assert!(l.is_lost());
        l.release(ms(700)).unwrap();
        let [r] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(701), r.id, Reply::Int(0));
        assert!(matches!(
            events(&mut l).as_slice(),
            [Event::Released(Err(Error::LockLost { .. }))]
        ));
    }

    #[test]
    fn redlock_writes_back_the_maximum_fence() {
        let mut l = lock(5, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let cs = commands(&mut l);
        assert_eq!(cs.len(), 5);
        for (c, reply) in cs.iter().zip([
            granted(3),
            granted(9),
            granted(4),
            held(10),
            Reply::Unknown("down".into()),
        ]) {
            l.handle_reply(ms(2), c.id, reply);
        }
        let wb = commands(&mut l);
        assert_eq!(
            wb.iter().map(|c| (c.script, c.node)).collect::<Vec<_>>(),
            vec![(Script::RaiseFence, 0), (Script::RaiseFence, 2)]
        );
        assert!(events(&mut l).is_empty());
        l.handle_reply(ms(3), wb[0].id, Reply::Int(9));
        l.handle_reply(ms(3), wb[1].id, Reply::Int(9));
        assert_eq!(
            events(&mut l),
            vec![Event::Acquired {
                fence: 9,
                valid_until: ms(988)
            }]
        );
    }

    #[test]
    fn redlock_without_majority_releases_everywhere_it_may_hold() {
        let mut l = lock(5, Wait::TRY_ONCE, false);
        l.acquire(ms(0)).unwrap();
        let cs = commands(&mut l);
        for (c, reply) in cs.iter().zip([
            granted(1),
            granted(1),
            held(10),
            held(10),
            Reply::Unknown("down".into()),
        ]) {
            l.handle_reply(ms(2), c.id, reply);
        }
        let releases = commands(&mut l);
        assert_eq!(
            releases.iter().map(|c| c.node).collect::<Vec<_>>(),
            vec![0, 1, 4]
        );
        for r in &releases {
            assert!(events(&mut l).is_empty());
            l.handle_reply(ms(3), r.id, Reply::Int(1));
        }
        assert!(matches!(
            events(&mut l).as_slice(),
            [Event::AcquireFailed(Error::NotAcquired { .. })]
        ));
    }

    #[test]
    fn overlapping_extends_all_complete_and_extend_after_release_is_lock_lost() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, granted(1));
        events(&mut l);
        l.extend(ms(2), None).unwrap();
        l.extend(ms(3), None).unwrap();
        let cs = commands(&mut l);
        assert_eq!(cs.len(), 2);
        l.handle_reply(ms(4), cs[0].id, Reply::Int(1));
        l.handle_reply(ms(4), cs[1].id, Reply::Int(1));
        let extended = Event::Extended {
            valid_until: ms(3 + 988),
        };
        assert_eq!(events(&mut l), vec![extended.clone(), extended]);
        l.release(ms(5)).unwrap();
        let [r] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(6), r.id, Reply::Int(1));
        events(&mut l);
        l.extend(ms(7), None).unwrap();
        assert!(matches!(
            events(&mut l).as_slice(),
            [Event::ExtendFailed(Error::LockLost { .. })]
        ));
    }

    #[test]
    fn fences_arrive_as_exact_decimal_strings() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        // ARGV: token, ttl, fence key ttl = ttl + grace.
        assert_eq!(c.args[1..], [b"1000".to_vec(), b"61000".to_vec()]);
        let big = (1u64 << 53) + 1;
        let reply = Reply::Array(vec![Reply::Int(1), Reply::Bulk(big.to_string().into())]);
        l.handle_reply(ms(1), c.id, reply);
        assert!(
            matches!(events(&mut l).as_slice(), [Event::Acquired { fence, .. }] if *fence == big)
        );
    }

    #[test]
    fn redlock_retries_unreachable_rounds_until_the_wait_runs_out() {
        let mut l = lock(5, Wait::Bounded(Duration::from_millis(500)), false);
        l.acquire(ms(0)).unwrap();
        let down = || Reply::Unknown("connection refused".into());
        let mut now = 0;
        let mut rounds = 0;
        loop {
            let cs = commands(&mut l);
            if cs.iter().all(|c| c.script == Script::Release) {
                for c in &cs {
                    l.handle_reply(ms(now), c.id, Reply::Int(0));
                }
                break;
            }
            rounds += 1;
            for (i, c) in cs.iter().enumerate() {
                let reply = if i < 2 { granted(1) } else { down() };
                l.handle_reply(ms(now + 1), c.id, reply);
            }
            // Compensating releases of the two grants.
            for c in commands(&mut l) {
                l.handle_reply(ms(now + 1), c.id, Reply::Int(1));
            }
            assert!(events(&mut l).is_empty() || l.state() == State::Done);
            let Some(at) = l.poll_timeout() else { break };
            now = at.since_epoch().as_millis() as u64;
            l.handle_timeout(at);
        }
        assert!(rounds >= 4, "retried with backoff: {rounds} rounds");
        let ev = events(&mut l);
        let Some(Event::AcquireFailed(e)) = ev.last() else {
            panic!("{ev:?}")
        };
        assert_eq!(
            e.reason(),
            Some(NotAcquiredReason::Unreachable {
                unreachable: 3,
                nodes: 5
            })
        );
        assert!(e.to_string().contains("3 of 5 nodes unreachable"), "{e}");
        assert!(now >= 500, "not before the wait ran out: {now}");
    }

    #[test]
    fn redlock_try_once_reports_unreachable_at_once() {
        let mut l = lock(3, Wait::TRY_ONCE, false);
        l.acquire(ms(0)).unwrap();
        for c in commands(&mut l) {
            l.handle_reply(ms(1), c.id, Reply::Error("ERR down".into()));
        }
        assert!(commands(&mut l).is_empty());
        let ev = events(&mut l);
        assert!(
            matches!(ev.as_slice(), [Event::AcquireFailed(e)] if e.reason().map(|r| r.as_str()) == Some("unreachable")),
            "{ev:?}"
        );
    }

    #[test]
    fn held_until_the_wait_runs_out_is_reason_held() {
        let mut l = lock(1, Wait::TRY_ONCE, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, held(800));
        let ev = events(&mut l);
        assert!(
            matches!(ev.as_slice(), [Event::AcquireFailed(e)] if e.reason() == Some(NotAcquiredReason::Held)),
            "{ev:?}"
        );
    }

    #[test]
    fn renewal_puts_the_key_back_where_a_node_lost_it_while_a_majority_holds() {
        let mut l = lock(3, Wait::Forever, true);
        l.acquire(ms(0)).unwrap();
        for c in commands(&mut l) {
            l.handle_reply(ms(1), c.id, granted(7));
        }
        events(&mut l);
        l.handle_timeout(ms(333));
        let cs = commands(&mut l);
        assert!(cs.iter().all(|c| c.script == Script::Extend));
        // Node 2 restarted empty: "not ours" there, ours on 0 and 1.
        for (c, r) in cs.iter().zip([1, 1, 0]) {
            l.handle_reply(ms(334), c.id, Reply::Int(r));
        }
        let [r] = commands(&mut l).try_into().unwrap();
        assert_eq!((r.script, r.node), (Script::Reclaim, 2));
        assert_eq!(r.keys, vec![l.keys().lock.clone(), l.keys().fence.clone()]);
        assert_eq!(
            r.args[1..],
            [b"1000".to_vec(), b"7".to_vec(), b"61000".to_vec()]
        );
        l.handle_reply(ms(335), r.id, Reply::Int(1));
        assert!(!l.is_lost());
        // Without a majority nothing is put back: the lease is lost.
        l.handle_timeout(ms(667));
        let cs = commands(&mut l);
        for (c, r) in cs.iter().zip([1, 0, 0]) {
            l.handle_reply(ms(668), c.id, Reply::Int(r));
        }
        assert!(commands(&mut l).is_empty());
        assert_eq!(events(&mut l), vec![Event::Lost]);
    }

    #[test]
    fn a_refused_publish_is_a_successful_release_and_a_signal() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, granted(1));
        events(&mut l);
        l.release(ms(2)).unwrap();
        let [r] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(3), r.id, Reply::Int(2));
        assert_eq!(
            events(&mut l),
            vec![Event::NotPublished, Event::Released(Ok(()))]
        );
        assert!(!l.is_lost());
    }

    #[test]
    fn a_release_that_finds_the_lock_gone_marks_the_lease_lost() {
        let mut l = lock(1, Wait::Forever, false);
        l.acquire(ms(0)).unwrap();
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(1), c.id, granted(1));
        events(&mut l);
        l.release(ms(2)).unwrap();
        let [r] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(3), r.id, Reply::Int(0));
        let ev = events(&mut l);
        assert!(
            matches!(
                ev.as_slice(),
                [Event::Lost, Event::Released(Err(Error::LockLost { .. }))]
            ),
            "{ev:?}"
        );
        assert!(l.is_lost());
    }
}
