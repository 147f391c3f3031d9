//! A deterministic simulator for the sans-IO lock core.
//!
//! The world, in one page:
//!
//! - **Time** is one global virtual clock in microseconds ([`Micros`]). Nothing
//!   sleeps; the simulator jumps from one scheduled event to the next.
//! - **Nodes** ([`Node`]) are fake Redis servers: a map `key -> (value,
//!   expiry)` that executes exactly the four scripts' semantics, with a clock
//!   that may run a little fast or slow. A node can crash (all data lost) and
//!   come back later, or be unreachable for a while (data kept).
//! - **Clients** ([`Client`]) are processes with their own clock (offset and a
//!   rate within the drift bound) and optional pauses (stop-the-world: nothing
//!   on that client is processed until the pause ends). A client runs one
//!   [`Lock`] machine per lease ([`LeaseSim`]), one after another if planned.
//! - **The network** ([`Net`]) carries each command to its node after a random
//!   delay, in order per (client, node) connection like TCP. A request may be
//!   dropped (never runs), a reply may be dropped (ran, but the client never
//!   hears), and any message may be slow. The client side plays the driver:
//!   a command not answered within `Net::timeout` is answered `Reply::Unknown`,
//!   and a late reply is then ignored. Pub/sub release notifications are
//!   delivered to subscribed leases, possibly late or not at all.
//! - Everything random comes from one seeded [`Rng`]: same seed, same run.
//!
//! The simulator records what each lease *believed* (the windows during which
//! `state() == Held`, not lost, and `now < valid_until()`, in global time), so
//! properties such as mutual exclusion and fence ordering can be checked
//! afterwards with [`Sim::check_mutual_exclusion`] and [`Sim::check_fences`].
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::fmt::Write as _;
use std::time::Duration;

use fencelock_core::{
    Command, CommandId, Error, Event, Instant, KeySpace, Lock, LockConfig, LockKeys, LockName,
    Reply, RetryPolicy, Script, State, Token, Ttl, Wait,
};

/// Global (real) time in microseconds.
pub type Micros = u64;
pub const MS: Micros = 1_000;

// ---------------------------------------------------------------------------
// Randomness: SplitMix64, tiny and good enough for scheduling decisions.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi` (returns `lo` if the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

// ---------------------------------------------------------------------------
// Client clocks.

/// `local = offset + global * rate_ppm / 1e6`. A rate below 1e6 is a slow
/// clock (the dangerous direction for validity), above is a fast one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub offset: Micros,
    pub rate_ppm: u64,
}

impl Clock {
    pub const PERFECT: Clock = Clock {
        offset: 0,
        rate_ppm: 1_000_000,
    };

    /// What this clock reads at global time `global` (nanosecond precision).
    pub fn local(&self, global: Micros) -> Instant {
        let ns = self.offset as u128 * 1000 + global as u128 * self.rate_ppm as u128 / 1000;
        Instant::from_epoch(Duration::from_nanos(ns.min(u64::MAX as u128) as u64))
    }

    /// The first global time (whole µs) at which this clock reads at least
    /// `local`.
    pub fn global(&self, local: Instant) -> Micros {
        let l = local.since_epoch().as_nanos();
        let off = self.offset as u128 * 1000;
        if l <= off {
            return 0;
        }
        ((l - off) * 1000)
            .div_ceil(self.rate_ppm as u128)
            .min(u64::MAX as u128) as u64
    }
}

// ---------------------------------------------------------------------------
// Fake Redis.

/// One Redis server: string keys with an optional expiry (global time).
#[derive(Clone, Debug)]
pub struct Node {
    data: BTreeMap<Vec<u8>, (Vec<u8>, Option<Micros>)>,
    pub up: bool,
    /// The server's clock rate (ppm of real time): PX/PEXPIRE/PTTL count in
    /// its time, so a fast server clock expires keys early.
    pub rate_ppm: u64,
    /// Scripts run (while up), for round-trip accounting.
    pub executed: Vec<Script>,
}

impl Default for Node {
    fn default() -> Self {
        Node {
            data: BTreeMap::new(),
            up: true,
            rate_ppm: 1_000_000,
            executed: Vec::new(),
        }
    }
}

fn int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

