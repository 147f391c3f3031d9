//! Several mutexes at once, all or nothing ([`AcquireMany`]): the plan and
//! the attempts of `client.acquire_many(names)`.
//!
//! The names are put in one canonical order (cluster slot, then name bytes)
//! and cut into groups whose keys share a slot (on a single Redis, one group
//! for all). Each group is one `acquire_many.lua` round trip that sets every
//! lock of the group or none. Groups are taken one after the other in that
//! fixed order, the same for every client: nobody holds a later group while
//! waiting for an earlier one, so two acquires of overlapping sets cannot
//! deadlock. A group found held gives back the groups already taken
//! (compensating releases, answered before anything else is sent), then
//! waits like a mutex acquire: woken by the held lock's release
//! notification, or at its remaining TTL, until the wait runs out.
//!
//! When every group is taken, each name's lease is an ordinary mutex lease:
//! [`ManyEvent::Acquired`] carries one [`Handoff`] per name for its own
//! [`crate::Lock`] (`accept_handoff`, with the same `now`), so extend,
//! release, renewal and loss are the mutex's own. Redlock (a majority over
//! independent nodes) and `replicas=N` are refused: one script per group
//! cannot be all or nothing across several nodes' independent answers.

use std::collections::VecDeque;
use std::time::Duration;

use crate::keys::hash_slot;
use crate::{
    Bytes, Command, CommandId, Error, Handoff, Instant, Kind, LockConfig, LockName, Reply, Script,
    Wait,
};

/// The most names one acquire takes (the script's keys grow with them).
pub const MAX_MANY_NAMES: usize = 64;

/// What the caller of [`AcquireMany`] must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManyEvent {
    /// Listen for release notifications on this channel (instead of any
    /// earlier one), and call `handle_wakeup` when one comes or once the
    /// subscription is active.
    Subscribe(Bytes),
    /// Every name is held: one handoff per name, in the caller's order, for
    /// that name's own lock (`Lock::accept_handoff` with this `now`).
    Acquired(Vec<Handoff>),
    /// The acquire failed (NotAcquired, Redis); every compensating release
    /// is answered already. A cancelled acquire reports nothing.
    Failed(Error),
}

/// A group taken in this attempt: its index, its send, its fences.
struct Taken {
    group: usize,
    sent_at: Instant,
    fences: Vec<u64>,
}

/// One `acquire_many` of the mutexes `members` (a sans-IO run loop like
/// [`crate::Lock`]'s: an input, drain `poll_command` and `poll_event`, wait
/// for `poll_timeout`, a reply or a wake-up; stop when `is_done`).
pub struct AcquireMany {
    members: Vec<LockConfig>,
    /// Member indexes per group, groups in the canonical order.
    groups: Vec<Vec<usize>>,
    taken: Vec<Taken>,
    /// The group attempt in flight: group, command, send.
    attempt: Option<(usize, CommandId, Instant)>,
    cleanup: Vec<CommandId>,
    commands: VecDeque<Command>,
    events: VecDeque<ManyEvent>,
    next_id: u64,
    rng: u64,
    deadline: Option<Instant>,
    retry_at: Option<Instant>,
    /// The next attempt is due but waits for `cleanup` to drain: a
    /// compensating release overtaken by our own new attempt would delete
    /// what that attempt set.
    retry_due: bool,
    /// The held member we last listened for.
    listening: Option<usize>,
    woken: bool,
    cancelled: bool,
    /// The outcome, reported once `cleanup` is empty (`None` inside: over
    /// without a report, after a cancel).
    outcome: Option<Option<ManyEvent>>,
    reported: bool,
}

