//! The world: network, clients, leases, the event queue and the checks.

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::fmt::Write as _;

use fencelock_core::{
    Command, CommandId, Error, Event, FenceGrace, Handoff, Instant, KeySpace, Kind, Lock,
    LockConfig, LockKeys, LockName, MaxHold, Reply, RetryPolicy, Script, State, Successor, Token,
    Ttl, Wait,
};

use super::{Clock, Micros, Node, Rng, MS};

// ---------------------------------------------------------------------------
// The network.

#[derive(Clone, Debug)]
pub struct Net {
    /// One-way delay, uniform in this range.
    pub delay: (Micros, Micros),
    /// Chance a message is slow: delayed up to `slow_delay` instead.
    pub slow: f64,
    pub slow_delay: Micros,
    /// Chance a request never reaches the node (it does not run).
    pub drop_request: f64,
    /// Chance a reply never reaches the client (the script did run).
    pub drop_reply: f64,
    /// Chance a release notification is lost.
    pub drop_wakeup: f64,
    /// The driver's response timeout: no reply by then means `Unknown`.
    pub timeout: Micros,
}

impl Net {
    /// 1 ms each way, nothing lost, never slow.
    pub fn calm() -> Net {
        Net {
            delay: (MS, MS),
            slow: 0.0,
            slow_delay: 0,
            drop_request: 0.0,
            drop_reply: 0.0,
            drop_wakeup: 0.0,
            timeout: 100 * MS,
        }
    }
    /// The longest a round trip takes when nothing is lost and nothing slow.
    pub fn max_rtt(&self) -> Micros {
        2 * self.delay.1
    }
}

// ---------------------------------------------------------------------------
// Clients and leases.

#[derive(Clone, Debug)]
pub struct Client {
    pub clock: Clock,
    /// Stop-the-world pauses `[from, to)` in global time.
    pub pauses: Vec<(Micros, Micros)>,
    /// The driver's local FIFO, if this client has one (`Sim::local_line`).
    pub line: Option<LocalLine>,
}

/// The driver's local FIFO for the lock: one lease of the client at a time
/// holds the turn (acquiring, holding, or compensating); the others line up
/// without sending anything, and a release hands the lock to the first in
/// line (`Lock::release_to`), the turn going with it.
#[derive(Clone, Debug, Default)]
pub struct LocalLine {
    pub turn: Option<usize>,
    pub waiting: VecDeque<usize>,
}

/// What the application does with a lease, beyond explicit calls.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// After `Acquired`, release after this long (global time).
    pub hold: Option<Micros>,
    /// Call `extend(None)` this long after `Acquired` (before the release).
    pub extend_after: Option<Micros>,
    /// ... with this ttl (`None`: the lease's own).
    pub extend_ttl: Option<Ttl>,
    /// Lease of the same client to start when this one is `Done`, and after
    /// how long.
    pub then: Option<(usize, Micros)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppAction {
    Acquire,
    Extend(Option<Ttl>),
    Release,
    /// `cancel()`, and `release()` if the lock turns out to be held anyway.
    Cancel,
    /// `stop_renewing()`: no more auto-renewal.
    StopRenewing,
}

#[derive(Debug)]
pub struct LeaseSim {
    pub client: usize,
    pub lock: Lock,
    pub plan: Plan,
    /// Every event the machine emitted, with the global time.
    pub events: Vec<(Micros, Event)>,
    /// Every app call and what it returned.
    pub calls: Vec<(Micros, AppAction, Result<(), Error>)>,
    /// Every command sent, with the global time.
    pub sent: Vec<(Micros, Command)>,
    /// Closed belief windows `[start, end)` in global time.
    pub windows: Vec<(Micros, Micros)>,
    /// The open window: since when, and until when (global).
    belief: Option<(Micros, Micros)>,
    /// The app called release/cancel: it no longer uses the lock.
    pub let_go: bool,
    /// Commands sent and not answered yet, with their node.
    pub outstanding: BTreeMap<CommandId, usize>,
    /// `(global time, fence)` of the `Acquired` event.
    pub acquired: Option<(Micros, u64)>,
    /// Bumped on every Subscribe/Unsubscribe, to ignore stale confirmations.
    sub_gen: u64,
    pub subscribed: bool,
    timer: Option<Micros>,
    /// Reached `State::Done` (and the plan moved on).
    pub finished: bool,
    /// Same-instant timer firings, to catch a machine that asks for a timeout
    /// in the past forever.
    spins: (Micros, u32),
    /// What the lock was made from (a successor is built from it).
    pub config: LockConfig,
    /// The lease a release in flight hands the lock to.
    pub promised_to: Option<usize>,
    /// Waiting for a handoff promised by this lease (then never started).
    pub promised_by: Option<usize>,
    /// The lease whose release handed this one the lock (taken or refused).
    pub handed_by: Option<usize>,
}

impl LeaseSim {
    pub fn started(&self) -> bool {
        self.calls.iter().any(|c| c.1 == AppAction::Acquire)
    }
    pub fn fence(&self) -> Option<u64> {
        self.acquired.map(|a| a.1)
    }
    pub fn last_event(&self) -> Option<&Event> {
        self.events.last().map(|e| &e.1)
    }
    /// Acquired by a handoff from another lease's release (no attempt of
    /// its own before the grant).
    pub fn handed_over(&self) -> bool {
        match (self.handed_by, self.acquired) {
            (Some(_), Some((at, _))) => !self
                .sent
                .iter()
                .any(|(t, c)| *t <= at && c.script == Script::Acquire),
            _ => false,
        }
    }
}