impl Node {
    /// Real time a server-time duration of `ms` takes.
    fn real_us(&self, ms: u64) -> Micros {
        (ms as u128 * MS as u128 * 1_000_000 / self.rate_ppm as u128).min(u64::MAX as u128 / 4)
            as u64
    }

    /// A real duration as the server measures it, in whole ms.
    fn server_ms(&self, real: Micros) -> u64 {
        (real as u128 * self.rate_ppm as u128 / 1_000_000 / MS as u128) as u64
    }

    fn live(&mut self, key: &[u8], now: Micros) -> Option<&mut (Vec<u8>, Option<Micros>)> {
        if matches!(self.data.get(key), Some((_, Some(exp))) if *exp <= now) {
            self.data.remove(key);
        }
        self.data.get_mut(key)
    }

    /// The value of `key` at `now` and its remaining TTL, if it has one.
    pub fn get(&mut self, key: &[u8], now: Micros) -> Option<(Vec<u8>, Option<Micros>)> {
        self.live(key, now)
            .map(|(v, exp)| (v.clone(), exp.map(|e| e - now)))
    }

    pub fn set(&mut self, key: &[u8], value: &[u8], expires_at: Option<Micros>) {
        self.data.insert(key.to_vec(), (value.to_vec(), expires_at));
    }

    /// The fencing counter stored under `key` (0 if absent).
    pub fn counter(&mut self, key: &[u8], now: Micros) -> i64 {
        self.get(key, now).and_then(|(v, _)| int(&v)).unwrap_or(0)
    }

    /// Lose everything (a crash without persistence).
    pub fn wipe(&mut self) {
        self.data.clear();
    }

    /// Runs one script. Returns the reply and, for a successful release, the
    /// channel a notification was published on.
    pub fn exec(&mut self, now: Micros, cmd: &Command) -> (Reply, Option<Vec<u8>>) {
        self.executed.push(cmd.script);
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        match cmd.script {
            // SET lock token NX PX ttl (or our own token: PEXPIRE); INCR fence
            // -> {1, fence} | {0, pttl}
            Script::Acquire => {
                let (Some(lock), Some(fence), Some(token), Some(ttl)) =
                    (key(0), key(1), arg(0), arg(1))
                else {
                    return err("ERR wrong number of arguments");
                };
                let Some(ttl) = int(&ttl).filter(|t| *t > 0) else {
                    return err("ERR invalid expire time in 'set' command");
                };
                // Free, or our own leftover token (a lost compensating
                // release): granted. Anyone else's: {0, pttl}.
                if let Some((holder, exp)) = self.live(&lock, now).map(|e| e.clone()) {
                    if holder != token {
                        let pttl = match exp {
                            Some(e) => self.server_ms(e - now) as i64,
                            None => -1,
                        };
                        return (Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)]), None);
                    }
                }
                let counter = match self.live(&fence, now) {
                    None => 0,
                    Some((v, _)) => match int(v) {
                        Some(n) => n,
                        None => {
                            self.data.remove(&lock);
                            return err("ERR value is not an integer or out of range");
                        }
                    },
                };
                let Some(next) = counter.checked_add(1) else {
                    self.data.remove(&lock);
                    return err("ERR increment or decrement would overflow");
                };
                self.set(&fence, next.to_string().as_bytes(), None);
                let expires = now + self.real_us(ttl as u64);
                self.set(&lock, &token, Some(expires));
                (Reply::Array(vec![Reply::Int(1), Reply::Int(next)]), None)
            }
            // if GET lock == token: DEL lock; PUBLISH channel (if given) -> 1 | 0
            Script::Release => {
                let (Some(lock), Some(token)) = (key(0), arg(0)) else {
                    return err("ERR wrong number of arguments");
                };
                if self.live(&lock, now).is_some_and(|(v, _)| *v == token) {
                    self.data.remove(&lock);
                    (Reply::Int(1), key(1))
                } else {
                    (Reply::Int(0), None)
                }
            }
            // if GET lock == token: PEXPIRE lock ttl -> 1 | 0
            Script::Extend => {
                let (Some(lock), Some(token), Some(ttl)) = (key(0), arg(0), arg(1)) else {
                    return err("ERR wrong number of arguments");
                };
                let Some(ttl) = int(&ttl) else {
                    return err("ERR value is not an integer or out of range");
                };
                let real = self.real_us(ttl.max(0) as u64);
                match self.live(&lock, now) {
                    Some((v, exp)) if *v == token => {
                        if ttl <= 0 {
                            self.data.remove(&lock);
                        } else {
                            *exp = Some(now + real);
                        }
                        (Reply::Int(1), None)
                    }
                    _ => (Reply::Int(0), None),
                }
            }
            // counter = max(counter, fence) -> counter
            Script::RaiseFence => {
                let (Some(fence), Some(wanted)) = (key(0), arg(0)) else {
                    return err("ERR wrong number of arguments");
                };
                let Some(wanted) = int(&wanted) else {
                    return err("ERR attempt to compare number with nil");
                };
                let current = match self.live(&fence, now) {
                    None => 0,
                    Some((v, _)) => match int(v) {
                        Some(n) => n,
                        None => return err("ERR attempt to compare nil with number"),
                    },
                };
                if current < wanted {
                    self.set(&fence, wanted.to_string().as_bytes(), None);
                    (Reply::Int(wanted), None)
                } else {
                    (Reply::Int(current), None)
                }
            }
        }
    }
}

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
}

