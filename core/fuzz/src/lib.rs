//! The fuzz harness for `fencelock_core::Lock`, shared by the libFuzzer
//! target (`cargo fuzz run lock_sequences`) and the stable loop
//! (`cargo run --bin stable_loop`).
//!
//! Input bytes become a lock configuration (1..=5 nodes, TTL, wait bound,
//! auto-renewal) and a bounded sequence of operations: the application calls
//! (`acquire`, `extend`, `release`, `release_to`, `cancel`, and starting
//! from a handoff another lease's release made: `accept_handoff`,
//! `refuse_handoff`), the inputs (`handle_reply` to
//! an outstanding command or to any id at all, duplicates included,
//! `handle_timeout`, `handle_wakeup`) and the passage of time. Replies are
//! arbitrary: grants with any counter, "held" with any PTTL, 0/1, errors,
//! unknown outcomes, garbage.
//!
//! After every step the harness checks the invariants below against a
//! conservative model of what the nodes may hold (it believes the replies):
//!
//! 1. Command ids are unique and increasing, nodes are in range, and the
//!    token never appears in `Debug` of a command, an event or the lock.
//! 2. Misuse is reported as `InvalidArgument`, never a panic.
//! 3. `Acquired` comes at most once, never after a cancel or a failed
//!    acquire, with fence >= 1 equal to a counter some node returned, and a
//!    `valid_until` no later than an acquire's (or the handoff's) send
//!    time + ttl - drift.
//! 4. SAFETY: whenever `valid_for(now) > 0`, a majority of nodes is known
//!    to still hold our key at `now` (a grant or successful extend sent at
//!    `t` with ttl `d` keeps the key until at least `t + d`; any release we
//!    sent may have removed it).
//! 5. `Lost` comes at most once, and after it `valid_for` is zero.
//! 6. `Done` has nothing in flight and no timer.
//! 7. CLEANUP: after a final `cancel` and answering everything, the lock
//!    reaches `Done`, and every node where an acquire or a handoff to us may
//!    have set our key (granted, unknown outcome, or unanswered) got a
//!    release sent after it.
//! 8. Determinism: the same input yields the same trace.

use std::collections::BTreeMap;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use fencelock_core::{
    Command, CommandId, Error, Event, FenceGrace, Instant, KeySpace, Kind, Lock, LockConfig,
    LockName, Reply, RetryPolicy, Script, State, Successor, Token, Ttl, Wait,
};

const TOKEN: &str = "5ec12e7a-f00d-4bad-9cab-70ce17e5ec12";
/// Another lease of the same client: the releaser handing the lock to us,
/// or the successor we hand it to.
const OTHER_TOKEN: &str = "0fe4c0de-1234-4bad-9cab-70ce17e5ec12";
const MAX_OPS: usize = 256;
/// Whether a malformed reply to an acquire must be compensated like an
/// unknown outcome: yes (finding F1, fixed in the core in a759acc); set
/// `FENCELOCK_FUZZ_LENIENT_GARBAGE=1` to check an older core without it.
static STRICT_GARBAGE_FLAG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

#[derive(Arbitrary, Debug, Clone, Copy)]
enum WaitChoice {
    Forever,
    TryOnce,
    Bounded(u16),
}

#[derive(Arbitrary, Debug, Clone)]
enum ReplyChoice {
    Granted(u16),
    GrantedHuge(u64),
    GrantedInt(i64),
    Held(i32),
    Int(i8),
    Nil,
    Error,
    Unknown,
    Bulk(u8),
    Array(Vec<i8>),
}

/// The fence of a granting acquire reply, read as the core reads it.
fn granted_fence(items: &[Reply]) -> Option<u64> {
    match items {
        [Reply::Int(1), Reply::Bulk(digits)] => std::str::from_utf8(digits)
            .ok()?
            .parse()
            .ok()
            .filter(|&f| f > 0),
        [Reply::Int(1), Reply::Int(f)] if *f > 0 => Some(*f as u64),
        _ => None,
    }
}