/// Options for one lease.
#[derive(Clone, Debug)]
pub struct LeaseOpts {
    /// What the lease holds (of the world's one name): the mutex unless set.
    pub kind: Kind,
    pub ttl: Ttl,
    pub wait: Wait,
    pub auto_renew: bool,
    pub max_hold: Option<MaxHold>,
    pub retry: RetryPolicy,
    pub plan: Plan,
}

impl LeaseOpts {
    pub fn new(ttl_ms: u64, wait: Wait) -> Self {
        LeaseOpts {
            kind: Kind::Mutex,
            ttl: Ttl::from_millis(ttl_ms).unwrap(),
            wait,
            auto_renew: false,
            max_hold: None,
            retry: RetryPolicy::default(),
            plan: Plan::default(),
        }
    }
}

// ---------------------------------------------------------------------------
// The event queue.

#[derive(Clone, Debug)]
enum Ev {
    App {
        lease: usize,
        action: AppAction,
    },
    Exec {
        lease: usize,
        node: usize,
        cmd: Command,
    },
    Reply {
        lease: usize,
        id: CommandId,
        reply: Reply,
    },
    CmdTimeout {
        lease: usize,
        id: CommandId,
    },
    Timer {
        lease: usize,
        at: Micros,
    },
    SubConfirm {
        lease: usize,
        node: usize,
        gen: u64,
    },
    /// A release's message (`Lock::handle_message`), or a wake-up for no
    /// reason (`None`: `Lock::handle_wakeup`).
    Wakeup {
        lease: usize,
        gen: u64,
        message: Option<Vec<u8>>,
    },
    /// A releaser's `Event::Handoff` reaches its successor (same client).
    Handoff {
        lease: usize,
        handoff: Handoff,
    },
    /// The local line's turn came to a lease that lined up: it starts.
    Turn {
        lease: usize,
    },
    /// Down for a while; `wipe`: loses all data (a crash), else keeps it (a
    /// partition or a restart with persistence).
    Crash {
        node: usize,
        down_for: Micros,
        wipe: bool,
    },
    Restart {
        node: usize,
    },
    /// Spurious wake-ups: every `every` (random up to), wake a random
    /// subscribed lease, until `until`. A waiter may be woken at any moment
    /// (a duplicate or late notification), so retries land anywhere.
    Noise {
        every: Micros,
        until: Micros,
    },
}

impl Ev {
    /// The lease whose client must be running to process this event.
    fn client_side(&self) -> Option<usize> {
        match self {
            Ev::App { lease, .. }
            | Ev::Reply { lease, .. }
            | Ev::CmdTimeout { lease, .. }
            | Ev::Timer { lease, .. }
            | Ev::SubConfirm { lease, .. }
            | Ev::Wakeup { lease, .. }
            | Ev::Handoff { lease, .. }
            | Ev::Turn { lease } => Some(*lease),
            Ev::Exec { .. } | Ev::Crash { .. } | Ev::Restart { .. } | Ev::Noise { .. } => None,
        }
    }
}

#[derive(Debug)]
struct Scheduled {
    at: Micros,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap, we want the earliest first.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

// ---------------------------------------------------------------------------
// The world.

#[derive(Clone, Debug)]
pub struct Arrival {
    pub at: Micros,
    pub node: usize,
    pub lease: usize,
    pub id: CommandId,
    pub script: Script,
    pub reply: Option<Reply>,
    /// A handoff's successor.
    pub successor: Option<usize>,
}

impl Arrival {
    /// An acquire (of any kind) that set the key or added the holder.
    pub fn granted(&self) -> bool {
        self.script.is_acquire() && self.said_one()
    }

    /// The lease whose key this command set: an acquire's own, or a
    /// handoff's successor.
    pub fn set_key_of(&self) -> Option<usize> {
        match self.script {
            script if script.is_acquire() && self.said_one() => Some(self.lease),
            Script::Handoff if self.said_one() => self.successor,
            _ => None,
        }
    }

    fn said_one(&self) -> bool {
        matches!(&self.reply, Some(Reply::Array(a)) if a.first() == Some(&Reply::Int(1)))
    }
}

#[derive(Debug)]
pub struct Sim {
    pub now: Micros,
    pub rng: Rng,
    pub net: Net,
    pub name: LockName,
    pub keys: LockKeys,
    pub nodes: Vec<Node>,
    pub clients: Vec<Client>,
    pub leases: Vec<LeaseSim>,
    queue: BinaryHeap<Scheduled>,
    seq: u64,
    /// Per (client, node) connection: when the last request / reply arrives,
    /// so messages on one connection stay in order.
    last_request: BTreeMap<(usize, usize), Micros>,
    last_reply: BTreeMap<(usize, usize), Micros>,
    /// Every request that reached a node, in order, with the reply it
    /// produced (`None`: the node was down, nothing ran).
    pub arrived: Vec<Arrival>,
    /// Things the core did that no correct core may do.
    pub violations: Vec<String>,
    /// Human-readable log, when `tracing` is on.
    pub tracing: bool,
    pub trace: String,
    pub steps: u64,
}

impl Sim {
    pub fn new(seed: u64, nodes: usize, net: Net) -> Sim {
        let name = LockName::new("sim-lock").unwrap();
        Sim {
            now: 0,
            rng: Rng::new(seed),
            net,
            keys: KeySpace::default().keys(&name),
            name,
            nodes: (0..nodes).map(|_| Node::default()).collect(),
            clients: Vec::new(),
            leases: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            last_request: BTreeMap::new(),
            last_reply: BTreeMap::new(),
            arrived: Vec::new(),
            violations: Vec::new(),
            tracing: std::env::var_os("SIM_TRACE").is_some(),
            trace: String::new(),
            steps: 0,
        }
    }

