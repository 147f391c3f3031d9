//! What every phase shares: the quorum, the commands it queues (fan-outs,
//! compensating releases, reclaims; built only here, so each script's
//! KEYS/ARGV layout is written once) and the events they have in common.

use super::rounds::{Round, RoundKind};
use super::timers::Timer;
use super::{Lock, State};
use crate::{Command, CommandId, Error, Event, Instant, Script, Ttl};

impl Lock {
    /// A majority of the nodes: what every round's verdict is counted against.
    pub(super) fn quorum(&self) -> usize {
        self.config.nodes / 2 + 1
    }

    /// Fire-and-forget releases to every node that may hold our key. `wake`:
    /// also notify waiters (we may have held the lock, not just a minority).
    pub(super) fn compensate(&mut self, now: Instant, wake: bool) {
        let _ = now;
        for node in 0..self.config.nodes {
            if std::mem::take(&mut self.maybe_holding[node]) {
                let id = self.push_release(node, wake);
                self.cleanup.push(id);
            }
        }
    }

    /// A release or cancel ends in `Done` only once nothing is in flight, so
    /// the acquire failure it may carry is reported after the cleanup.
    pub(super) fn settle_if_idle(&mut self) {
        if self.state == State::Releasing && self.round.is_none() && self.cleanup.is_empty() {
            if let Some(error) = self.failure.take() {
                self.events.push_back(Event::AcquireFailed(error));
            }
            self.state = State::Done;
        }
    }

    pub(super) fn unsubscribe(&mut self) {
        if std::mem::take(&mut self.subscribed) {
            self.events.push_back(Event::Unsubscribe);
        }
    }

    /// Lost is reported once, and stops the renewals.
    pub(super) fn mark_lost(&mut self) {
        if !self.lost {
            self.lost = true;
            self.timers.stop(Timer::Renew);
            self.events.push_back(Event::Lost);
        }
    }

    pub(super) fn lock_lost(&self) -> Error {
        Error::LockLost {
            name: self.config.name.clone(),
        }
    }

    /// Queue `kind`'s script for every node `to` picks; the round waits for
    /// all their replies.
    pub(super) fn fan_out(
        &mut self,
        now: Instant,
        kind: RoundKind,
        ttl: Ttl,
        to: impl Fn(usize) -> bool,
    ) -> Round {
        let script = kind.script();
        let mut ids = Vec::new();
        for node in (0..self.config.nodes).filter(|&n| to(n)) {
            let id = match kind {
                RoundKind::WriteBack { fence, .. } => self.push_raise_fence(node, fence),
                RoundKind::Release => self.push_release(node, true),
                RoundKind::Handoff => self.push_handoff(node),
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
            Script::Handoff => unreachable!("built by push_handoff"),
            Script::RaiseFence => unreachable!("built by push_raise_fence"),
            Script::Reclaim => unreachable!("built by push_reclaim"),
            Script::Inspect | Script::ForceRelease => {
                unreachable!("not a lock's command: see inspect.rs / force.rs")
            }
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

    pub(super) fn push_reclaim(&mut self, node: usize, ttl: Ttl, fence: u64) -> CommandId {
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

    /// A release that hands the lock to the successor: its token, its ttl
    /// and its fence key's ttl, as its own acquire would send them.
    fn push_handoff(&mut self, node: usize) -> CommandId {
        let successor = self
            .successor
            .as_ref()
            .expect("a handoff round has a successor");
        let keys = vec![
            self.config.keys.lock.clone(),
            self.config.keys.fence.clone(),
            self.config.keys.channel.clone(),
        ];
        let args = vec![
            self.config.token.0.as_bytes().to_vec(),
            successor.token.0.as_bytes().to_vec(),
            successor.ttl.as_millis().to_string().into_bytes(),
            successor
                .fence_grace
                .fence_ttl(successor.ttl)
                .to_string()
                .into_bytes(),
        ];
        self.push(node, Script::Handoff, keys, args)
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
            // A handoff grants the successor: it waits like an acquire.
            wait_replicas: self
                .replicas
                .filter(|_| matches!(script, Script::Acquire | Script::Extend | Script::Handoff)),
        });
        id
    }
}
