//! Acquiring: attempts, the fencing write-back, retry timing, and the
//! grant or failure they end in.

use std::time::Duration;

use super::outcomes::Outcome;
use super::rounds::{Round, RoundKind};
use super::timers::{renew_interval, Timer};
use super::{Lock, State};
use crate::{Error, Event, Instant, NotAcquiredReason};

impl Lock {
    fn deadline(&self) -> Option<Instant> {
        self.timers.get(Timer::Deadline)
    }

    pub(super) fn start_attempt(&mut self, now: Instant) {
        self.timers.stop(Timer::Retry);
        self.woken = false;
        self.on_node.iter_mut().for_each(|n| n.maybe_holding = true);
        if self.waits_in_line() {
            self.on_node.iter_mut().for_each(|n| n.queued = true);
        }
        self.round = Some(self.fan_out(now, RoundKind::Attempt, self.config.ttl, |_| true));
    }

    pub(super) fn finish_attempt(&mut self, now: Instant, round: Round) {
        let quorum = self.quorum();
        if self.grant_majority(now, &round) {
            return;
        }
        let yes = round.granted().count();
        if let Some(error) =
            round.unreplicated(yes, self.quorum(), self.replicas(), &self.config.name)
        {
            // Ours, but not on enough replicas to survive a failover: give
            // it back (waking waiters: it was held) and say so.
            self.compensate(now, true);
            return self.fail_acquire(error);
        }
        // No usable majority: give back what we may hold, then retry or fail.
        self.compensate(now, false);
        let failures: Vec<&str> = round
            .outcomes()
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
        if yes >= quorum {
            // Granted, but the round took longer than the validity: retrying
            // at once would only repeat that; back off instead.
            return self.back_off(now);
        }
        self.unreachable_rounds = 0;
        self.stats.contended_attempts = self.stats.contended_attempts.saturating_add(1);
        let holder_pttl = round
            .outcomes()
            .filter_map(|o| match o {
                Some(Outcome::No(pttl)) => Some(*pttl),
                _ => None,
            })
            .min_by_key(|&p| if p < 0 { i64::MAX } else { p });
        self.wait_for_retry(now, holder_pttl);
    }

    /// A majority granted and validity is left: the lease is granted, or
    /// will be once the fence write-back round is done. False otherwise.
    fn grant_majority(&mut self, now: Instant, round: &Round) -> bool {
        let quorum = self.quorum();
        let valid_until = round.valid_until();
        // Redlock needs positive validity; a single Redis hands over what it
        // granted, however short (the lease then reports itself lost at once).
        let yes = round.granted().count();
        if yes < quorum || (valid_until <= now && self.config.nodes > 1) {
            return false;
        }
        self.timers.set(Timer::Expiry, valid_until);
        let max = round.granted().map(|(_, f)| f).max().unwrap_or(0);
        // Empty in the common case (every node issued the same fence): no
        // allocation.
        let lagging: Vec<usize> = round
            .granted()
            .filter(|&(_, f)| f < max)
            .map(|(n, _)| n)
            .collect();
        if yes - lagging.len() >= quorum {
            self.grant(round.sent_at, max);
        } else {
            let kind = RoundKind::WriteBack {
                fence: max,
                already: u32::try_from(yes - lagging.len()).unwrap_or(u32::MAX),
            };
            let mut write_back = self.fan_out(now, kind, round.ttl, |node| lagging.contains(&node));
            // Validity and renewal still count from the attempt's send.
            write_back.sent_at = round.sent_at;
            self.round = Some(write_back);
        }
        true
    }

    /// The handoff a release made for us, taken as our first attempt's
    /// round (validity from the release's send): a majority handed over is
    /// a grant (after the same write-back as an acquire when fewer than a
    /// majority reported the highest fence). Anything less gives back what
    /// the handoff may have set, waking waiters (the lock was held there),
    /// and makes a normal attempt, as if there had been no handoff.
    pub(super) fn finish_handoff(&mut self, now: Instant, round: Round) {
        if self.grant_majority(now, &round) {
            return;
        }
        self.compensate(now, true);
        self.start_attempt(now);
    }

    pub(super) fn not_acquired(&self) -> Error {
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
            .min(self.config.retry.max_delay());
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
            Some(-1) => policy.max_delay(),
            _ => Duration::ZERO,
        };
        let jitter = self.random_up_to(policy.jitter());
        self.timers
            .set(Timer::Retry, now + base.min(policy.max_delay()) + jitter);
    }

    pub(super) fn finish_write_back(
        &mut self,
        now: Instant,
        round: Round,
        fence: u64,
        already: usize,
    ) {
        let raised = round.raised(fence);
        let valid = self.timers.get(Timer::Expiry).is_some_and(|v| v > now);
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
        // A place left where a node said no goes with the lease's release
        // (which leaves the line on every node) or expires.
        self.on_node.iter_mut().for_each(|n| n.queued = false);
        self.fence = fence;
        self.state = State::Held;
        self.stats.granted_attempt_sent = Some(sent_at);
        if self.renewing {
            if let Some(max_hold) = self.config.max_hold {
                self.renew_until = sent_at + max_hold.as_duration();
            }
        }
        self.schedule_renewal(sent_at + renew_interval(self.current_ttl));
        let valid_until = self.timers.get(Timer::Expiry).expect("set before granting");
        self.events
            .push_back(Event::Acquired { fence, valid_until });
    }

    /// The failure is reported once the compensating releases are answered,
    /// so a caller that gets it (and may close the client) leaves nothing
    /// behind in Redis.
    pub(super) fn fail_acquire(&mut self, error: Error) {
        self.unsubscribe();
        self.timers.stop(Timer::Retry);
        self.failure = Some(Box::new(error));
        self.state = State::Releasing;
        self.leave_line();
        self.settle_if_idle();
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