    fn log(&mut self, what: impl FnOnce() -> String) {
        if self.tracing {
            let line = what();
            let _ = writeln!(self.trace, "{:>9.3}ms {line}", self.now as f64 / 1000.0);
        }
    }

    // ---- building the world ----------------------------------------------

    pub fn add_client(&mut self, clock: Clock) -> usize {
        self.clients.push(Client {
            clock,
            pauses: Vec::new(),
            line: None,
        });
        self.clients.len() - 1
    }

    /// Give `client` the driver's local FIFO: its leases line up behind the
    /// one holding the turn, and releases hand the lock over to them.
    pub fn local_line(&mut self, client: usize) {
        self.clients[client].line = Some(LocalLine::default());
    }

    pub fn add_lease(&mut self, client: usize, opts: LeaseOpts) -> usize {
        let id = self.leases.len();
        let config = LockConfig {
            name: self.name.clone(),
            kind: opts.kind,
            keys: KeySpace::default().keys_for(&self.name, opts.kind),
            token: Token(format!("token-{id}").into()),
            ttl: opts.ttl,
            wait: opts.wait,
            nodes: self.nodes.len(),
            auto_renew: opts.auto_renew,
            max_hold: opts.max_hold,
            retry: opts.retry,
            fence_grace: FenceGrace::DEFAULT,
            seed: id as u64,
        };
        let lock = Lock::new(config.clone());
        self.leases.push(LeaseSim {
            client,
            lock,
            plan: opts.plan,
            events: Vec::new(),
            calls: Vec::new(),
            sent: Vec::new(),
            windows: Vec::new(),
            belief: None,
            let_go: false,
            outstanding: BTreeMap::new(),
            acquired: None,
            sub_gen: 0,
            subscribed: false,
            timer: None,
            finished: false,
            spins: (0, 0),
            config,
            promised_to: None,
            promised_by: None,
            handed_by: None,
        });
        id
    }

    /// The token of a lease, as stored in Redis.
    pub fn token(&self, lease: usize) -> Vec<u8> {
        format!("token-{lease}").into_bytes()
    }

    pub fn set_counter(&mut self, node: usize, value: i64) {
        let key = self.keys.fence();
        self.nodes[node].set(&key, value.to_string().as_bytes(), None);
    }

    pub fn counter(&mut self, node: usize) -> i64 {
        let (key, now) = (self.keys.fence(), self.now);
        self.nodes[node].counter(&key, now)
    }

    /// The live holders of `kind`'s set on `node` (a semaphore's, the
    /// readers' or the writer's).
    pub fn holders(&self, node: usize, kind: Kind) -> Vec<Vec<u8>> {
        let key = KeySpace::default().keys_for(&self.name, kind).lock();
        self.nodes[node].holders(&key, self.now)
    }

    /// Who stands in `kind`'s fair line on `node`, in arrival order.
    pub fn line(&self, node: usize, kind: Kind) -> Vec<Vec<u8>> {
        let keys = KeySpace::default().keys_for(&self.name, kind);
        self.nodes[node].line(&keys.line().expect("a kind with a line").waiting)
    }

    /// Who holds the lock key on `node` right now, and for how long.
    pub fn holder(&mut self, node: usize) -> Option<(Vec<u8>, Option<Micros>)> {
        let (key, now) = (self.keys.lock(), self.now);
        self.nodes[node].get(&key, now)
    }

    fn schedule(&mut self, at: Micros, ev: Ev) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Plan an app call at global time `at`.
    pub fn at(&mut self, at: Micros, lease: usize, action: AppAction) {
        self.schedule(at, Ev::App { lease, action });
    }

    /// Crash `node` at `at`; it answers again after `down_for` (with no data).
    pub fn crash_at(&mut self, at: Micros, node: usize, down_for: Micros) {
        self.schedule(
            at,
            Ev::Crash {
                node,
                down_for,
                wipe: true,
            },
        );
    }

    /// Wake random subscribed leases every (up to) `every`, until `until`.
    pub fn noise(&mut self, every: Micros, until: Micros) {
        self.schedule(0, Ev::Noise { every, until });
    }

    /// Make `node` unreachable at `at` for `down_for`; it keeps its data.
    pub fn partition_at(&mut self, at: Micros, node: usize, down_for: Micros) {
        self.schedule(
            at,
            Ev::Crash {
                node,
                down_for,
                wipe: false,
            },
        );
    }

    // ---- running -----------------------------------------------------------

    /// Process every event up to and including global time `until`.
    pub fn run_until(&mut self, until: Micros) {
        while self.step(until) {}
        self.now = self.now.max(until);
    }

