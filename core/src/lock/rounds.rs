//! A round: one fan-out of a script to the nodes, waiting for every reply,
//! and the tallies the phases judge it by.

use super::outcomes::Outcome;
use crate::replicas;
use crate::scripts::Role;
use crate::{CommandId, Error, Instant, LockName, Reply, Ttl, WaitReplicas};

/// One fan-out of a script to the nodes, waiting for every reply.
#[derive(Debug)]
pub(super) struct Round {
    pub(super) kind: RoundKind,
    pub(super) sent_at: Instant,
    pub(super) ttl: Ttl,
    /// Each command sent, with its node and outcome: one vector, not one
    /// per field (one allocation per round).
    pub(super) sent: Vec<Sent>,
}

/// A command of a round.
#[derive(Debug)]
pub(super) struct Sent {
    pub(super) id: CommandId,
    /// The node it went to.
    pub(super) node: usize,
    /// `None` until its reply.
    pub(super) outcome: Option<Outcome>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RoundKind {
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
    /// A release that hands the lock to `Lock::successor` (handoff.lua).
    Handoff,
}

impl RoundKind {
    /// What its scripts do, whatever the lease's kind: how to read a reply.
    pub(super) fn role(self) -> Role {
        match self {
            RoundKind::Attempt => Role::Acquire,
            RoundKind::WriteBack { .. } => Role::RaiseFence,
            RoundKind::Extend { .. } => Role::Extend,
            RoundKind::Release => Role::Release,
            RoundKind::Handoff => Role::Handoff,
        }
    }
}

impl Round {
    /// Where `id` is among this round's commands, if it is one of them.
    pub(super) fn position(&self, id: CommandId) -> Option<usize> {
        self.sent.iter().position(|s| s.id == id)
    }

    /// Note the outcome of the command at `at` (the first reply counts; a
    /// repeat changes nothing).
    pub(super) fn record(&mut self, at: usize, reply: Reply, replicas: Option<WaitReplicas>) {
        let outcome = &mut self.sent[at].outcome;
        if outcome.is_none() {
            *outcome = Some(Outcome::read(self.kind.role(), reply, replicas));
        }
    }

    /// Each command's outcome, in the order sent.
    pub(super) fn outcomes(&self) -> impl Iterator<Item = &Option<Outcome>> {
        self.sent.iter().map(|s| &s.outcome)
    }

    pub(super) fn is_complete(&self) -> bool {
        self.outcomes().all(Option::is_some)
    }

    /// How long a yes from this round lets the holder rely on the lock:
    /// counted from the send, minus the clock drift allowance.
    pub(super) fn valid_until(&self) -> Instant {
        self.sent_at + self.ttl.as_duration().saturating_sub(self.ttl.drift())
    }

    /// The first refusal or unknown outcome's message, for the error.
    pub(super) fn first_failure(&self) -> Option<String> {
        self.outcomes().find_map(|o| match o {
            Some(Outcome::Failed(m) | Outcome::Unknown(m)) => Some(m.clone()),
            _ => None,
        })
    }

    /// With `replicas=N`: the round fell short of a majority of replicated
    /// yeses only because of missing replica acknowledgements. The error
    /// says how many acknowledged (the best node's count).
    pub(super) fn unreplicated(
        &self,
        yes: usize,
        quorum: usize,
        replicas: Option<WaitReplicas>,
        name: &LockName,
    ) -> Option<Error> {
        let wanted = replicas?.replicas;
        let short: Vec<u32> = self
            .outcomes()
            .filter_map(|o| match o {
                Some(Outcome::Unreplicated { acked }) => Some(*acked),
                _ => None,
            })
            .collect();
        if yes >= quorum || yes + short.len() < quorum {
            return None;
        }
        let acked = short.iter().copied().max().unwrap_or(0);
        Some(replicas::too_few(name, acked, wanted))
    }
}
