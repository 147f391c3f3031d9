//! Holding: extends and auto-renewals, what their replies mean for the
//! lease, and putting the key back where a node lost it.

use super::outbox::{Outbox, Queued};

use super::outcomes::Outcome;
use super::rounds::{Round, RoundKind, Sent};
use super::timers::{renew_interval, Timer};
use super::Lock;
use crate::{Error, Event, Instant};

impl Lock {
    /// Arm the next renewal at `at`, if renewal is still wanted then:
    /// `stop_renewing` was not called and `max_hold` does not end before it.
    /// Otherwise nothing renews the lease any more and it runs out at its
    /// validity end (the expiry timer reports it lost).
    pub(super) fn schedule_renewal(&mut self, at: Instant) {
        if self.renewing && at < self.renew_until {
            self.timers.set(Timer::Renew, at);
        } else {
            self.timers.stop(Timer::Renew);
        }
    }

    /// The renewal timer fired: renew, unless `max_hold` ran out meanwhile
    /// (a late wake-up).
    pub(super) fn renew(&mut self, now: Instant) {
        if self.is_renewing(now) {
            self.send_extend(now, 0);
        } else {
            self.timers.stop(Timer::Renew);
        }
    }

    pub(super) fn send_extend(&mut self, now: Instant, callers: usize) {
        // The PEXPIRE may run whatever the reply says, so from the send on a
        // shorter ttl shortens what the holder may rely on; success then
        // sets the new window.
        let window = self
            .current_ttl
            .as_duration()
            .saturating_sub(self.current_ttl.drift());
        if let Some(until) = self.timers.get(Timer::Expiry) {
            self.timers.set(Timer::Expiry, until.min(now + window));
        }
        self.extend = Some(Box::new(self.fan_out(
            now,
            RoundKind::Extend { callers },
            self.current_ttl,
            |_| true,
        )));
    }

    /// Every caller waiting on this round gets its outcome.
    pub(super) fn finish_extend(&mut self, now: Instant, round: Round) {
        let RoundKind::Extend { callers } = round.kind else {
            unreachable!("only extends here")
        };
        let lost = self.lock_lost();
        let tell = |events: &mut Outbox<Queued>, event: Event| {
            events.extend(std::iter::repeat_n(event, callers));
        };
        let yes = round
            .outcomes()
            .filter(|o| matches!(o, Some(Outcome::Yes(_))))
            .count();
        let no = round
            .outcomes()
            .filter(|o| matches!(o, Some(Outcome::No(_))))
            .count();
        let valid_until = round.valid_until();
        let quorum = self.quorum();
        // The branch below that extends (`unreplicated` needs yes < quorum).
        let renewed = !self.lost && yes >= quorum && valid_until > now;
        if callers == 0 {
            // An auto-renewal (a caller's extend is the caller's to count).
            let count = match renewed {
                true => &mut self.stats.renewals,
                false => &mut self.stats.failed_renewals,
            };
            *count = count.saturating_add(1);
        }
        if self.lost {
            // Lost while the extend was in flight (validity ran out): too late.
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else if round
            .unreplicated(yes, quorum, self.replicas(), &self.config.name)
            .is_some()
        {
            // Extended, but not on enough replicas: a failover could lose it,
            // so it no longer counts as held. Give it back.
            self.mark_lost();
            self.on_node.iter_mut().for_each(|n| n.maybe_holding = true);
            self.compensate(now, true);
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else if yes >= quorum && valid_until > now {
            self.timers.set(Timer::Expiry, valid_until);
            self.schedule_renewal(round.sent_at + renew_interval(round.ttl));
            self.reclaim(&round);
            tell(&mut self.events, Event::Extended { valid_until });
        } else if no > self.config.nodes - quorum || (yes >= quorum) {
            // The lock is someone else's (or expired) on a majority.
            self.mark_lost();
            tell(&mut self.events, Event::ExtendFailed(lost.clone()));
        } else {
            // Redis trouble, not a verdict: the lease stays valid until its
            // deadline; a renewal tries again soon. A node that said our key
            // is gone gets it back now: the node that answered yes and one
            // that is down can leave the round short of a majority (our
            // acquire lost the race on a third node, then a node of the
            // granting majority restarted before the first renewal), and
            // only the key put back lets the retry find one.
            if self
                .timers
                .get(Timer::Expiry)
                .is_some_and(|until| until > now)
            {
                self.reclaim(&round);
            }
            let message = round
                .first_failure()
                .unwrap_or_else(|| "no majority answered".to_owned());
            tell(
                &mut self.events,
                Event::ExtendFailed(Error::redis(Some(&self.config.name), message)),
            );
            let retry = (self.current_ttl.as_duration() / 10).min(self.config.retry.max_delay());
            self.schedule_renewal(now + retry);
        }
    }

    /// The lease is valid, so no other client can hold a majority before
    /// it ends: put our token back (set-if-absent) where a node lost it
    /// (restarted empty, the key expired while the node was away, or our
    /// acquire lost the race there), or every node restarting in turn would
    /// leave us below quorum. An extend still counts only the nodes that
    /// have our token when it runs.
    fn reclaim(&mut self, round: &Round) {
        let Some(fence) = self.fence() else { return };
        for &Sent {
            node, ref outcome, ..
        } in &round.sent
        {
            if matches!(outcome, Some(Outcome::No(_))) {
                let id = self.push_reclaim(node, round.ttl, fence);
                self.on_node[node].maybe_holding = true;
                self.cleanup.push(id);
            }
        }
    }
}