impl std::fmt::Debug for AcquireMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcquireMany")
            .field("names", &self.names().collect::<Vec<_>>())
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl AcquireMany {
    /// Plan the acquire of `members`, mutex leases built as for `acquire`
    /// (same ttl, wait and retry policy; each its own token). `cluster`:
    /// the keys live on a Redis Cluster (one group per slot; otherwise one
    /// group). `InvalidArgument`, nothing sent, for no names, more than
    /// [`MAX_MANY_NAMES`], a name given twice, Redlock (`nodes` > 1) or
    /// `replicas` (see the module docs).
    pub fn new(
        members: Vec<LockConfig>,
        cluster: bool,
        replicas: bool,
        seed: u64,
    ) -> Result<Self, Error> {
        let Some(first) = members.first() else {
            return Err(Error::invalid("acquire_many needs at least one lock name"));
        };
        if members.len() > MAX_MANY_NAMES {
            return Err(Error::invalid(format!(
                "acquire_many takes at most {MAX_MANY_NAMES} names, not {}",
                members.len()
            )));
        }
        if first.nodes > 1 {
            return Err(Error::invalid(
                "acquire_many needs a single Redis (or a cluster): with Redlock one \
                 script cannot take several locks all or nothing",
            ));
        }
        if replicas {
            return Err(Error::invalid(
                "acquire_many does not support replicas=N: a set refused by its \
                 replicas could not be all or nothing",
            ));
        }
        let (ttl, wait, grace) = (first.ttl, first.wait, first.fence_grace);
        if members.iter().any(|m| {
            m.kind != Kind::Mutex || m.ttl != ttl || m.wait != wait || m.fence_grace != grace
        }) {
            return Err(Error::invalid(
                "acquire_many takes mutexes with one ttl, wait and fence grace",
            ));
        }
        let slot = |m: &LockConfig| {
            if cluster {
                hash_slot(&m.keys.lock())
            } else {
                0
            }
        };
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by(|&a, &b| {
            (slot(&members[a]), &members[a].name).cmp(&(slot(&members[b]), &members[b].name))
        });
        if let Some(w) = order
            .windows(2)
            .find(|w| members[w[0]].name == members[w[1]].name)
        {
            return Err(Error::invalid(format!(
                "lock name {} is given twice to acquire_many",
                members[w[0]].name
            )));
        }
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in order {
            match groups.last_mut() {
                Some(g) if slot(&members[g[0]]) == slot(&members[i]) => g.push(i),
                _ => groups.push(vec![i]),
            }
        }
        Ok(AcquireMany {
            members,
            groups,
            taken: Vec::new(),
            attempt: None,
            cleanup: Vec::new(),
            commands: VecDeque::new(),
            events: VecDeque::new(),
            next_id: 0,
            rng: seed | 1,
            deadline: None,
            retry_at: None,
            retry_due: false,
            listening: None,
            woken: false,
            cancelled: false,
            outcome: None,
            reported: false,
        })
    }

    /// The names, in the caller's order.
    pub fn names(&self) -> impl Iterator<Item = &LockName> {
        self.members.iter().map(|m| &m.name)
    }

    /// The members' lock configs, in the caller's order (each name's lease
    /// is a `Lock::new` of its config).
    pub fn members(&self) -> &[LockConfig] {
        &self.members
    }

    /// How many round trips one attempt takes (groups of names in one slot).
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Start: the first group's attempt.
    pub fn start(&mut self, now: Instant) {
        if let Wait::Bounded(wait) = self.members[0].wait {
            self.deadline = Some(now + wait);
        }
        self.send_attempt(now, 0);
    }

    #[must_use]
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<ManyEvent> {
        self.events.pop_front()
    }

    /// When to call `handle_timeout` (while waiting between attempts).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.outcome.is_some() || self.attempt.is_some() {
            return None;
        }
        match (self.retry_at, self.deadline) {
            (Some(r), Some(d)) => Some(r.min(d)),
            (r, d) => r.or(d),
        }
    }

    /// Nothing left to do: the outcome reported (or cancelled), every
    /// command answered.
    pub fn is_done(&self) -> bool {
        self.outcome.is_some() && self.attempt.is_none() && self.cleanup.is_empty()
    }

    /// The caller left: give back whatever an attempt in flight sets, then
    /// be done, reporting nothing. Keep driving until `is_done`.
    pub fn cancel(&mut self, now: Instant) {
        let _ = now;
        self.cancelled = true;
        if self.attempt.is_none() && self.outcome.is_none() {
            // Waiting between attempts: nothing of ours is set.
            self.finish(None);
        }
    }

    /// A release notification on the channel asked for (or the
    /// subscription became active): try again now.
    pub fn handle_wakeup(&mut self, now: Instant) {
        if self.outcome.is_some() {
            return;
        }
        if self.attempt.is_some() {
            self.woken = true;
        } else {
            self.retry(now);
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.outcome.is_some() || self.attempt.is_some() {
            return;
        }
        if self.retry_at.is_some_and(|r| now >= r) {
            self.retry_at = None;
            self.retry(now);
        } else if self.deadline.is_some_and(|d| now >= d) {
            let held = self.listening.unwrap_or(0);
            self.finish(Some(ManyEvent::Failed(Error::not_acquired(
                &self.members[held].name,
            ))));
        }
    }

    pub fn handle_reply(&mut self, now: Instant, id: CommandId, reply: Reply) {
        if let Some(at) = self.cleanup.iter().position(|&c| c == id) {
            // A compensating release: its answer changes nothing, only that
            // it is answered.
            self.cleanup.swap_remove(at);
            self.settle(now);
            return;
        }
        let Some((group, _, sent_at)) = self.attempt.filter(|a| a.1 == id) else {
            return;
        };
        self.attempt = None;
        let size = self.groups[group].len();
        match read(&reply, size) {
            Read::Set(fences) => {
                self.taken.push(Taken {
                    group,
                    sent_at,
                    fences,
                });
                if self.cancelled {
                    self.give_back(None);
                    self.finish(None);
                } else if group + 1 < self.groups.len() {
                    self.send_attempt(now, group + 1);
                } else {
                    self.granted(now);
                }
            }
            Read::Held { pttl, at } => {
                self.give_back(None);
                if self.cancelled {
                    self.finish(None);
                } else {
                    let held = self.groups[group][at];
                    self.wait_for_retry(now, held, pttl);
                }
            }
            Read::Refused(message) => {
                // The script refused before writing anything.
                self.give_back(None);
                let failed = (!self.cancelled).then(|| {
                    let name = &self.members[self.groups[group][0]].name;
                    ManyEvent::Failed(Error::redis(Some(name), message))
                });
                self.finish(failed);
            }
            Read::Unknown(message) => {
                // It may have set the group: give it back too.
                self.give_back(Some(group));
                let failed = (!self.cancelled).then(|| {
                    let name = &self.members[self.groups[group][0]].name;
                    ManyEvent::Failed(Error::redis(Some(name), message))
                });
                self.finish(failed);
            }
        }
        self.settle(now);
    }

    /// Every group is set. Valid while the earliest send's validity lasts
    /// (each lease counts from its own group's send); a round that took
    /// longer than that gives everything back and tries again.
    fn granted(&mut self, now: Instant) {
        let ttl = self.members[0].ttl;
        let earliest = self.taken[0].sent_at;
        if earliest + ttl.as_duration().saturating_sub(ttl.drift()) <= now {
            self.give_back(None);
            if self.deadline.is_some_and(|d| now >= d) {
                let error = Error::not_acquired(&self.members[0].name);
                return self.finish(Some(ManyEvent::Failed(error)));
            }
            self.retry_at = Some(now);
            return;
        }
        let mut handoffs: Vec<Option<Handoff>> = vec![None; self.members.len()];
        for taken in std::mem::take(&mut self.taken) {
            for (&member, &fence) in self.groups[taken.group].iter().zip(&taken.fences) {
                handoffs[member] = Some(Handoff::granted(
                    &self.members[member],
                    taken.sent_at,
                    fence,
                ));
            }
        }
        let handoffs = handoffs
            .into_iter()
            .map(|h| h.expect("every member is in one group"))
            .collect();
        self.finish(Some(ManyEvent::Acquired(handoffs)));
    }

    fn wait_for_retry(&mut self, now: Instant, held: usize, pttl: i64) {
        if self.deadline.is_some_and(|d| now >= d) {
            let error = Error::not_acquired(&self.members[held].name);
            return self.finish(Some(ManyEvent::Failed(error)));
        }
        if self.listening != Some(held) {
            self.listening = Some(held);
            self.events
                .push_back(ManyEvent::Subscribe(self.members[held].keys.channel()));
        }
        if std::mem::take(&mut self.woken) {
            self.retry_at = Some(now);
            return;
        }
        let policy = self.members[0].retry;
        let base = match pttl {
            p if p >= 0 => Duration::from_millis(p as u64),
            -1 => policy.max_delay(),
            _ => Duration::ZERO,
        };
        let jitter = self.random_up_to(policy.jitter());
        self.retry_at = Some(now + base.min(policy.max_delay()) + jitter);
    }

    /// An attempt is due: now, or once the compensating releases are in.
    fn retry(&mut self, now: Instant) {
        self.retry_at = None;
        self.woken = false;
        if self.cleanup.is_empty() {
            self.send_attempt(now, 0);
        } else {
            self.retry_due = true;
        }
    }

    /// After a reply: report the outcome or start the due attempt once
    /// nothing is left in flight.
    fn settle(&mut self, now: Instant) {
        if !self.cleanup.is_empty() {
            return;
        }
        if self.retry_at.is_some_and(|r| r <= now) && self.outcome.is_none() {
            self.retry_due = true;
            self.retry_at = None;
        }
        if std::mem::take(&mut self.retry_due) && self.outcome.is_none() {
            self.send_attempt(now, 0);
        }
        if let Some(outcome) = &self.outcome {
            if !self.reported {
                self.reported = true;
                if let Some(event) = outcome.clone() {
                    self.events.push_back(event);
                }
            }
        }
    }

    fn finish(&mut self, event: Option<ManyEvent>) {
        self.retry_at = None;
        self.outcome = Some(event);
        if self.cleanup.is_empty() && self.attempt.is_none() && !self.reported {
            self.reported = true;
            if let Some(event) = self.outcome.clone().flatten() {
                self.events.push_back(event);
            }
        }
    }

    /// Release every lock of the groups taken in this attempt (and of
    /// `maybe`, a group whose outcome is unknown), waking their waiters:
    /// the locks were held there for a moment.
    fn give_back(&mut self, maybe: Option<usize>) {
        let mut groups: Vec<usize> = self.taken.drain(..).map(|t| t.group).collect();
        groups.extend(maybe);
        for group in groups {
            for member in self.groups[group].clone() {
                let config = &self.members[member];
                let keys = vec![config.keys.lock(), config.keys.channel()];
                let args = vec![config.token.0.clone().into()];
                let id = self.push(Script::Release, keys, args);
                self.cleanup.push(id);
            }
        }
    }

    fn send_attempt(&mut self, now: Instant, group: usize) {
        let first = &self.members[0];
        let mut keys = Vec::new();
        let mut args = vec![
            Bytes::decimal(first.ttl.as_millis()),
            Bytes::decimal(first.fence_grace.fence_ttl(first.ttl)),
        ];
        for &member in &self.groups[group] {
            let config = &self.members[member];
            keys.push(config.keys.lock());
            keys.push(config.keys.fence());
            args.push(config.token.0.clone().into());
        }
        let id = self.push(Script::AcquireMany, keys, args);
        self.attempt = Some((group, id, now));
    }

    fn push(&mut self, script: Script, keys: Vec<Bytes>, args: Vec<Bytes>) -> CommandId {
        self.next_id += 1;
        let id = CommandId(self.next_id);
        self.commands.push_back(Command {
            id,
            node: 0,
            script,
            keys,
            args,
            wait_replicas: None,
        });
        id
    }

    /// xorshift64: spreads retries (the seed comes from the caller).
    fn random_up_to(&mut self, max: Duration) -> Duration {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let ms = max.as_millis() as u64;
        Duration::from_millis(if ms == 0 { 0 } else { self.rng % (ms + 1) })
    }
}