/// What the application does with a lease, beyond explicit calls.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// After `Acquired`, release after this long (global time).
    pub hold: Option<Micros>,
    /// Call `extend(None)` this long after `Acquired` (before the release).
    pub extend_after: Option<Micros>,
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
}

/// Options for one lease.
#[derive(Clone, Debug)]
pub struct LeaseOpts {
    pub ttl: Ttl,
    pub wait: Wait,
    pub auto_renew: bool,
    pub retry: RetryPolicy,
    pub plan: Plan,
}

impl LeaseOpts {
    pub fn new(ttl_ms: u64, wait: Wait) -> Self {
        LeaseOpts {
            ttl: Ttl::from_millis(ttl_ms).unwrap(),
            wait,
            auto_renew: false,
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
    Wakeup {
        lease: usize,
        gen: u64,
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
            | Ev::Wakeup { lease, .. } => Some(*lease),
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
}

impl Arrival {
    /// An acquire that set the key.
    pub fn granted(&self) -> bool {
        self.script == Script::Acquire
            && matches!(&self.reply, Some(Reply::Array(a)) if a.first() == Some(&Reply::Int(1)))
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
    /// Per node: leases subscribed to the lock's channel.
    subscribers: Vec<BTreeSet<usize>>,
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
            subscribers: vec![BTreeSet::new(); nodes],
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
        });
        self.clients.len() - 1
    }

    pub fn add_lease(&mut self, client: usize, opts: LeaseOpts) -> usize {
        let id = self.leases.len();
        let lock = Lock::new(LockConfig {
            name: self.name.clone(),
            keys: self.keys.clone(),
            token: Token(format!("token-{id}")),
            ttl: opts.ttl,
            wait: opts.wait,
            nodes: self.nodes.len(),
            auto_renew: opts.auto_renew,
            retry: opts.retry,
            seed: id as u64,
        });
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
        });
        id
    }

    /// The token of a lease, as stored in Redis.
    pub fn token(&self, lease: usize) -> Vec<u8> {
        format!("token-{lease}").into_bytes()
    }

    pub fn set_counter(&mut self, node: usize, value: i64) {
        let key = self.keys.fence.clone();
        self.nodes[node].set(&key, value.to_string().as_bytes(), None);
    }

    pub fn counter(&mut self, node: usize) -> i64 {
        let (key, now) = (self.keys.fence.clone(), self.now);
        self.nodes[node].counter(&key, now)
    }

    /// Who holds the lock key on `node` right now, and for how long.
    pub fn holder(&mut self, node: usize) -> Option<(Vec<u8>, Option<Micros>)> {
        let (key, now) = (self.keys.lock.clone(), self.now);
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
        while self.queue.peek().is_some_and(|s| s.at <= until) {
            let Scheduled { at, ev, .. } = self.queue.pop().unwrap();
            self.now = self.now.max(at);
            self.steps += 1;
            self.process(ev);
        }
        self.now = self.now.max(until);
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
            match self.queue.peek() {
                Some(s) if s.at <= limit => {
                    let at = s.at;
                    let Scheduled { ev, .. } = self.queue.pop().unwrap();
                    self.now = self.now.max(at);
                    self.steps += 1;
                    self.process(ev);
                }
                _ => return None,
            }
        }
    }

    /// Run event by event while `keep_going` holds and `limit` is not passed.
    /// Returns whether `keep_going` turned false.
    pub fn run_while(&mut self, limit: Micros, keep_going: impl Fn(&Sim) -> bool) -> bool {
        while keep_going(self) {
            match self.queue.peek() {
                Some(s) if s.at <= limit => {
                    let at = s.at;
                    let Scheduled { ev, .. } = self.queue.pop().unwrap();
                    self.now = self.now.max(at);
                    self.steps += 1;
                    self.process(ev);
                }
                _ => return false,
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
                    self.subscribers[node].insert(lease);
                    self.log(|| format!("L{lease} subscribed on n{node}"));
                    let now = self.local_now(lease);
                    self.leases[lease].lock.handle_wakeup(now);
                    self.after_input(lease);
                }
            }
            Ev::Wakeup { lease, gen } => {
                if self.leases[lease].sub_gen == gen && self.leases[lease].subscribed {
                    self.log(|| format!("L{lease} wakeup"));
                    let now = self.local_now(lease);
                    self.leases[lease].lock.handle_wakeup(now);
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
                self.nodes[node].up = false;
                if wipe {
                    self.nodes[node].wipe();
                }
                self.schedule(self.now + down_for, Ev::Restart { node });
            }
            Ev::Restart { node } => {
                self.log(|| format!("n{node} restarted"));
                self.nodes[node].up = true;
            }
            Ev::Noise { every, until } => {
                let subscribed: Vec<usize> = (0..self.leases.len())
                    .filter(|&l| self.leases[l].subscribed)
                    .collect();
                if !subscribed.is_empty() {
                    let lease = subscribed[self.rng.range(0, subscribed.len() as u64 - 1) as usize];
                    let gen = self.leases[lease].sub_gen;
                    self.schedule(self.now, Ev::Wakeup { lease, gen });
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
        let l = &mut self.leases[lease];
        let result = match action {
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
        };
        self.log(|| format!("L{lease} app {action:?} -> {result:?}"));
        self.leases[lease].calls.push((self.now, action, result));
        self.after_input(lease);
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
        let mut arrival = Arrival {
            at: self.now,
            node,
            lease,
            id: cmd.id,
            script: cmd.script,
            reply: None,
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
        if published.is_some() {
            for sub in self.subscribers[node].clone() {
                if !self.rng.chance(self.net.drop_wakeup) {
                    let at = self.now + self.delay();
                    let gen = self.leases[sub].sub_gen;
                    self.schedule(at, Ev::Wakeup { lease: sub, gen });
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
                    for subs in &mut self.subscribers {
                        subs.remove(&lease);
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
                        self.at(self.now + e, lease, AppAction::Extend(None));
                    }
                    if let Some(h) = hold {
                        self.at(self.now + h, lease, AppAction::Release);
                    }
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
        let mut latest: Option<(Micros, Micros, usize)> = None;
        for w in all {
            if let Some(prev) = latest {
                if prev.2 != w.2 && w.0 < prev.1 {
                    return Err(format!(
                        "overlap: L{} believed [{}, {}) and L{} believed [{}, {}) (µs, global)",
                        prev.2, prev.0, prev.1, w.2, w.0, w.1
                    ));
                }
            }
            if latest.is_none_or(|p| w.1 > p.1) {
                latest = Some(w);
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
                "L{i} (client {}): state {:?}, fence {:?}, windows {:?}, events {:?}",
                l.client,
                l.lock.state(),
                l.fence(),
                self.windows(i),
                l.events
            );
        }
        s
    }
}

// ---------------------------------------------------------------------------
// Randomised scenarios for the property tests.

/// The knobs a property test varies; everything else is drawn from `seed`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub seed: u64,
    pub nodes: usize,
    pub clients: usize,
    pub leases_per_client: usize,
    pub ttl_ms: u64,
    /// `None`: every lease waits forever; otherwise bounded waits up to this.
    pub max_wait_ms: Option<u64>,
    /// Client and server clock rates lie in `1e6 ± max_drift_ppm` (the core
    /// allows 1% + 2 ms in all, so up to 5,000 ppm on each side).
    pub max_drift_ppm: u64,
    pub pauses: bool,
    /// How many distinct nodes crash once each (lose data, delayed restart).
    pub crashes: usize,
    pub lossy: bool,
    pub divergent_counters: bool,
    pub auto_renew: bool,
    pub extends: bool,
    pub cancels: bool,
    /// Spurious wake-ups of waiters at random instants.
    pub noise: bool,
}

impl Scenario {
    pub fn build(&self) -> Sim {
        let mut rng = Rng::new(self.seed);
        let ttl = self.ttl_ms * MS;
        let net = if self.lossy {
            Net {
                delay: (100, 3 * MS),
                slow: 0.02,
                slow_delay: 60 * MS,
                drop_request: 0.05,
                drop_reply: 0.05,
                drop_wakeup: 0.2,
                timeout: 20 * MS,
            }
        } else {
            Net {
                // Sometimes a fast LAN, where a too-thin drift margin shows.
                delay: (100, [300, 3 * MS][rng.range(0, 1) as usize]),
                slow: 0.0,
                slow_delay: 0,
                drop_request: 0.0,
                drop_reply: 0.0,
                drop_wakeup: 0.0,
                timeout: 20 * MS,
            }
        };
        let mut sim = Sim::new(rng.next_u64(), self.nodes, net);
        // Clock rates within the bound, the extremes (where bugs live) often.
        let max = self.max_drift_ppm;
        let rate = |rng: &mut Rng| match rng.range(0, 3) {
            0 => 1_000_000 - max,
            1 => 1_000_000 + max,
            _ => 1_000_000 - max + rng.range(0, 2 * max),
        };
        for n in 0..self.nodes {
            sim.nodes[n].rate_ppm = rate(&mut rng);
        }
        if self.divergent_counters {
            for n in 0..self.nodes {
                let c = rng.range(0, 20) as i64;
                sim.set_counter(n, c);
            }
        }
        let horizon = ttl * 3 * (self.clients * self.leases_per_client) as u64;
        for _ in 0..self.clients {
            let clock = Clock {
                offset: rng.range(0, 1_000_000_000),
                rate_ppm: rate(&mut rng),
            };
            let c = sim.add_client(clock);
            if self.pauses {
                for _ in 0..rng.range(0, 2) {
                    let from = rng.range(0, horizon);
                    let len = rng.range(MS, 2 * ttl);
                    sim.clients[c].pauses.push((from, from + len));
                }
            }
            let mut prev: Option<usize> = None;
            for _ in 0..self.leases_per_client {
                let wait = match self.max_wait_ms {
                    None => Wait::Forever,
                    Some(w) => Wait::Bounded(Duration::from_millis(rng.range(0, w))),
                };
                let mut opts = LeaseOpts::new(self.ttl_ms, wait);
                opts.auto_renew = self.auto_renew && rng.chance(0.5);
                opts.plan.hold = Some(rng.range(0, 2 * ttl));
                if self.extends && rng.chance(0.5) {
                    opts.plan.extend_after = Some(rng.range(0, ttl));
                }
                let l = sim.add_lease(c, opts);
                match prev {
                    None => sim.at(rng.range(0, ttl), l, AppAction::Acquire),
                    Some(p) => sim.leases[p].plan.then = Some((l, rng.range(0, ttl / 2))),
                }
                prev = Some(l);
            }
        }
        if self.cancels {
            // Cancels at random instants; a cancel of a lease not yet started
            // or already done must be harmless (it is ignored by `app`).
            for l in 0..sim.leases.len() {
                if rng.chance(0.3) {
                    let at = rng.range(0, horizon);
                    sim.at(at, l, AppAction::Cancel);
                }
            }
        }
        let crashable = self.crashes.min(self.nodes);
        for node in 0..crashable {
            let at = rng.range(0, horizon);
            // Delayed restart: down for at least the longest TTL any key has.
            let down = ttl + rng.range(MS, ttl);
            sim.crash_at(at, node, down);
        }
        if self.noise {
            sim.noise(rng.range(ttl / 50, ttl / 10).max(200), 2 * horizon);
        }
        sim
    }
}