    /// Process the next event if it is due by `limit` (global); returns
    /// whether there was one. The one place the clock and `steps` advance.
    fn step(&mut self, limit: Micros) -> bool {
        if self.queue.peek().is_none_or(|s| s.at > limit) {
            return false;
        }
        let Scheduled { at, ev, .. } = self.queue.pop().unwrap();
        self.now = self.now.max(at);
        self.steps += 1;
        self.process(ev);
        true
    }

    /// Run until nothing is left to happen, or `limit` (global) is reached.
    /// Returns whether the world went quiet.
    pub fn run_to_quiet(&mut self, limit: Micros) -> bool {
        while let Some(s) = self.queue.peek() {
            if s.at > limit {
                return false;
            }
            self.run_until(s.at);
        }
        true
    }

    /// Run event by event until `lease` has emitted an event matching `pred`
    /// (returns it), or `limit` (global) passes.
    pub fn run_until_event(
        &mut self,
        lease: usize,
        limit: Micros,
        pred: impl Fn(&Event) -> bool,
    ) -> Option<(Micros, Event)> {
        let seen = self.leases[lease].events.len();
        loop {
            if let Some(e) = self.leases[lease].events[seen..]
                .iter()
                .find(|e| pred(&e.1))
            {
                return Some(e.clone());
            }
            if !self.step(limit) {
                return None;
            }
        }
    }

    /// Run event by event while `keep_going` holds and `limit` is not passed.
    /// Returns whether `keep_going` turned false.
    pub fn run_while(&mut self, limit: Micros, keep_going: impl Fn(&Sim) -> bool) -> bool {
        while keep_going(self) {
            if !self.step(limit) {
                return false;
            }
        }
        true
    }

    /// Requests of `lease` still travelling to a node.
    pub fn requests_in_flight(&self, lease: usize) -> usize {
        self.queue
            .iter()
            .filter(|s| matches!(&s.ev, Ev::Exec { lease: l, .. } if *l == lease))
            .count()
    }

    pub fn run_for(&mut self, d: Micros) {
        self.run_until(self.now + d);
    }

    fn paused_until(&self, client: usize) -> Option<Micros> {
        self.clients[client]
            .pauses
            .iter()
            .find(|(from, to)| *from <= self.now && self.now < *to)
            .map(|p| p.1)
    }

    fn local_now(&self, lease: usize) -> Instant {
        self.clients[self.leases[lease].client]
            .clock
            .local(self.now)
    }

    fn process(&mut self, ev: Ev) {
        if let Some(lease) = ev.client_side() {
            if let Some(resume) = self.paused_until(self.leases[lease].client) {
                self.schedule(resume, ev);
                return;
            }
        }
        match ev {
            Ev::App { lease, action } => self.app(lease, action),
            Ev::Exec { lease, node, cmd } => self.exec(lease, node, cmd),
            Ev::Reply { lease, id, reply } => {
                if self.leases[lease].outstanding.remove(&id).is_some() {
                    self.log(|| format!("L{lease} <- {id:?} {reply:?}"));
                    let now = self.local_now(lease);
                    self.leases[lease].lock.handle_reply(now, id, reply);
                    self.after_input(lease);
                }
            }
            Ev::CmdTimeout { lease, id } => {
                if self.leases[lease].outstanding.remove(&id).is_some() {
                    self.log(|| format!("L{lease} <- {id:?} Unknown (timeout)"));
                    let now = self.local_now(lease);
                    let reply = Reply::Unknown("timed out".into());
                    self.leases[lease].lock.handle_reply(now, id, reply);
                    self.after_input(lease);
                }
            }
            Ev::Timer { lease, at } => {
                if self.leases[lease].timer == Some(at) {
                    self.leases[lease].timer = None;
                    let l = &mut self.leases[lease];
                    if l.spins.0 == self.now {
                        l.spins.1 += 1;
                        if l.spins.1 > 1000 {
                            let msg = format!("L{lease}: timer fires forever at {}", self.now);
                            self.violations.push(msg);
                            return;
                        }
                    } else {
                        l.spins = (self.now, 0);
                    }
                    self.log(|| format!("L{lease} timeout"));
                    let now = self.local_now(lease);
                    self.leases[lease].lock.handle_timeout(now);
                    self.after_input(lease);
                }
            }
            Ev::SubConfirm { lease, node, gen } => {
                if self.leases[lease].sub_gen == gen && self.leases[lease].subscribed {
                    self.nodes[node].subscribers.insert(lease);
                    self.log(|| format!("L{lease} subscribed on n{node}"));
                    let now = self.local_now(lease);
                    self.leases[lease].lock.handle_wakeup(now);
                    self.after_input(lease);
                }
            }
            Ev::Wakeup {
                lease,
                gen,
                message,
            } => {
                if self.leases[lease].sub_gen == gen && self.leases[lease].subscribed {
                    let now = self.local_now(lease);
                    match message {
                        Some(message) => {
                            self.log(|| {
                                format!("L{lease} message {}", String::from_utf8_lossy(&message))
                            });
                            self.leases[lease].lock.handle_message(now, &message);
                        }
                        None => {
                            self.log(|| format!("L{lease} wakeup"));
                            self.leases[lease].lock.handle_wakeup(now);
                        }
                    }
                    self.after_input(lease);
                }
            }
            Ev::Handoff { lease, handoff } => self.take_handoff(lease, handoff),
            Ev::Turn { lease } => {
                if self.leases[lease].lock.state() == State::Idle {
                    self.log(|| format!("L{lease} turn"));
                    let now = self.local_now(lease);
                    let result = self.leases[lease].lock.acquire(now);
                    if let Err(e) = result {
                        self.violations
                            .push(format!("L{lease}: start in turn: {e}"));
                    }
                    self.after_input(lease);
                }
            }
            Ev::Crash {
                node,
                down_for,
                wipe,
            } => {
                let what = if wipe {
                    "CRASH (data lost)"
                } else {
                    "unreachable"
                };
                self.log(|| format!("n{node} {what} for {}ms", down_for / MS));
                let n = &mut self.nodes[node];
                n.up = false;
                n.down_until = n.down_until.max(self.now + down_for);
                if wipe {
                    n.wipe();
                }
                self.schedule(self.now + down_for, Ev::Restart { node });
            }
            Ev::Restart { node } => {
                // Overlapping outages: back only when the longest one ends.
                if self.now >= self.nodes[node].down_until {
                    self.log(|| format!("n{node} back"));
                    self.nodes[node].up = true;
                }
            }
            Ev::Noise { every, until } => {
                let subscribed: Vec<usize> = (0..self.leases.len())
                    .filter(|&l| self.leases[l].subscribed)
                    .collect();
                if !subscribed.is_empty() {
                    let lease = subscribed[self.rng.range(0, subscribed.len() as u64 - 1) as usize];
                    let gen = self.leases[lease].sub_gen;
                    let message = None;
                    self.schedule(
                        self.now,
                        Ev::Wakeup {
                            lease,
                            gen,
                            message,
                        },
                    );
                }
                let next = self.now + self.rng.range(1, every);
                if next <= until && self.leases.iter().any(|l| !l.finished) {
                    self.schedule(next, Ev::Noise { every, until });
                }
            }
        }
    }

