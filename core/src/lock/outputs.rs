//! What every phase shares: the quorum, the commands it queues (fan-outs,
//! compensating releases, reclaims; built only here, so each script's
//! KEYS/ARGV layout is written once) and the events they have in common.

use super::rounds::{Round, RoundKind, Sent};
use super::timers::Timer;
use super::{Lock, State};
use crate::scripts::Role;
use crate::{Bytes, Command, CommandId, Error, Event, Instant, Kind, Script, Ttl, Wait};

impl Lock {
    /// How many nodes every round's verdict is counted against: a
    /// majority, more for a semaphore (see [`Kind::quorum`]).
    pub(super) fn quorum(&self) -> usize {
        self.config.kind.quorum(self.config.nodes)
    }

    /// Fire-and-forget releases to every node that may hold our key. `wake`:
    /// also notify waiters (we may have held the lock, not just a minority).
    pub(super) fn compensate(&mut self, now: Instant, wake: bool) {
        let _ = now;
        for node in 0..self.config.nodes {
            if std::mem::take(&mut self.on_node[node].maybe_holding) {
                // The release leaves the line there too.
                self.on_node[node].queued = false;
                let id = self.push_release(node, wake);
                self.cleanup.push(id);
            }
        }
    }

    /// Whether an attempt stands in the fair line when it is turned away:
    /// a kind that queues, unless it tries once (then it only looks).
    pub(super) fn waits_in_line(&self) -> bool {
        self.config.kind.queues() && self.config.wait != Wait::TRY_ONCE
    }

    /// An acquire that ends without the lease (failed, cancelled) leaves
    /// the fair line wherever it may stand in it, waking the waiters
    /// behind it (a permit it was first in line for is theirs now).
    pub(super) fn leave_line(&mut self) {
        for node in 0..self.config.nodes {
            if std::mem::take(&mut self.on_node[node].queued) {
                let id = self.push_release(node, true);
                self.cleanup.push(id);
            }
        }
    }