impl ReplyChoice {
    fn to_reply(&self) -> Reply {
        match self {
            // The scripts send fences as decimal strings (exact u64s).
            ReplyChoice::Granted(f) => {
                Reply::Array(vec![Reply::Int(1), Reply::Bulk(f.to_string().into())])
            }
            ReplyChoice::GrantedHuge(f) => {
                Reply::Array(vec![Reply::Int(1), Reply::Bulk(f.to_string().into())])
            }
            ReplyChoice::GrantedInt(f) => Reply::Array(vec![Reply::Int(1), Reply::Int(*f)]),
            ReplyChoice::Held(p) => Reply::Array(vec![Reply::Int(0), Reply::Int(i64::from(*p))]),
            ReplyChoice::Int(n) => Reply::Int(i64::from(*n)),
            ReplyChoice::Nil => Reply::Nil,
            ReplyChoice::Error => Reply::Error("WRONGTYPE fuzz".into()),
            ReplyChoice::Unknown => Reply::Unknown("connection lost (fuzz)".into()),
            ReplyChoice::Bulk(b) => Reply::Bulk(vec![*b]),
            ReplyChoice::Array(items) => {
                Reply::Array(items.iter().map(|&i| Reply::Int(i64::from(i))).collect())
            }
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Advance(u16),
    Acquire,
    Extend(Option<u16>),
    Release,
    /// Release, handing the lock to another lease of the client.
    ReleaseTo,
    /// Start from a handoff another lease's release made for us: its
    /// per-node replies (cycled), then `accept_handoff`, or
    /// `refuse_handoff` if `refuse` (our caller left meanwhile).
    TakeHandoff {
        replies: Vec<ReplyChoice>,
        refuse: bool,
    },
    Cancel,
    Wakeup,
    Timeout,
    /// Jump to `poll_timeout()` (if any) and fire it.
    FireTimer,
    /// Answer the `pick`-th outstanding command.
    Reply {
        pick: u8,
        reply: ReplyChoice,
    },
    /// Answer any id: stale, duplicate or never issued.
    ReplyAnyId {
        id: u8,
        reply: ReplyChoice,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    nodes: u8,
    ttl_ms: u16,
    wait: WaitChoice,
    auto_renew: bool,
    seed: u64,
    ops: Vec<Op>,
}

#[derive(Debug, Clone)]
struct Sent {
    at: Instant,
    command: Command,
}

/// The harness state: the lock plus the model of what the nodes may hold.
struct Harness {
    lock: Lock,
    config: LockConfig,
    nodes: usize,
    now: Instant,
    next_id: Option<u64>,
    /// Commands sent and not answered yet (by id).
    outstanding: BTreeMap<u64, Sent>,
    /// Every command ever sent (by id).
    sent: BTreeMap<u64, Sent>,
    /// Per node: our key is surely there until this instant.
    holds_until: Vec<Option<Instant>>,
    /// Per node: the id of the last extend or release sent (each may set
    /// the key's expiry or delete it whatever its reply says).
    last_mutation: Vec<Option<u64>>,
    /// Per node: acquire command ids that may have set our key and were not
    /// followed by a release to that node.
    maybe_set: Vec<Vec<u64>>,
    /// Per node: a handoff to us may have set our key there, and no release
    /// of ours (nor a refusal by the node) followed.
    handoff_set: Vec<bool>,
    /// When the releaser that handed us the lock sent its release.
    handoff_sent: Option<Instant>,
    /// Counters returned by grants.
    granted_fences: Vec<u64>,
    acquired: bool,
    acquire_over: bool,
    cancelled: bool,
    lost_events: usize,
    trace: Vec<String>,
}

fn strict_extend() -> bool {
    static FLAG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FLAG.get_or_init(|| std::env::var_os("FENCELOCK_FUZZ_STRICT_EXTEND").is_some())
}

fn strict_garbage() -> bool {
    *STRICT_GARBAGE_FLAG
        .get_or_init(|| std::env::var_os("FENCELOCK_FUZZ_LENIENT_GARBAGE").is_none())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Harness {
    fn new(input: &Input) -> Harness {
        let nodes = usize::from(input.nodes % 5) + 1;
        let ttl = Ttl::from_millis(u64::from(input.ttl_ms).max(fencelock_core::MIN_TTL_MS))
            .expect("3..=65535 ms is valid");
        let name = LockName::new("fuzz").expect("valid name");
        let wait = match input.wait {
            WaitChoice::Forever => Wait::Forever,
            WaitChoice::TryOnce => Wait::TRY_ONCE,
            WaitChoice::Bounded(w) => Wait::Bounded(ms(u64::from(w))),
        };
        let config = LockConfig {
            kind: Kind::Mutex,
            keys: KeySpace::default().keys(&name),
            name,
            token: Token(TOKEN.into()),
            ttl,
            wait,
            nodes,
            auto_renew: input.auto_renew,
            max_hold: None,
            retry: RetryPolicy::default(),
            fence_grace: FenceGrace::DEFAULT,
            seed: input.seed,
        };
        Harness {
            lock: Lock::new(config.clone()),
            config,
            nodes,
            now: Instant::from_epoch(ms(1_000)),
            next_id: None,
            outstanding: BTreeMap::new(),
            sent: BTreeMap::new(),
            holds_until: vec![None; nodes],
            last_mutation: vec![None; nodes],
            maybe_set: vec![Vec::new(); nodes],
            handoff_set: vec![false; nodes],
            handoff_sent: None,
            granted_fences: Vec::new(),
            acquired: false,
            acquire_over: false,
            cancelled: false,
            lost_events: 0,
            trace: Vec::new(),
        }
    }

    fn quorum(&self) -> usize {
        self.nodes / 2 + 1
    }

    fn misuse_ok(&mut self, what: &str, result: Result<(), Error>) {
        match result {
            Ok(()) => self.trace.push(format!("{what} ok")),
            Err(Error::InvalidArgument(m)) => {
                assert!(!m.contains(TOKEN), "token in a misuse message");
                self.trace.push(format!("{what} misuse"));
            }
            Err(e) => panic!("{what} returned {e:?}: misuse must be InvalidArgument"),
        }
    }

    fn step(&mut self, op: &Op) {
        let now = self.now;
        match op {
            Op::Advance(d) => self.now = self.now + ms(u64::from(*d)),
            Op::Acquire => {
                let r = self.lock.acquire(now);
                self.misuse_ok("acquire", r);
            }
            Op::Extend(ttl) => {
                let ttl = ttl.map(|t| {
                    Ttl::from_millis(u64::from(t).max(fencelock_core::MIN_TTL_MS)).expect("valid")
                });
                let r = self.lock.extend(now, ttl);
                self.misuse_ok("extend", r);
            }
            Op::Release => {
                let r = self.lock.release(now);
                self.misuse_ok("release", r);
            }
            Op::ReleaseTo => {
                let other = LockConfig {
                    token: Token(OTHER_TOKEN.into()),
                    ..self.config.clone()
                };
                let r = self.lock.release_to(now, Successor::new(&other));
                self.misuse_ok("release_to", r);
            }
            Op::TakeHandoff { replies, refuse } => self.take_handoff(replies, *refuse),
            Op::Cancel => {
                self.cancelled = true;
                self.lock.cancel(now);
            }
            Op::Wakeup => self.lock.handle_wakeup(now),
            Op::Timeout => self.lock.handle_timeout(now),
            Op::FireTimer => {
                if let Some(at) = self.lock.poll_timeout() {
                    assert!(at < Instant::from_epoch(Duration::from_secs(1 << 40)));
                    if at > self.now {
                        self.now = at;
                    }
                    self.lock.handle_timeout(self.now);
                }
            }
            Op::Reply { pick, reply } => {
                if !self.outstanding.is_empty() {
                    let at = usize::from(*pick) % self.outstanding.len();
                    let id = *self.outstanding.keys().nth(at).expect("in range");
                    self.answer(id, reply.to_reply());
                }
            }
            Op::ReplyAnyId { id, reply } => {
                let id = u64::from(*id);
                if self.outstanding.contains_key(&id) {
                    self.answer(id, reply.to_reply());
                } else {
                    // Stale/duplicate/unknown id: the core must ignore it;
                    // the model learns nothing from it.
                    self.lock.handle_reply(now, CommandId(id), reply.to_reply());
                }
            }
        }
        self.drain();
    }

    /// Another lease of the client, holding the lock, releases it to us: its
    /// handoff commands get `replies`; the model learns where our key may be
    /// (and surely is) from them, as the core must.
    fn take_handoff(&mut self, replies: &[ReplyChoice], refuse: bool) {
        let now = self.now;
        let mut releaser = Lock::new(LockConfig {
            token: Token(OTHER_TOKEN.into()),
            auto_renew: false,
            ..self.config.clone()
        });
        releaser.acquire(now).expect("idle");
        while let Some(c) = releaser.poll_command() {
            let granted = ReplyChoice::Granted(1).to_reply();
            releaser.handle_reply(now, c.id, granted);
        }
        while releaser.poll_event().is_some() {}
        releaser
            .release_to(now, Successor::new(&self.config))
            .expect("held");
        // What the model learns, applied only if the lock takes the handoff.
        let mut set = vec![false; self.nodes];
        let mut fences = Vec::new();
        let mut at = 0;
        while let Some(c) = releaser.poll_command() {
            assert_eq!(c.script, Script::Handoff);
            let choice = replies.get(at % replies.len().max(1)).cloned();
            at += 1;
            let reply = choice.map_or(Reply::Unknown("no reply".into()), |r| r.to_reply());
            match &reply {
                // Handed over: our key lives until at least send + ttl.
                Reply::Array(items) if granted_fence(items).is_some() => {
                    fences.push((c.node, granted_fence(items).expect("matched")));
                    set[c.node] = true;
                }
                // Not ours, released (our key never set), or refused.
                Reply::Array(items)
                    if matches!(
                        items.as_slice(),
                        [Reply::Int(0), Reply::Int(_)] | [Reply::Int(2), Reply::Int(0 | 1)]
                    ) => {}
                Reply::Error(_) => {}
                // Unknown or unreadable: it may have run.
                _ => set[c.node] = true,
            }
            releaser.handle_reply(now, c.id, reply);
        }
        let handoff = std::iter::from_fn(|| releaser.poll_event())
            .find_map(|e| match e {
                Event::Handoff(h) => Some(h),
                _ => None,
            })
            .expect("release_to ends in a handoff");
        let r = if refuse {
            self.lock.refuse_handoff(now, handoff)
        } else {
            self.lock.accept_handoff(now, handoff)
        };
        if r.is_ok() {
            self.cancelled |= refuse;
            self.handoff_sent = Some(now);
            self.handoff_set = set;
            for (node, fence) in fences {
                self.granted_fences.push(fence);
                self.holds_until[node] = Some(now + self.config.ttl.as_duration());
            }
        }
        self.misuse_ok("take handoff", r);
    }

    /// Feed a reply to an outstanding command, updating the model first.
    fn answer(&mut self, id: u64, reply: Reply) {
        let sent = self.outstanding.remove(&id).expect("outstanding");
        let node = sent.command.node;
        let ttl_ms = |c: &Command| -> u64 {
            std::str::from_utf8(&c.args[1])
                .expect("ttl arg is ascii")
                .parse()
                .expect("ttl arg is a number")
        };
        match sent.command.script {
            Script::Acquire => match &reply {
                Reply::Array(items) if granted_fence(items).is_some() => {
                    self.granted_fences
                        .push(granted_fence(items).expect("matched"));
                    // Unless a release/extend sent after it changed the key.
                    if self.last_mutation[node].is_none_or(|m| m < id) {
                        let until = sent.at + ms(ttl_ms(&sent.command));
                        self.holds_until[node] = Some(until);
                    }
                }
                Reply::Unknown(_) => {}
                // "Held" or a server error: the script did not set our key.
                // Held also says a handoff's key of ours is not there (the
                // acquire would have taken it back as ours).
                Reply::Array(items) if matches!(items.as_slice(), [Reply::Int(0), _]) => {
                    self.maybe_set[node].retain(|&a| a != id);
                    self.handoff_set[node] = false;
                }
                Reply::Error(_) => self.maybe_set[node].retain(|&a| a != id),
                // A reply of the wrong shape: the script may have run, so it
                // needs a compensating release like an unknown outcome
                // (finding F1; lenient mode accepts the old behaviour).
                _ if !strict_garbage() => self.maybe_set[node].retain(|&a| a != id),
                _ => {}
            },
            Script::Extend => {
                // A 1 says the key was ours at execution, which set its
                // expiry to (execution + ttl) >= (send + ttl), unless a later
                // extend or release was sent since.
                if reply == Reply::Int(1) && self.last_mutation[node] == Some(id) {
                    let until = sent.at + ms(ttl_ms(&sent.command));
                    let cur = self.holds_until[node];
                    self.holds_until[node] = Some(cur.map_or(until, |c| c.max(until)));
                } else if reply == Reply::Int(0)
                    && (self.last_mutation[node] == Some(id) || strict_extend())
                {
                    // "Not yours": the lock is gone. The core only reads the
                    // reply of the newest extend (a newer one supersedes it);
                    // an older extend's 0 is ignored by default (finding F4:
                    // under the core's no-data-loss assumption it cannot
                    // happen while valid). FENCELOCK_FUZZ_STRICT_EXTEND=1
                    // demands that it ends the validity too.
                    self.holds_until[node] = None;
                }
            }
            Script::Reclaim => {
                // Like an extend's 1: the key is ours until send + ttl.
                if reply == Reply::Int(1) && self.last_mutation[node] == Some(id) {
                    let until = sent.at + ms(ttl_ms(&sent.command));
                    let cur = self.holds_until[node];
                    self.holds_until[node] = Some(cur.map_or(until, |c| c.max(until)));
                }
            }
            Script::Release
            | Script::Handoff
            | Script::RaiseFence
            | Script::Inspect
            | Script::ForceRelease
            | Script::FencedSet => {}
            // Another kind's scripts (semaphore, read-write lock, fair
            // mutex): never a plain mutex's
            // (`drain` refuses them first).
            Script::FairAcquire
            | Script::ReadAcquire
            | Script::HoldersExtend
            | Script::HoldersRelease
            | Script::HoldersReclaim
            | Script::HoldersInspect
            | Script::FairMutexAcquire
            | Script::FairMutexRelease
            // Several mutexes at once: never a lease's own command.
            | Script::AcquireMany => {}
        }
        let now = self.now;
        self.lock.handle_reply(now, CommandId(id), reply);
    }

    fn drain(&mut self) {
        let now = self.now;
        while let Some(c) = self.lock.poll_command() {
            if let Some(prev) = self.next_id {
                assert!(c.id.0 > prev, "command ids must increase");
            }
            self.next_id = Some(c.id.0);
            assert!(c.node < self.nodes, "node out of range");
            let dbg = format!("{c:?}");
            assert!(!dbg.contains(TOKEN), "token in Debug of a command");
            match c.script {
                Script::Acquire => {
                    assert!(
                        !self.acquired,
                        "acquire command after the lease was granted"
                    );
                    self.maybe_set[c.node].push(c.id.0);
                }
                // A handoff deletes (or replaces) our key exactly as a
                // release does.
                Script::Release | Script::Handoff => {
                    // Emission order is execution order on one connection:
                    // everything acquired earlier on this node is gone.
                    self.maybe_set[c.node].retain(|&a| a > c.id.0);
                    self.handoff_set[c.node] = false;
                    self.holds_until[c.node] = None;
                    self.last_mutation[c.node] = Some(c.id.0);
                    if c.script == Script::Handoff {
                        let successor = &*c.args[1];
                        assert_eq!(successor, OTHER_TOKEN.as_bytes(), "the successor's token");
                    }
                }
                Script::Extend => {
                    assert!(self.acquired, "extend before the lease was granted");
                    // It may run whatever its reply: from now on the key is
                    // only sure to live until min(before, send + new ttl).
                    let ttl: u64 = std::str::from_utf8(&c.args[1])
                        .expect("ascii")
                        .parse()
                        .expect("number");
                    let until = now + ms(ttl);
                    let cur = self.holds_until[c.node];
                    self.holds_until[c.node] = cur.map(|h| h.min(until));
                    self.last_mutation[c.node] = Some(c.id.0);
                }
                Script::Reclaim => {
                    assert!(self.acquired, "reclaim before the lease was granted");
                    assert!(self.nodes > 1, "reclaim on a single node");
                    // It may set our key (so it needs a release if we stop)
                    // and resets its expiry to send + ttl.
                    let ttl: u64 = std::str::from_utf8(&c.args[1])
                        .expect("ascii")
                        .parse()
                        .expect("number");
                    self.maybe_set[c.node].push(c.id.0);
                    let cur = self.holds_until[c.node];
                    self.holds_until[c.node] = cur.map(|h| h.min(now + ms(ttl)));
                    self.last_mutation[c.node] = Some(c.id.0);
                }
                Script::RaiseFence => {
                    let f: u64 = std::str::from_utf8(&c.args[0])
                        .expect("ascii")
                        .parse()
                        .expect("number");
                    assert!(
                        self.granted_fences.contains(&f),
                        "raise to a fence never granted"
                    );
                }
                // Read-only, and sent by `Inspect`, never by a lock.
                Script::Inspect => panic!("a lock sent an inspect command"),
                Script::ForceRelease => panic!("a lock sent a force-release command"),
                other => panic!("a mutex sent {other:?}, not a mutex's script"),
            }
            self.trace.push(dbg);
            let sent = Sent {
                at: now,
                command: c,
            };
            self.sent.insert(sent.command.id.0, sent.clone());
            self.outstanding.insert(sent.command.id.0, sent);
        }
        while let Some(e) = self.lock.poll_event() {
            let dbg = format!("{e:?}");
            assert!(!dbg.contains(TOKEN), "token in Debug of an event");
            match &e {
                Event::Acquired { fence, valid_until } => {
                    assert!(!self.acquired, "Acquired twice");
                    assert!(!self.acquire_over, "Acquired after AcquireFailed");
                    assert!(!self.cancelled, "Acquired after cancel");
                    assert!(*fence >= 1, "fence 0");
                    assert!(
                        self.granted_fences.contains(fence),
                        "fence never granted by a node"
                    );
                    let ttl = self.lock.ttl();
                    let latest_send = self
                        .sent
                        .values()
                        .filter(|s| s.command.script == Script::Acquire)
                        .map(|s| s.at)
                        .chain(self.handoff_sent)
                        .max()
                        .expect("an acquire or a handoff was sent");
                    assert!(
                        *valid_until <= latest_send + ttl.as_duration().saturating_sub(ttl.drift()),
                        "validity longer than the key lives"
                    );
                    if self.nodes > 1 {
                        assert!(*valid_until > now, "Redlock lease granted without validity");
                    }
                    self.acquired = true;
                }
                Event::AcquireFailed(err) => {
                    assert!(!self.acquired, "AcquireFailed after Acquired");
                    assert!(!matches!(
                        err,
                        Error::InvalidArgument(_) | Error::LockLost { .. }
                    ));
                    self.acquire_over = true;
                }
                Event::Lost => {
                    self.lost_events += 1;
                    assert_eq!(self.lost_events, 1, "Lost reported twice");
                }
                Event::Extended { valid_until } => {
                    assert!(*valid_until <= now + ms(65_535), "extended too far");
                }
                _ => {}
            }
            self.trace.push(dbg);
        }
        self.check_state();
    }

    fn check_state(&mut self) {
        let now = self.now;
        let valid = self.lock.valid_for(now);
        if !valid.is_zero() {
            assert_eq!(self.lock.state(), State::Held, "valid but not held");
            assert!(!self.lock.is_lost(), "valid but lost");
            assert!(self.acquired, "valid without Acquired");
            let holding = self
                .holds_until
                .iter()
                .filter(|h| h.is_some_and(|h| h > now))
                .count();
            assert!(
                holding >= self.quorum(),
                "SAFETY: lease claims {valid:?} of validity but only {holding} of {} nodes surely hold the key",
                self.nodes
            );
        }
        if self.lost_events > 0 {
            assert!(valid.is_zero(), "valid after Lost");
            assert!(self.lock.is_lost());
        }
        if self.lock.state() == State::Done {
            assert_eq!(self.lock.poll_timeout(), None, "Done with a timer");
        }
        let dbg = format!("{:?}", self.lock);
        assert!(!dbg.contains(TOKEN), "token in Debug of the lock");
    }

    /// Cancel, then answer everything (unknown outcomes: the worst case)
    /// and fire timers until the lock settles.
    fn finish(&mut self) {
        self.lock.cancel(self.now);
        self.cancelled = true;
        self.drain();
        // Up to MAX_OPS commands may be outstanding, each answer may cause a
        // few more: bounded, but well above that.
        for _ in 0..(8 * MAX_OPS) {
            if let Some(&id) = self.outstanding.keys().next() {
                self.answer(id, Reply::Unknown("final drain".into()));
                self.drain();
            } else if let Some(at) = self.lock.poll_timeout() {
                self.now = self.now.max(at);
                self.lock.handle_timeout(self.now);
                self.drain();
            } else {
                break;
            }
        }
        assert!(
            self.outstanding.is_empty(),
            "commands still coming after cancel"
        );
        assert_eq!(
            self.lock.state(),
            State::Done,
            "not Done after cancel and drain"
        );
        for (node, ids) in self.maybe_set.iter().enumerate() {
            assert!(
                ids.is_empty(),
                "CLEANUP: node {node} may still hold our key (acquire ids {ids:?}) with no release after it"
            );
            assert!(
                !self.handoff_set[node],
                "CLEANUP: node {node} may still hold the key a handoff set, with no release after it"
            );
        }
    }
}

fn run_trace(input: &Input) -> Vec<String> {
    let verbose = std::env::var_os("FENCELOCK_FUZZ_VERBOSE").is_some();
    let mut h = Harness::new(input);
    if verbose {
        eprintln!(
            "nodes={} ttl={:?} wait={:?} auto_renew={}",
            h.nodes,
            h.lock.ttl(),
            input.wait,
            input.auto_renew
        );
    }
    for op in input.ops.iter().take(MAX_OPS) {
        if verbose {
            eprintln!("t={:?} {op:?}", h.now.since_epoch());
        }
        let before = h.trace.len();
        h.step(op);
        if verbose {
            for line in &h.trace[before..] {
                eprintln!("    -> {line}");
            }
        }
    }
    if verbose {
        eprintln!("t={:?} final cancel + drain", h.now.since_epoch());
    }
    h.finish();
    h.trace
}

/// One fuzz case. Panics on an invariant violation.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else {
        return;
    };
    let first = run_trace(&input);
    let second = run_trace(&input);
    assert_eq!(first, second, "the core is not deterministic");
}

#[cfg(test)]
mod tests {
    //! Regressions: the two core bugs this harness (and the simulator)
    //! found, as fixed op sequences. Each fails on the core before a759acc.
    use super::*;

    fn input(nodes: u8, ttl_ms: u16, ops: Vec<Op>) -> Input {
        Input {
            nodes: nodes - 1,
            ttl_ms,
            wait: WaitChoice::Forever,
            auto_renew: false,
            seed: 1,
            ops,
        }
    }

    fn granted() -> Op {
        Op::Reply {
            pick: 0,
            reply: ReplyChoice::Granted(1),
        }
    }

    #[test]
    fn a_shortening_extend_with_a_lost_reply_limits_validity() {
        // Held for 1 s; extend to 10 ms, its reply is lost (it may have run):
        // after 50 ms the key may be gone, so the lease must not claim validity.
        run_trace(&input(
            1,
            1000,
            vec![
                Op::Acquire,
                granted(),
                Op::Extend(Some(10)),
                Op::Reply {
                    pick: 0,
                    reply: ReplyChoice::Unknown,
                },
                Op::Advance(50),
                Op::Timeout,
            ],
        ));
    }

    #[test]
    fn a_malformed_acquire_reply_gets_a_compensating_release() {
        run_trace(&input(
            1,
            1000,
            vec![
                Op::Acquire,
                Op::Reply {
                    pick: 0,
                    reply: ReplyChoice::Nil,
                },
            ],
        ));
    }

    /// Inputs cargo fuzz once crashed on (harness or core), replayed as-is.
    #[test]
    fn saved_crash_inputs_pass() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("regressions dir") {
            let data = std::fs::read(entry.expect("entry").path()).expect("read");
            run(&data);
            n += 1;
        }
        assert!(n >= 2);
    }

    #[test]
    fn a_handoff_to_us_is_granted_by_a_majority_or_given_back() {
        let handed = ReplyChoice::Granted(7);
        // (replies, cycled over the nodes; refused; granted with 1, 3, 5 nodes)
        let cases = [
            (vec![handed.clone()], false, [true, true, true]),
            (vec![handed.clone()], true, [false; 3]),
            (vec![ReplyChoice::Unknown], false, [false; 3]),
            (
                vec![handed.clone(), ReplyChoice::Held(5), ReplyChoice::Unknown],
                false,
                [true, false, false],
            ),
            (
                vec![handed, ReplyChoice::Array(vec![2, 1])],
                true,
                [false; 3],
            ),
        ];
        for (replies, refuse, granted) in cases {
            for (nodes, granted) in [1, 3, 5].into_iter().zip(granted) {
                let trace = run_trace(&input(
                    nodes,
                    1000,
                    vec![
                        Op::TakeHandoff {
                            replies: replies.clone(),
                            refuse,
                        },
                        Op::Advance(10),
                        Op::Reply {
                            pick: 0,
                            reply: ReplyChoice::Int(1),
                        },
                        Op::ReleaseTo,
                    ],
                ));
                let acquired = trace.iter().any(|l| l.starts_with("Acquired"));
                assert_eq!(acquired, granted, "{replies:?} {refuse} {nodes}: {trace:?}");
            }
        }
    }

    #[test]
    fn redlock_happy_path_holds_a_majority() {
        let mut ops = vec![Op::Acquire];
        ops.extend(std::iter::repeat_n(granted(), 5));
        ops.extend([Op::Advance(100), Op::Release]);
        ops.extend(std::iter::repeat_n(
            Op::Reply {
                pick: 0,
                reply: ReplyChoice::Int(1),
            },
            5,
        ));
        let trace = run_trace(&input(5, 1000, ops));
        assert!(trace.iter().any(|l| l.starts_with("Acquired")), "{trace:?}");
    }
}