    fn app(&mut self, lease: usize, action: AppAction) {
        let now = self.local_now(lease);
        let result = match action {
            AppAction::Acquire if self.line_up(lease) => Ok(()),
            AppAction::Release => self.release(lease, now),
            AppAction::Cancel if self.leave_line(lease) => Ok(()),
            _ => self.call(lease, action, now),
        };
        self.log(|| format!("L{lease} app {action:?} -> {result:?}"));
        self.leases[lease].calls.push((self.now, action, result));
        self.after_input(lease);
    }

    /// An app call straight to the lease's lock.
    fn call(&mut self, lease: usize, action: AppAction, now: Instant) -> Result<(), Error> {
        let l = &mut self.leases[lease];
        match action {
            AppAction::Acquire => l.lock.acquire(now),
            AppAction::Extend(ttl) => l.lock.extend(now, ttl),
            AppAction::Release => {
                l.let_go = true;
                l.lock.release(now)
            }
            AppAction::Cancel => {
                l.let_go |= l.lock.state() != State::Idle;
                l.lock.cancel(now);
                if l.lock.state() == State::Held {
                    l.lock.release(now)
                } else {
                    Ok(())
                }
            }
            AppAction::StopRenewing => {
                l.lock.stop_renewing(now);
                Ok(())
            }
        }
    }

    // ---- the local line (the driver's FIFO) -------------------------------

    /// An acquire on a client with a local line: take the turn if it is
    /// free (then the lock starts as usual: false), else line up without
    /// sending anything (true).
    fn line_up(&mut self, lease: usize) -> bool {
        // Not idle (acquired twice, or cancelled first): the lock refuses it.
        if self.leases[lease].lock.state() != State::Idle {
            return false;
        }
        // Permits and readers do not line up locally (nor are handed over).
        if !self.leases[lease].config.kind.lines_up_locally() {
            return false;
        }
        let Some(line) = self.clients[self.leases[lease].client].line.as_mut() else {
            return false;
        };
        match line.turn {
            Some(holder) if holder != lease => {
                line.waiting.push_back(lease);
                true
            }
            Some(_) => false,
            None => {
                line.turn = Some(lease);
                false
            }
        }
    }

    /// A cancel of a lease that never started: it leaves the line (true).
    /// One promised a handoff stays until the handoff comes, and refuses it.
    fn leave_line(&mut self, lease: usize) -> bool {
        let l = &self.leases[lease];
        if l.lock.state() != State::Idle {
            return false;
        }
        if l.promised_by.is_some() {
            self.leases[lease].let_go = true;
            return true;
        }
        let client = l.client;
        let Some(line) = self.clients[client].line.as_mut() else {
            return false;
        };
        let Some(at) = line.waiting.iter().position(|&w| w == lease) else {
            return false;
        };
        line.waiting.remove(at);
        let now = self.local_now(lease);
        let l = &mut self.leases[lease];
        l.let_go = true;
        l.lock.cancel(now);
        true
    }

    /// A release: handed to the first in line when this lease holds the turn
    /// and the lock, else a plain release.
    fn release(&mut self, lease: usize, now: Instant) -> Result<(), Error> {
        let held = self.leases[lease].lock.state() == State::Held;
        let next = match self.clients[self.leases[lease].client].line.as_mut() {
            Some(line) if held && line.turn == Some(lease) => line.waiting.pop_front(),
            _ => None,
        };
        let Some(next) = next else {
            return self.call(lease, AppAction::Release, now);
        };
        let successor = Successor::new(&self.leases[next].config);
        self.leases[lease].let_go = true;
        self.leases[lease]
            .lock
            .release_to(now, successor)
            .inspect(|()| {
                self.leases[lease].promised_to = Some(next);
                self.leases[next].promised_by = Some(lease);
            })
    }

