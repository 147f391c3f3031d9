//! A round: one fan-out of a script to the nodes, waiting for the replies
//! that decide it, and the tallies the phases judge it by.

use super::outcomes::Outcome;
use crate::replicas;
use crate::scripts::Role;
use crate::{CommandId, Error, Instant, LockName, Reply, Ttl, WaitReplicas};

/// One fan-out of a script to the nodes, waiting for every reply unless a
/// majority's already decide it (`is_decided`).
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
        /// Granting nodes already at `fence` (a node count: 4 bytes keep
        /// the kind, and every lock's round, 8 smaller).
        already: u32,
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

    /// Whether `id` is one of this round's commands, still unanswered.
    pub(super) fn awaits(&self, id: CommandId) -> bool {
        self.sent.iter().any(|s| s.id == id && s.outcome.is_none())
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

    /// Whether the replies so far settle the round. Every reply, except
    /// where a majority's answer can no longer be changed by the rest
    /// (Redlock): an attempt a majority granted with one fence (no
    /// write-back to spare), a write-back that brought a majority to its
    /// fence, a release a majority confirmed. Then a node that stalls
    /// without refusing does not hold the call; its late reply is ignored
    /// (its command is no longer awaited, see `Lock::awaits`), and since it
    /// may hold our key it still gets the lease's release.
    pub(super) fn is_decided(&self, quorum: usize) -> bool {
        let majority = match self.kind {
            // Only when the majority's fences agree: a write-back it would
            // need might be spared by the nodes still to answer.
            RoundKind::Attempt => {
                let top = self.granted().map(|(_, f)| f).max();
                self.granted().filter(|&(_, f)| Some(f) == top).count()
            }
            RoundKind::WriteBack { fence, already } => already as usize + self.raised(fence),
            RoundKind::Release => self
                .outcomes()
                .filter(|o| o.as_ref().is_some_and(Outcome::released))
                .count(),
            // Every answer is used: an extend's "not ours" puts the key
            // back there (`reclaim`), a handoff's says which nodes hold what.
            RoundKind::Extend { .. } | RoundKind::Handoff => 0,
        };
        majority >= quorum || self.outcomes().all(Option::is_some)
    }

    /// The nodes of a write-back round that now hold `fence` or more.
    pub(super) fn raised(&self, fence: u64) -> usize {
        self.outcomes()
            .filter(|o| matches!(o, Some(Outcome::Yes(f)) if *f >= fence))
            .count()
    }

    /// The nodes that granted in an attempt round, with their fences (read
    /// as needed, not collected: a round decides without allocating).
    pub(super) fn granted(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.sent.iter().filter_map(|s| match s.outcome {
            Some(Outcome::Yes(fence)) => Some((s.node, fence)),
            _ => None,
        })
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