/// What a group's reply says.
enum Read {
    Set(Vec<u64>),
    /// Held: the longest PTTL, at this index of the group.
    Held {
        pttl: i64,
        at: usize,
    },
    /// The server refused the script (it wrote nothing).
    Refused(String),
    /// It may have run.
    Unknown(String),
}

fn read(reply: &Reply, size: usize) -> Read {
    let fence = |r: &Reply| match r {
        Reply::Bulk(d) => std::str::from_utf8(d)
            .ok()?
            .parse::<u64>()
            .ok()
            .filter(|&f| f > 0),
        Reply::Int(n) => u64::try_from(*n).ok().filter(|&f| f > 0),
        _ => None,
    };
    match reply {
        Reply::Error(message) => Read::Refused(message.clone()),
        Reply::Unknown(message) => Read::Unknown(message.clone()),
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(1), fences @ ..] if fences.len() == size => {
                match fences.iter().map(fence).collect::<Option<Vec<u64>>>() {
                    Some(fences) => Read::Set(fences),
                    None => Read::Unknown("unexpected reply to the acquire_many script".into()),
                }
            }
            [Reply::Int(0), Reply::Int(pttl), Reply::Int(at)]
                if *at >= 1 && (*at as usize) <= size =>
            {
                Read::Held {
                    pttl: *pttl,
                    at: *at as usize - 1,
                }
            }
            _ => Read::Unknown("unexpected reply to the acquire_many script".into()),
        },
        _ => Read::Unknown("unexpected reply to the acquire_many script".into()),
    }
}