    /// The turn goes with a handoff; the successor takes it or refuses it.
    fn take_handoff(&mut self, lease: usize, handoff: Handoff) {
        let now = self.local_now(lease);
        let l = &mut self.leases[lease];
        l.handed_by = l.promised_by.take();
        let result = if l.let_go {
            l.lock.refuse_handoff(now, handoff)
        } else {
            l.lock.accept_handoff(now, handoff)
        };
        self.log(|| format!("L{lease} handoff taken -> {result:?}"));
        if let Err(e) = result {
            self.violations
                .push(format!("L{lease}: handoff refused by the core: {e}"));
        }
        self.after_input(lease);
    }

    /// `lease` is done with the turn (released, lost, failed, finished):
    /// the first in line starts.
    fn free_turn(&mut self, lease: usize) {
        let Some(line) = self.clients[self.leases[lease].client].line.as_mut() else {
            return;
        };
        if line.turn != Some(lease) {
            return;
        }
        line.turn = line.waiting.pop_front();
        if let Some(next) = line.turn {
            self.schedule(self.now, Ev::Turn { lease: next });
        }
    }

    fn delay(&mut self) -> Micros {
        if self.rng.chance(self.net.slow) {
            self.rng.range(self.net.delay.1, self.net.slow_delay)
        } else {
            self.rng.range(self.net.delay.0, self.net.delay.1)
        }
    }

    fn send(&mut self, lease: usize, cmd: Command) {
        let node = cmd.node;
        let client = self.leases[lease].client;
        self.log(|| format!("L{lease} -> n{node} {:?} {:?}", cmd.id, cmd.script));
        if node >= self.nodes.len() {
            self.violations.push(format!(
                "L{lease}: command to node {node} of {}",
                self.nodes.len()
            ));
            return;
        }
        if self.leases[lease]
            .outstanding
            .insert(cmd.id, node)
            .is_some()
        {
            self.violations.push(format!(
                "L{lease}: command id {:?} reused while in flight",
                cmd.id
            ));
        }
        self.leases[lease].sent.push((self.now, cmd.clone()));
        self.schedule(
            self.now + self.net.timeout,
            Ev::CmdTimeout { lease, id: cmd.id },
        );
        if self.rng.chance(self.net.drop_request) {
            self.log(|| format!("   (request {:?} dropped)", cmd.id));
            return;
        }
        let at =
            (self.now + self.delay()).max(*self.last_request.get(&(client, node)).unwrap_or(&0));
        self.last_request.insert((client, node), at);
        self.schedule(at, Ev::Exec { lease, node, cmd });
    }

    fn exec(&mut self, lease: usize, node: usize, cmd: Command) {
        let successor = (cmd.script == Script::Handoff)
            .then(|| cmd.args.get(1)?.strip_prefix(b"token-"))
            .flatten()
            .and_then(|id| std::str::from_utf8(id).ok()?.parse().ok());
        let mut arrival = Arrival {
            at: self.now,
            node,
            lease,
            id: cmd.id,
            script: cmd.script,
            reply: None,
            successor,
        };
        if !self.nodes[node].up {
            self.log(|| format!("n{node} down: {:?} lost", cmd.id));
            self.arrived.push(arrival);
            return;
        }
        let (reply, published) = self.nodes[node].exec(self.now, &cmd);
        arrival.reply = Some(reply.clone());
        self.arrived.push(arrival);
        self.log(|| {
            format!(
                "n{node} ran L{lease} {:?} {:?} = {reply:?}",
                cmd.id, cmd.script
            )
        });
        if let Some(message) = published {
            for sub in self.nodes[node].subscribers.clone() {
                if !self.rng.chance(self.net.drop_wakeup) {
                    let at = self.now + self.delay();
                    let gen = self.leases[sub].sub_gen;
                    let message = Some(message.clone());
                    self.schedule(
                        at,
                        Ev::Wakeup {
                            lease: sub,
                            gen,
                            message,
                        },
                    );
                }
            }
        }
        if self.rng.chance(self.net.drop_reply) {
            self.log(|| format!("   (reply to {:?} dropped)", cmd.id));
            return;
        }
        let client = self.leases[lease].client;
        let at = (self.now + self.delay()).max(*self.last_reply.get(&(client, node)).unwrap_or(&0));
        self.last_reply.insert((client, node), at);
        self.schedule(
            at,
            Ev::Reply {
                lease,
                id: cmd.id,
                reply,
            },
        );
    }

