//! Handing the lock to the next waiter of the same client inside the release
//! (handoff.lua): one round trip instead of a release and then the waiter's
//! acquire. The releaser's lock sends it for a [`Successor`]; the outcome
//! for the waiter travels as a [`Handoff`] to the waiter's own lock, which
//! takes it as the result of its first attempt (`Lock::accept_handoff`), or
//! gives back whatever it was handed if its caller left meanwhile
//! (`Lock::refuse_handoff`).

use super::outcomes::Outcome;
use super::rounds::Round;
use super::LockConfig;
use crate::{FenceGrace, Instant, Kind, Token, Ttl};

/// The waiter a release hands the lock to: its token and ttl (and the fence
/// grace, a client setting), taken from its [`LockConfig`] when it lines up
/// behind the holder. Its token is a secret: `Debug` does not show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Successor {
    pub(super) token: Token,
    pub(super) ttl: Ttl,
    pub(super) fence_grace: FenceGrace,
}

impl Successor {
    /// The successor the lock built from `config` would be.
    #[must_use]
    pub fn new(config: &LockConfig) -> Self {
        Successor {
            token: config.token.clone(),
            ttl: config.ttl,
            fence_grace: config.fence_grace,
        }
    }
}

/// What a release with handoff did for its successor, node by node: the
/// input the successor's lock is driven with instead of its first attempt.
/// Every `Lock::release_to` ends in exactly one (`Event::Handoff`), which
/// must reach the successor's lock: its key may be set on some nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    pub(super) token: Token,
    pub(super) ttl: Ttl,
    /// When the release was sent: the successor's validity counts from
    /// there, as an acquire's from its own send.
    pub(super) sent_at: Instant,
    /// Per node, what the handoff means for the successor's key, read as an
    /// acquire's outcome: granted with a fence, not set, unknown, ...
    pub(super) outcomes: Vec<Outcome>,
}

impl Handoff {
    /// A release round's outcomes, seen from the successor.
    pub(super) fn from_round(successor: &Successor, round: &Round) -> Self {
        Handoff {
            token: successor.token.clone(),
            ttl: successor.ttl,
            sent_at: round.sent_at,
            outcomes: round
                .outcomes()
                .map(|o| o.as_ref().map_or(Outcome::No(-2), Outcome::for_successor))
                .collect(),
        }
    }

    /// Nothing was sent (the lease was already released): the successor's
    /// key is set nowhere, and it makes a normal attempt.
    pub(super) fn nothing(successor: &Successor, now: Instant, nodes: usize) -> Self {
        Handoff {
            token: successor.token.clone(),
            ttl: successor.ttl,
            sent_at: now,
            outcomes: vec![Outcome::No(-2); nodes],
        }
    }

    /// A lock set for this lease by another script on its only node, with
    /// `fence`, sent at `sent_at`: an acquire of several names at once
    /// (`many.rs`) hands each name's lease over this way, so from here on
    /// it is an ordinary mutex lease (`Lock::accept_handoff` grants it, or
    /// `Lock::refuse_handoff` releases it).
    pub(crate) fn granted(config: &LockConfig, sent_at: Instant, fence: u64) -> Self {
        Handoff {
            token: config.token.clone(),
            ttl: config.ttl,
            sent_at,
            outcomes: vec![Outcome::Yes(fence)],
        }
    }

    /// How many nodes handed the lock over (with a fence): a majority of
    /// them is what makes the successor's lease, validity permitting.
    #[must_use]
    pub fn handed_over(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Yes(_)))
            .count()
    }

    /// Whether this handoff is for the lease `config` describes.
    pub(super) fn is_for(&self, config: &LockConfig) -> bool {
        config.kind == Kind::Mutex
            && self.token == config.token
            && self.ttl == config.ttl
            && self.outcomes.len() == config.nodes
    }
}