    /// A release or cancel ends in `Done` only once nothing is in flight, so
    /// the acquire failure it may carry is reported after the cleanup.
    pub(super) fn settle_if_idle(&mut self) {
        if self.state == State::Releasing && self.round.is_none() && self.cleanup.is_empty() {
            if let Some(error) = self.failure.take() {
                self.events.push_back(Event::AcquireFailed(*error));
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
        let mut sent = Vec::with_capacity(self.config.nodes);
        for node in (0..self.config.nodes).filter(|&n| to(n)) {
            let id = match kind {
                RoundKind::WriteBack { fence, .. } => self.push_raise_fence(node, fence),
                RoundKind::Release => self.push_release(node, true),
                RoundKind::Handoff => self.push_handoff(node),
                RoundKind::Attempt => self.push_attempt(node, ttl),
                RoundKind::Extend { .. } => self.push_extend(node, ttl),
            };
            sent.push(Sent {
                id,
                node,
                outcome: None,
            });
        }
        Round {
            kind,
            sent_at: now,
            ttl,
            sent,
        }
    }

    /// `[token, ttl_ms, fence_ttl_ms]`: what every acquire and extend starts with.
    fn token_and_ttls(&self, ttl: Ttl) -> Vec<Bytes> {
        vec![
            self.token_arg(),
            Bytes::decimal(ttl.as_millis()),
            self.fence_ttl(ttl),
        ]
    }

    /// The lease's token, shared (a secret: only ever an argument).
    fn token_arg(&self) -> Bytes {
        self.config.token.0.clone().into()
    }

    /// The line's keys, for the kinds that have one.
    fn line(&self) -> [Bytes; 2] {
        let line = self.config.keys.line().expect("keys_for the kind");
        [line.waiting.clone(), line.until.clone()]
    }

    /// A read-write lock's other side.
    fn other(&self) -> Bytes {
        self.config.keys.other().expect("keys_for the kind")
    }

    fn push_attempt(&mut self, node: usize, ttl: Ttl) -> CommandId {
        let keys = &self.config.keys;
        let (lock, fence) = (keys.lock(), keys.fence());
        let mut args = self.token_and_ttls(ttl);
        // How long a place in the line lasts; 0: a try-once never takes one.
        let patience = || match self.waits_in_line() {
            true => Kind::line_patience(&self.config.retry).as_millis() as u64,
            false => 0,
        };
        let (script, keys) = match self.config.kind {
            Kind::Mutex => (Script::Acquire, vec![lock, fence]),
            Kind::FairMutex => {
                args.push(Bytes::decimal(patience()));
                let [waiting, until] = self.line();
                (Script::FairMutexAcquire, vec![lock, waiting, until, fence])
            }
            Kind::Semaphore(permits) => {
                args.extend([
                    Bytes::decimal(permits.get().into()),
                    Bytes::decimal(patience()),
                ]);
                let [waiting, until] = self.line();
                (Script::FairAcquire, vec![lock, waiting, until, fence])
            }
            Kind::Write => {
                args.extend([Bytes::decimal(1), Bytes::decimal(patience())]);
                let [waiting, until] = self.line();
                (
                    Script::FairAcquire,
                    vec![lock, waiting, until, fence, self.other()],
                )
            }
            Kind::Read => {
                let [waiting, until] = self.line();
                (
                    Script::ReadAcquire,
                    vec![lock, waiting, until, fence, self.other()],
                )
            }
        };
        self.push(node, script, keys, args)
    }

    fn push_extend(&mut self, node: usize, ttl: Ttl) -> CommandId {
        let keys = vec![self.config.keys.lock(), self.config.keys.fence()];
        let script = match self.config.kind.is_mutex() {
            true => Script::Extend,
            false => Script::HoldersExtend,
        };
        let args = self.token_and_ttls(ttl);
        self.push(node, script, keys, args)
    }

    /// The fence key's PX: the lock's ttl plus the grace.
    fn fence_ttl(&self, ttl: Ttl) -> Bytes {
        Bytes::decimal(self.config.fence_grace.fence_ttl(ttl))
    }

    pub(super) fn push_reclaim(&mut self, node: usize, ttl: Ttl, fence: u64) -> CommandId {
        let mut keys = vec![self.config.keys.lock(), self.config.keys.fence()];
        let mut args = vec![
            self.token_arg(),
            Bytes::decimal(ttl.as_millis()),
            Bytes::decimal(fence),
            self.fence_ttl(ttl),
        ];
        // The most holders the set may have, and the side that must be empty.
        let limit = match self.config.kind {
            Kind::Mutex | Kind::FairMutex => {
                return self.push(node, Script::Reclaim, keys, args);
            }
            Kind::Semaphore(permits) => permits.get(),
            Kind::Read => 0,
            Kind::Write => 1,
        };
        args.push(Bytes::decimal(limit.into()));
        if matches!(self.config.kind, Kind::Read | Kind::Write) {
            keys.push(self.other());
        }
        self.push(node, Script::HoldersReclaim, keys, args)
    }

    /// `wake`: pass the channel, so waiters are woken.
    fn push_release(&mut self, node: usize, wake: bool) -> CommandId {
        // At its final size: the lock, the line (kinds that queue), the
        // channel (when waking).
        let mut keys = Vec::with_capacity(4);
        keys.push(self.config.keys.lock());
        if self.config.kind != Kind::Mutex {
            keys.extend(self.line());
        }
        if wake {
            keys.push(self.config.keys.channel());
        }
        let script = match self.config.kind {
            Kind::Mutex => Script::Release,
            Kind::FairMutex => Script::FairMutexRelease,
            _ => Script::HoldersRelease,
        };
        let token = self.token_arg();
        self.push(node, script, keys, vec![token])
    }

    /// A mutex's release that hands the lock to the successor: its token,
    /// its ttl and its fence key's ttl, as its own acquire would send them
    /// (`release_to` refuses the other kinds).
    fn push_handoff(&mut self, node: usize) -> CommandId {
        let successor = self
            .successor
            .as_ref()
            .expect("a handoff round has a successor");
        let keys = vec![
            self.config.keys.lock(),
            self.config.keys.fence(),
            self.config.keys.channel(),
        ];
        let args = vec![
            self.token_arg(),
            successor.token.0.clone().into(),
            Bytes::decimal(successor.ttl.as_millis()),
            Bytes::decimal(successor.fence_grace.fence_ttl(successor.ttl)),
        ];
        self.push(node, Script::Handoff, keys, args)
    }

    fn push_raise_fence(&mut self, node: usize, fence: u64) -> CommandId {
        let keys = vec![self.config.keys.fence()];
        let args = vec![Bytes::decimal(fence), self.fence_ttl(self.config.ttl)];
        self.push(node, Script::RaiseFence, keys, args)
    }

    fn push(
        &mut self,
        node: usize,
        script: Script,
        keys: Vec<Bytes>,
        args: Vec<Bytes>,
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
                .replicas()
                .filter(|_| matches!(script.role(), Role::Acquire | Role::Extend | Role::Handoff)),
        });
        id
    }
}