    /// After every input to a lease: send its commands, act on its events,
    /// update its belief window and its timer.
    fn after_input(&mut self, lease: usize) {
        while let Some(cmd) = self.leases[lease].lock.poll_command() {
            self.send(lease, cmd);
        }
        while let Some(event) = self.leases[lease].lock.poll_event() {
            self.log(|| format!("L{lease} event {event:?}"));
            self.leases[lease].events.push((self.now, event.clone()));
            match event {
                Event::Subscribe => {
                    let l = &mut self.leases[lease];
                    l.sub_gen += 1;
                    l.subscribed = true;
                    let gen = l.sub_gen;
                    for node in 0..self.nodes.len() {
                        let at = self.now + self.delay();
                        self.schedule(at, Ev::SubConfirm { lease, node, gen });
                    }
                }
                Event::Unsubscribe => {
                    let l = &mut self.leases[lease];
                    l.sub_gen += 1;
                    l.subscribed = false;
                    for node in &mut self.nodes {
                        node.subscribers.remove(&lease);
                    }
                }
                Event::Acquired { fence, .. } => {
                    let l = &mut self.leases[lease];
                    if l.acquired.is_some() {
                        self.violations.push(format!("L{lease}: Acquired twice"));
                    }
                    l.acquired = Some((self.now, fence));
                    let (hold, extend) = (l.plan.hold, l.plan.extend_after);
                    if let Some(e) = extend {
                        let ttl = l.plan.extend_ttl;
                        self.at(self.now + e, lease, AppAction::Extend(ttl));
                    }
                    if let Some(h) = hold {
                        self.at(self.now + h, lease, AppAction::Release);
                    }
                }
                Event::Handoff(handoff) => {
                    let Some(next) = self.leases[lease].promised_to.take() else {
                        self.violations
                            .push(format!("L{lease}: a handoff nobody was promised"));
                        continue;
                    };
                    // The turn goes with it, straight to the successor.
                    let client = self.leases[lease].client;
                    if let Some(line) = self.clients[client].line.as_mut() {
                        line.turn = Some(next);
                    }
                    self.schedule(
                        self.now,
                        Ev::Handoff {
                            lease: next,
                            handoff,
                        },
                    );
                }
                Event::Released(_) | Event::Lost | Event::AcquireFailed(_) => {
                    self.free_turn(lease);
                }
                _ => {}
            }
        }
        self.update_belief(lease);

        let client = self.leases[lease].client;
        let clock = self.clients[client].clock;
        let timer = self.leases[lease]
            .lock
            .poll_timeout()
            .map(|t| clock.global(t).max(self.now));
        if timer != self.leases[lease].timer {
            self.leases[lease].timer = timer;
            if let Some(at) = timer {
                self.schedule(at, Ev::Timer { lease, at });
            }
        }

        let l = &mut self.leases[lease];
        if l.lock.state() == State::Done && !l.finished && l.outstanding.is_empty() {
            l.finished = true;
            if let Some((next, think)) = l.plan.then {
                self.at(self.now + think, next, AppAction::Acquire);
            }
            self.free_turn(lease);
        }
    }

    fn update_belief(&mut self, lease: usize) {
        let clock = self.clients[self.leases[lease].client].clock;
        let now = self.now;
        let l = &mut self.leases[lease];
        let believes = (!l.let_go && l.lock.state() == State::Held && !l.lock.is_lost())
            .then(|| l.lock.valid_until().map(|vu| clock.global(vu)))
            .flatten();
        let current = l.belief.map(|b| b.1);
        if believes != current {
            if let Some((start, end)) = l.belief.take() {
                if start < end.min(now) {
                    l.windows.push((start, end.min(now)));
                }
            }
            l.belief = believes.map(|end| (now, end));
        }
    }

    /// Every belief window, the open one included; back-to-back windows
    /// (a renewal moving `valid_until`) are merged.
    pub fn windows(&self, lease: usize) -> Vec<(Micros, Micros)> {
        let l = &self.leases[lease];
        let open = l.belief.filter(|(start, end)| start < end);
        let mut merged: Vec<(Micros, Micros)> = Vec::new();
        for (start, end) in l.windows.iter().copied().chain(open) {
            match merged.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => merged.push((start, end)),
            }
        }
        merged
    }

    // ---- checks ------------------------------------------------------------

    /// No two leases believed they held the lock at the same global instant.
    pub fn check_mutual_exclusion(&self) -> Result<(), String> {
        let mut all: Vec<(Micros, Micros, usize)> = (0..self.leases.len())
            .flat_map(|l| self.windows(l).into_iter().map(move |(s, e)| (s, e, l)))
            .collect();
        all.sort();
        match fencelock_testkit::exclusion::overlaps(&mut all).first() {
            Some(&(p, w)) => {
                let (prev, w) = (all[p], all[w]);
                Err(format!(
                    "overlap: L{} believed [{}, {}) and L{} believed [{}, {}) (µs, global)",
                    prev.2, prev.0, prev.1, w.2, w.0, w.1
                ))
            }
            None => Ok(()),
        }
    }

