//! Releasing: what a release round's replies mean (with a handoff, for the
//! successor too), and telling extend callers still waiting that the lease
//! is gone.

use super::handoff::Handoff;
use super::outcomes::Outcome;
use super::rounds::{Round, RoundKind};
use super::Lock;
use crate::{Error, Event};

impl Lock {
    /// Released on a majority, or why not; nothing may hold our key after.
    /// A handoff round first reports what it did for the successor.
    pub(super) fn finish_release(&mut self, round: Round) {
        let yes = round
            .outcomes()
            .filter(|o| o.as_ref().is_some_and(Outcome::released))
            .count();
        if round.outcomes().any(|o| matches!(o, Some(Outcome::Yes(2)))) {
            self.events.push_back(Event::NotPublished);
        }
        let result = if self.lost {
            Err(self.lock_lost())
        } else if yes >= self.quorum() {
            Ok(())
        } else if let Some(message) = round.first_failure() {
            Err(Error::redis(Some(&self.config.name), message))
        } else {
            // Expired or taken over before we released: the lease was lost.
            self.mark_lost();
            Err(self.lock_lost())
        };
        self.on_node
            .iter_mut()
            .for_each(|n| n.maybe_holding = false);
        if round.kind == RoundKind::Handoff {
            let successor = self.successor.take().expect("a handoff round has one");
            let handoff = Handoff::from_round(&successor, &round);
            self.events.push_back(Event::Handoff(handoff));
        }
        self.events.push_back(Event::Released(result));
        self.settle_if_idle();
    }

    /// Extend calls still waiting when the lease is released or dropped
    /// learn that it is no longer held.
    pub(super) fn abandon_extend(&mut self) {
        if let Some(Round {
            kind: RoundKind::Extend { callers },
            ..
        }) = self.extend.take().map(|round| *round)
        {
            let lost = self.lock_lost();
            self.events
                .extend(std::iter::repeat_n(Event::ExtendFailed(lost), callers));
        }
    }
}