    /// No more leases believe they hold than their kind allows at any real
    /// instant: one mutex holder, `permits` semaphore holders, one writer
    /// and no reader beside it (readers share). What `check_mutual_exclusion`
    /// is for the mutex, for every kind.
    pub fn check_capacity(&self) -> Result<(), String> {
        // (instant, +1 start / -1 end, lease); ends sort before starts at
        // the same instant: windows are half-open.
        let mut edges: Vec<(Micros, i32, usize)> = Vec::new();
        for l in 0..self.leases.len() {
            for (start, end) in self.windows(l) {
                edges.push((start, 1, l));
                edges.push((end, -1, l));
            }
        }
        edges.sort();
        let mut holding: BTreeSet<usize> = BTreeSet::new();
        for (at, step, lease) in edges {
            if step < 0 {
                holding.remove(&lease);
                continue;
            }
            holding.insert(lease);
            let count = |pred: &dyn Fn(Kind) -> bool| {
                holding
                    .iter()
                    .filter(|&&l| pred(self.leases[l].lock.kind()))
                    .count()
            };
            let mutex = count(&|k| k.is_mutex());
            let writers = count(&|k| k == Kind::Write);
            let readers = count(&|k| k == Kind::Read);
            let permits = holding
                .iter()
                .filter_map(|&l| match self.leases[l].lock.kind() {
                    Kind::Semaphore(p) => Some(p.get() as usize),
                    _ => None,
                })
                .min();
            let semaphore = count(&|k| matches!(k, Kind::Semaphore(_)));
            let over = mutex > 1
                || writers > 1
                || (writers == 1 && readers > 0)
                || permits.is_some_and(|p| semaphore > p);
            if over {
                return Err(format!(
                    "at {at} µs (L{lease} began): holding {holding:?}: {mutex} mutex, \
                     {writers} writers, {readers} readers, {semaphore} of {permits:?} permits"
                ));
            }
        }
        Ok(())
    }

    /// A lease that began to hold after another's last window ended has the
    /// larger fence, when one of the two excludes the other (a mutex, a
    /// writer, a semaphore of one permit, against anything of its name);
    /// on a single node every fence is distinct. Two leases that may hold
    /// together (permits, readers) are granted in an order their clients
    /// need not see: one granted first may learn it last.
    pub fn check_fences_in_order(&self) -> Result<(), String> {
        let exclusive = |l: usize| match self.leases[l].lock.kind() {
            Kind::Mutex | Kind::FairMutex | Kind::Write => true,
            Kind::Semaphore(p) => p.get() == 1,
            Kind::Read => false,
        };
        let spans: Vec<(usize, Micros, Micros, u64)> = (0..self.leases.len())
            .filter_map(|l| {
                let windows = self.windows(l);
                let fence = self.leases[l].fence()?;
                Some((l, windows.first()?.0, windows.last()?.1, fence))
            })
            .collect();
        for &(a, a_start, a_end, a_fence) in &spans {
            for &(b, b_start, _, b_fence) in &spans {
                let ordered = exclusive(a) || exclusive(b);
                if ordered && b_start >= a_end && b_fence <= a_fence {
                    return Err(format!(
                        "L{b} (fence {b_fence}, from {b_start} µs) held after L{a} \
                         (fence {a_fence}, [{a_start}, {a_end}) µs) with a fence not above it"
                    ));
                }
                if a != b && self.nodes.len() == 1 && a_fence == b_fence {
                    return Err(format!("L{a} and L{b} share fence {a_fence} on one node"));
                }
            }
        }
        Ok(())
    }

    /// Leases that held the lock for a non-empty window, in the order their
    /// windows began, have strictly increasing fences.
    pub fn check_fences(&self) -> Result<(), String> {
        let mut held: Vec<(Micros, u64, usize)> = (0..self.leases.len())
            .filter_map(|l| {
                let first = self.windows(l).first()?.0;
                Some((first, self.leases[l].fence()?, l))
            })
            .collect();
        held.sort();
        for pair in held.windows(2) {
            if pair[1].1 <= pair[0].1 {
                return Err(format!(
                    "fence went from {} (L{}, held from {}µs) to {} (L{}, held from {}µs)",
                    pair[0].1, pair[0].2, pair[0].0, pair[1].1, pair[1].2, pair[1].0
                ));
            }
        }
        Ok(())
    }

    /// No app call went without its completion event, and none got two.
    pub fn check_completions(&self, lease: usize) -> Result<(), String> {
        let l = &self.leases[lease];
        let ok = |a: &dyn Fn(&AppAction) -> bool| {
            l.calls.iter().filter(|c| a(&c.1) && c.2.is_ok()).count()
        };
        let ev = |e: &dyn Fn(&Event) -> bool| l.events.iter().filter(|x| e(&x.1)).count();
        let acquires = ok(&|a| *a == AppAction::Acquire);
        let acquired = ev(&|e| matches!(e, Event::Acquired { .. } | Event::AcquireFailed(_)));
        let cancelled = l.calls.iter().any(|c| c.1 == AppAction::Cancel);
        if acquired > acquires || (!cancelled && acquired < acquires) {
            return Err(format!(
                "L{lease}: {acquires} acquire calls, {acquired} completions"
            ));
        }
        let extends = ok(&|a| matches!(a, AppAction::Extend(_)));
        let extended = ev(&|e| matches!(e, Event::Extended { .. } | Event::ExtendFailed(_)));
        if extends != extended {
            return Err(format!(
                "L{lease}: {extends} extend calls, {extended} completions"
            ));
        }
        let releases = l
            .calls
            .iter()
            .filter(|c| c.1 == AppAction::Release && c.2.is_ok())
            .count();
        let released = ev(&|e| matches!(e, Event::Released(_)));
        if releases != released {
            return Err(format!(
                "L{lease}: {releases} release calls, {released} completions"
            ));
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (i, l) in self.leases.iter().enumerate() {
            let _ = writeln!(
                s,
                "L{i} (client {}): state {:?}, fence {:?}, handed by {:?}, windows {:?}, events {:?}",
                l.client,
                l.lock.state(),
                l.fence(),
                l.handed_by,
                self.windows(i),
                l.events
            );
        }
        s
    }
}
