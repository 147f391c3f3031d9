//! The orchestrator: for each named scenario, start private redis-servers
//! (and the proxy), the protected resource and a mix of workers, run the
//! scenario's nemesis until its time is up, let the workers finish, check
//! that nothing stays held, and hand the histories to the checker.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::checker::{self, Verdict};
use crate::clock::{mono_ns, sha256_hex};
use crate::history;
use crate::proxy::Proxy;
use crate::redis_server::{self, Flavor, Nemesis, RedisServer};
use crate::resource::Resource;
use crate::resp;
use crate::topology;
use crate::worker::WorkerArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topo {
    Single,
    Proxied,
    Redlock5,
    Redlock3,
    Failover,
    /// Primary + replica watched by 3 Sentinels; clients connect through them.
    Sentinel,
    /// 3 primaries + 3 replicas; clients get all nodes as seeds.
    Cluster,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    KillHolder,
    PauseHolder,
    RestartImmediate,
    RestartDelayed,
    ScriptFlush,
    ClientKill,
    ProxyLatency,
    ProxyDrop,
    RedlockMinority,
    RollingRestart,
    Failover,
    SentinelFailover,
    ClusterFailover,
    ClusterReshard,
}

/// What the workers take: the mutex, a permit of a semaphore of this many,
/// or a read-write lock's read or write side (see `worker.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    Mutex,
    Semaphore(u32),
    ReadWrite,
}

impl Prim {
    /// The workers' `--primitive`.
    fn arg(self) -> String {
        match self {
            Prim::Mutex => "mutex".into(),
            Prim::Semaphore(n) => format!("semaphore:{n}"),
            Prim::ReadWrite => "rw".into(),
        }
    }

    /// The sorted sets holding its leases (`lock` is the mutex's key).
    fn holder_sets(self, lock: &[u8]) -> Vec<Vec<u8>> {
        let with = |suffix: &str| [lock, suffix.as_bytes()].concat();
        match self {
            Prim::Mutex => Vec::new(),
            Prim::Semaphore(_) => vec![with(":semaphore")],
            Prim::ReadWrite => vec![with(":rw:writer"), with(":rw:readers")],
        }
    }

    /// Its fair line (empty once every worker has stopped waiting).
    fn line(self, lock: &[u8]) -> Option<Vec<u8>> {
        match self {
            Prim::Mutex => None,
            Prim::Semaphore(_) => Some([lock, b":semaphore:waiting"].concat()),
            Prim::ReadWrite => Some([lock, b":rw:waiting"].concat()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub primitive: Prim,
    pub topo: Topo,
    pub fault: Fault,
    /// Resource fence check disabled: the run must find (a) violations.
    pub control: bool,
    /// Whether the README promises (b) under this fault.
    pub b_guaranteed: bool,
    /// Whether fences must increase in real-time order, and the resource
    /// refuse only superseded leases ((e) and (f)).
    pub e_guaranteed: bool,
    /// Whether no lease may be lost (auto-renewed leases outlive the fault).
    pub renewals_survive: bool,
    pub ttl_ms: u64,
    pub work_ms: u64,
    pub think_ms: u64,
    pub auto_renew: bool,
    /// Share of the configured scenario time.
    pub time_share: f64,
    /// The clients' `replicas=N`.
    pub replicas: u32,
    pub what: &'static str,
}

/// The Sentinel-monitored service's name.
const SERVICE: &str = "fencelock";

pub fn scenarios() -> Vec<Spec> {
    let s = |name, topo, fault, b, e, ttl_ms, what| Spec {
        name,
        primitive: Prim::Mutex,
        topo,
        fault,
        control: false,
        b_guaranteed: b,
        e_guaranteed: e,
        renewals_survive: false,
        ttl_ms,
        work_ms: 2,
        think_ms: 0,
        auto_renew: false,
        time_share: 1.0,
        replicas: 0,
        what,
    };
    vec![
        s("baseline", Topo::Single, Fault::None, true, true, 1000, "no faults, single Redis"),
        s("kill-holder", Topo::Single, Fault::KillHolder, true, true, 1000,
          "SIGKILL the process holding the lock (found by its token); a fresh worker replaces it"),
        Spec { work_ms: 5, ..s("pause-holder", Topo::Single, Fault::PauseHolder, true, true, 500,
          "SIGSTOP the holder for ttl + 300 ms, then SIGCONT: it wakes up and writes with its old fence") },
        Spec { auto_renew: true, work_ms: 400, time_share: 0.5,
          ..s("renew-pause", Topo::Single, Fault::PauseHolder, true, true, 300,
          "auto-renewal (every ttl/3) during 400 ms critical sections with ttl 300 ms; the holder is SIGSTOPped past the TTL") },
        Spec { auto_renew: true, work_ms: 400, time_share: 0.5,
          ..s("renew-latency", Topo::Proxied, Fault::ProxyLatency, true, true, 300,
          "auto-renewal during 400 ms critical sections with ttl 300 ms through the proxy adding 0-150 ms: renewed validity must count from the send") },
        Spec { work_ms: 300, think_ms: 100, ..s("restart-immediate", Topo::Single, Fault::RestartImmediate, false, true, 1000,
          "SIGKILL redis-server and restart it at once, empty (no persistence); 300 ms critical sections") },
        s("restart-delayed", Topo::Single, Fault::RestartDelayed, true, true, 1000,
          "SIGKILL redis-server, keep it down for the max TTL, restart it empty"),
        s("script-flush", Topo::Single, Fault::ScriptFlush, true, true, 1000,
          "SCRIPT FLUSH every 100-400 ms (EVALSHA gets NOSCRIPT)"),
        s("client-kill", Topo::Single, Fault::ClientKill, true, true, 1000,
          "CLIENT KILL TYPE normal / pubsub every 200-600 ms (the library's connections)"),
        s("proxy-latency", Topo::Proxied, Fault::ProxyLatency, true, true, 1000,
          "TCP proxy adds 0-150 ms per chunk, changing every 0.5-1.5 s"),
        s("proxy-drop", Topo::Proxied, Fault::ProxyDrop, true, true, 1000,
          "TCP proxy cuts every connection every 100-500 ms (unknown outcomes)"),
        Spec { time_share: 0.5, ..s("redlock-baseline", Topo::Redlock5, Fault::None, true, true, 3000,
          "Redlock over 5 nodes, no faults (the reference for redlock-minority)") },
        s("redlock-minority", Topo::Redlock5, Fault::RedlockMinority, true, false, 3000,
          "Redlock over 5 nodes: 2 nodes SIGSTOPped past the TTL, or killed and restarted empty after the TTL"),
        // A 1 s TTL: a renewal (every ttl/3) may then be ~600 ms late. With
        // 300 ms, a worker starved for 200 ms on a loaded 2-core machine
        // lost its lease (1 quick run in 15 at load 13): a stall, which the
        // promise excludes, not the restart.
        Spec { auto_renew: true, work_ms: 3000, think_ms: 50, renewals_survive: true,
          ..s("rolling-restart", Topo::Redlock3, Fault::RollingRestart, true, true, 1000,
          "Redlock over 3 nodes restarted one at a time, each down for ttl + 300 ms and back empty, 1-1.3 s before the next goes down; auto-renewed 3 s critical sections (ttl 1 s) span one or two restarts and must all survive") },
        s("failover", Topo::Failover, Fault::Failover, false, true, 1000,
          "primary + replica behind the proxy: the replica is detached (lags), the primary grants the lock to a new holder the replica never hears of, is SIGKILLed, and the replica is promoted"),
        Spec { replicas: 1, ..s("failover-replicas", Topo::Failover, Fault::Failover, true, true, 1000,
          "failover (as above) with replicas=1: a grant counts only once WAIT saw the replica have it, so the lagging replica cannot lose a held lock") },
        Spec { replicas: 1, ..s("sentinel-failover", Topo::Sentinel, Fault::SentinelFailover, true, true, 1000,
          "primary + replica + 3 Sentinels, replicas=1: the replica is SIGSTOPped 300 ms, the primary SIGKILLed, the Sentinels promote the replica and the clients follow them") },
        Spec { replicas: 1, ..s("cluster-failover", Topo::Cluster, Fault::ClusterFailover, true, true, 1000,
          "3+3 Redis Cluster, replicas=1: the replica of the lock's shard is SIGSTOPped 300 ms, its primary SIGKILLed, the replica takes over the slot") },
        s("cluster-reshard", Topo::Cluster, Fault::ClusterReshard, true, true, 1000,
          "3+3 Redis Cluster: the lock's slot is moved to another primary (IMPORTING/MIGRATING, MIGRATE, SETSLOT) every 0.5-1.5 s while workers run"),
        // The controls pause the holder they find in Redis; it writes stale
        // only if that lands before its write, so their sections are long
        // (with 2-5 ms ones a loaded run could miss every time).
        Spec { control: true, time_share: 0.5, work_ms: 100,
          ..s("control-pause", Topo::Single, Fault::PauseHolder, true, true, 500,
          "pause-holder with the resource's fence check DISABLED, 100 ms critical sections: must report (a)") },
        Spec { control: true, time_share: 0.5, work_ms: 200,
          ..s("control-failover", Topo::Failover, Fault::Failover, false, false, 1000,
          "failover with the resource's fence check DISABLED, the dead primary's holder paused past the TTL in its 200 ms critical section: must report (a)") },
        // The semaphore (2 permits, 4 workers: two wait at any time) and the
        // read-write lock (each worker writes every third time, reads
        // otherwise). (a) is the resource's rule for their ops, (b) their
        // capacity (see checker.rs).
        Spec { primitive: Prim::Semaphore(2), time_share: 0.5,
          ..s("semaphore-baseline", Topo::Single, Fault::None, true, true, 1000,
          "semaphore of 2 permits, 4 workers, no faults") },
        Spec { primitive: Prim::Semaphore(2),
          ..s("semaphore-kill-holder", Topo::Single, Fault::KillHolder, true, true, 1000,
          "semaphore of 2: SIGKILL a process holding a permit; its permit expires, the line moves on") },
        Spec { primitive: Prim::Semaphore(2), work_ms: 5,
          ..s("semaphore-pause-holder", Topo::Single, Fault::PauseHolder, true, true, 500,
          "semaphore of 2: SIGSTOP a permit holder for ttl + 300 ms, then SIGCONT") },
        Spec { primitive: Prim::Semaphore(2),
          ..s("semaphore-proxy-drop", Topo::Proxied, Fault::ProxyDrop, true, true, 1000,
          "semaphore of 2 through the proxy cutting every connection every 100-500 ms (unknown outcomes, places left in the line)") },
        Spec { primitive: Prim::ReadWrite, time_share: 0.5,
          ..s("rw-baseline", Topo::Single, Fault::None, true, true, 1000,
          "read-write lock, 4 workers (a write every third time), no faults") },
        Spec { primitive: Prim::ReadWrite, work_ms: 5,
          ..s("rw-pause-holder", Topo::Single, Fault::PauseHolder, true, true, 500,
          "read-write lock: SIGSTOP a reader or the writer for ttl + 300 ms, then SIGCONT: its late read or write must be refused") },
        Spec { primitive: Prim::ReadWrite,
          ..s("rw-proxy-drop", Topo::Proxied, Fault::ProxyDrop, true, true, 1000,
          "read-write lock through the proxy cutting every connection every 100-500 ms") },
        Spec { primitive: Prim::ReadWrite, control: true, time_share: 0.5, work_ms: 100,
          ..s("control-rw-pause", Topo::Single, Fault::PauseHolder, true, true, 500,
          "rw-pause-holder with the resource's check DISABLED, 100 ms critical sections: must report (a)") },
    ]
}

#[derive(Clone, Debug)]
pub struct Config {
    pub seconds: f64,
    pub langs: Vec<String>,
    pub workers: usize,
    pub run_dir: PathBuf,
    pub repo: PathBuf,
    pub seed: u64,
}

#[derive(Debug)]
pub struct Row {
    pub spec: Spec,
    pub langs: String,
    pub faults: usize,
    /// Failover: leases granted by a primary that died before replicating them.
    pub unreplicated_locks: usize,
    pub verdict: Verdict,
    pub seconds: f64,
    pub pass: bool,
    pub error: Option<String>,
}

struct WorkerProc {
    id: String,
    lang: String,
    child: Child,
    history: PathBuf,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

struct Ctx<'a> {
    spec: &'a Spec,
    cfg: &'a Config,
    dir: PathBuf,
    lock: String,
    lock_key: Vec<u8>,
    servers: Vec<RedisServer>,
    /// Failover: index of the current primary in `servers`.
    primary: usize,
    /// Rolling restart: the node to restart next.
    next_restart: usize,
    proxy: Option<Proxy>,
    client_urls: Vec<String>,
    resource_port: u16,
    workers: Vec<WorkerProc>,
    retired: Vec<WorkerProc>,
    killed: HashSet<String>,
    started: Vec<String>,
    spawned: usize,
    faults: usize,
    /// Failover: tokens the primary held (and its replica did not) when it
    /// died, with the time of death; a lock lost if a worker had acquired
    /// it by then.
    unreplicated: Vec<(Vec<u8>, u64)>,
    /// Cluster: the lock's slot.
    slot: u16,
    /// What workers pass as `topology` (`standalone`, `cluster`, `sentinel:<service>`).
    worker_topology: String,
    /// Tokens read from Redis: none may appear in any worker output.
    tokens: HashSet<Vec<u8>>,
    rng: Rng,
    /// When the nemesis stops (controls may run on, up to `hard_deadline`,
    /// until they have seen what they must see).
    deadline: u64,
    hard_deadline: u64,
    stop_file: PathBuf,
}

fn sleep_ms(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

impl Ctx<'_> {
    fn worker_args(&self, id: &str, history: &Path) -> WorkerArgs {
        let remaining = self.hard_deadline.saturating_sub(mono_ns()) as f64 / 1e9;
        WorkerArgs {
            id: id.to_owned(),
            urls: self.client_urls.clone(),
            lock: self.lock.clone(),
            ttl_ms: self.spec.ttl_ms,
            wait_ms: 2 * self.spec.ttl_ms + 1000,
            work_ms: self.spec.work_ms,
            think_ms: self.spec.think_ms,
            auto_renew: self.spec.auto_renew,
            iterations: 1_000_000,
            seconds: remaining.max(0.5),
            resource: self.resource_port,
            history: history.to_owned(),
            stop_file: self.stop_file.clone(),
            topology: self.worker_topology.clone(),
            replicas: self.spec.replicas,
            primitive: self.spec.primitive.arg(),
        }
    }

    fn spawn_worker(&mut self, slot: usize) -> Result<(), String> {
        // fencelock/wasm drives the application's own Redis client: no
        // cluster, Sentinel or replicas option of its own.
        let plain = matches!(
            self.spec.topo,
            Topo::Single | Topo::Proxied | Topo::Redlock5 | Topo::Failover
        ) && self.spec.replicas == 0;
        let langs: Vec<&String> = self
            .cfg
            .langs
            .iter()
            .filter(|l| plain || l.as_str() != "wasm")
            .collect();
        let lang = langs[slot % langs.len()].clone();
        self.spawned += 1;
        let id = format!("{lang}-{slot}.{}", self.spawned);
        let history = self.dir.join(format!("{id}.jsonl"));
        let args = self.worker_args(&id, &history).to_args();
        let repo = &self.cfg.repo;
        let mut cmd = match lang.as_str() {
            "rust" => {
                let mut c = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
                c.arg("worker");
                c
            }
            "python" => {
                let mut c = Command::new(repo.join(".build/venv/bin/python"));
                c.arg(repo.join("tests/safety/workers/worker.py"));
                c
            }
            "node" => {
                let mut c = Command::new("node");
                c.arg(repo.join("tests/safety/workers/worker.js"));
                c
            }
            // The same Node worker on fencelock/wasm over an ioredis client.
            "wasm" => {
                let mut c = Command::new("node");
                c.arg(repo.join("tests/safety/workers/worker.js"));
                c.env("FENCELOCK_NODE_FLAVOUR", "wasm");
                c
            }
            other => return Err(format!("unknown worker language {other}")),
        };
        let stderr = std::fs::File::create(self.dir.join(format!("{id}.stderr")))
            .map_err(|e| e.to_string())?;
        let child = cmd
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawn {lang} worker: {e}"))?;
        if let Some(pid) = child.id() {
            let _ = std::fs::write(self.dir.join(format!("{id}.pid")), pid.to_string());
        }
        self.started.push(id.clone());
        self.workers.push(WorkerProc {
            id,
            lang,
            child,
            history,
        });
        Ok(())
    }

    /// The port to read the lock key from (bypassing the proxy).
    fn data_port(&self) -> u16 {
        self.servers[self.primary].port
    }

    /// The tokens holding the lock now: the mutex's key, or a semaphore's
    /// or read-write lock's holders (each remembered for the secrets check).
    async fn holder_tokens(&mut self) -> Vec<Vec<u8>> {
        let port = self.data_port();
        let mut tokens = Vec::new();
        let sets = self.spec.primitive.holder_sets(&self.lock_key);
        if sets.is_empty() {
            if let Ok(reply) = resp::cmd(port, &[b"GET", &self.lock_key]).await {
                tokens.extend(reply.as_bytes().map(<[u8]>::to_vec));
            }
        }
        for set in sets {
            if let Ok(resp::Value::Array(Some(members))) =
                resp::cmd(port, &[b"ZRANGE", &set, b"0", b"-1"]).await
            {
                tokens.extend(
                    members
                        .iter()
                        .filter_map(|m| m.as_bytes().map(<[u8]>::to_vec)),
                );
            }
        }
        self.tokens.extend(tokens.iter().cloned());
        tokens
    }

    /// A live worker whose lease currently holds the lock, if any.
    async fn holder(&mut self) -> Option<usize> {
        let holders = self.holder_tokens().await;
        holders.iter().find_map(|token| {
            let hash = sha256_hex(token);
            let needle = format!("\"ev\":\"acquired\",\"lease\":\"{hash}\"");
            self.workers.iter().position(|w| {
                std::fs::read_to_string(&w.history).is_ok_and(|h| h.contains(&needle))
            })
        })
    }

    fn signal_worker(&self, i: usize, sig: Signal) {
        if let Some(pid) = self.workers[i].child.id() {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    }

    async fn nemesis_step(&mut self) -> Result<(), String> {
        let ttl = self.spec.ttl_ms;
        match self.spec.fault {
            Fault::None => sleep_ms(200).await,
            Fault::KillHolder => {
                sleep_ms(self.rng.range(500, 1500)).await;
                if let Some(i) = self.holder().await {
                    self.signal_worker(i, Signal::SIGKILL);
                    let mut w = self.workers.remove(i);
                    let _ = w.child.wait().await;
                    self.killed.insert(w.id.clone());
                    let slot: usize =
                        w.id.split(['-', '.'])
                            .nth(1)
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                    self.retired.push(w);
                    self.faults += 1;
                    if mono_ns() + 1_000_000_000 < self.deadline {
                        self.spawn_worker(slot)?;
                    }
                }
            }
            Fault::PauseHolder => {
                sleep_ms(self.rng.range(300, 800)).await;
                if let Some(i) = self.holder().await {
                    self.signal_worker(i, Signal::SIGSTOP);
                    self.faults += 1;
                    sleep_ms(ttl + 300).await;
                    self.signal_worker(i, Signal::SIGCONT);
                }
            }
            Fault::RestartImmediate => {
                sleep_ms(self.rng.range(1000, 2000)).await;
                self.servers[0].restart_as(None).await?;
                self.faults += 1;
            }
            Fault::RestartDelayed => {
                sleep_ms(self.rng.range(1000, 2000)).await;
                self.servers[0].stop();
                self.faults += 1;
                sleep_ms(ttl + 200).await;
                self.servers[0].restart_as(None).await?;
            }
            Fault::ScriptFlush => {
                sleep_ms(self.rng.range(100, 400)).await;
                if resp::cmd_str(self.data_port(), &["SCRIPT", "FLUSH"])
                    .await
                    .is_ok()
                {
                    self.faults += 1;
                }
            }
            Fault::ClientKill => {
                sleep_ms(self.rng.range(200, 600)).await;
                let kind = if self.rng.next() % 3 == 0 {
                    "pubsub"
                } else {
                    "normal"
                };
                if let Ok(resp::Value::Int(n)) =
                    resp::cmd_str(self.data_port(), &["CLIENT", "KILL", "TYPE", kind]).await
                {
                    if n > 0 {
                        self.faults += 1;
                    }
                }
            }
            Fault::ProxyLatency => {
                let latency = [0, 2, 10, 50, 150][self.rng.range(0, 4) as usize];
                let proxy = self.proxy.as_ref().expect("proxied topology");
                proxy.set_latency(latency);
                if latency > 0 {
                    self.faults += 1;
                }
                sleep_ms(self.rng.range(500, 1500)).await;
            }
            Fault::ProxyDrop => {
                sleep_ms(self.rng.range(100, 500)).await;
                let proxy = self.proxy.as_ref().expect("proxied topology");
                if proxy.drop_all() > 0 {
                    self.faults += 1;
                }
            }
            Fault::RedlockMinority => {
                sleep_ms(self.rng.range(500, 1000)).await;
                let a = self.rng.range(0, 4) as usize;
                let b = (a + 1 + self.rng.range(0, 3) as usize) % 5;
                self.faults += 1;
                if self.rng.next() % 2 == 0 {
                    self.servers[a].signal(Signal::SIGSTOP);
                    self.servers[b].signal(Signal::SIGSTOP);
                    sleep_ms(ttl + 300).await;
                    self.servers[a].signal(Signal::SIGCONT);
                    self.servers[b].signal(Signal::SIGCONT);
                } else {
                    self.servers[a].stop();
                    self.servers[b].stop();
                    // The delayed-restart rule: down for at least the max TTL.
                    sleep_ms(ttl + 300).await;
                    self.servers[a].restart_as(None).await?;
                    self.servers[b].restart_as(None).await?;
                }
            }
            Fault::RollingRestart => {
                // As an operator waits for a node to be healthy: time for the
                // clients to reconnect to the node restarted last (backoff at
                // most 250 ms) and for a renewal (every ttl/3) to put the key
                // back there before the next one goes down. A fixed ttl-sized
                // gap was too short on a loaded machine, which then measured
                // scheduling delay rather than the library.
                sleep_ms(self.rng.range(1000, 1300)).await;
                let node = self.next_restart;
                self.next_restart = (node + 1) % self.servers.len();
                self.servers[node].stop();
                self.faults += 1;
                sleep_ms(ttl + 300).await;
                self.servers[node].restart_as(None).await?;
            }
            Fault::Failover => {
                sleep_ms(self.rng.range(800, 1500)).await;
                let (p, r) = (self.primary, 1 - self.primary);
                // Replication lag: the replica stops receiving (it is
                // promoted right now, REPLICAOF NO ONE, but nobody talks to
                // it yet) while the primary keeps granting; as soon as the
                // primary hands the lock to a holder the replica never heard
                // of (bounded wait), the primary dies with that write.
                // (SIGSTOP of the replica would not do: the kernel buffers
                // the stream and delivers it on SIGCONT.)
                let promoted =
                    resp::cmd_str(self.servers[r].port, &["REPLICAOF", "NO", "ONE"]).await;
                if !matches!(
                    promoted,
                    Ok(resp::Value::Simple(_) | resp::Value::Bulk(Some(_)))
                ) {
                    return Err(format!("REPLICAOF NO ONE failed: {promoted:?}"));
                }
                let key = self.lock_key.clone();
                let (rport, pport) = (self.servers[r].port, self.servers[p].port);
                let on_replica = resp::cmd(rport, &[b"GET", &key]).await.ok();
                for _ in 0..250 {
                    let on_primary = resp::cmd(pport, &[b"GET", &key]).await.ok();
                    if let Some(t) = on_primary.as_ref().and_then(resp::Value::as_bytes) {
                        self.tokens.insert(t.to_vec());
                    }
                    if let Some(t) = on_primary.as_ref().and_then(resp::Value::as_bytes) {
                        if on_primary != on_replica {
                            self.unreplicated.push((t.to_vec(), 0));
                            break;
                        }
                    }
                    sleep_ms(2).await;
                }
                // Control run: with time-based fences the promoted replica's
                // holder gets the larger fence, so the dead primary's holder
                // only writes stale if it outlives it: pause it meanwhile.
                let paused = if self.spec.control {
                    self.holder().await
                } else {
                    None
                };
                if let Some(i) = paused {
                    self.signal_worker(i, Signal::SIGSTOP);
                }
                self.servers[p].stop();
                if let Some((_, died)) = self.unreplicated.last_mut().filter(|(_, d)| *d == 0) {
                    *died = mono_ns();
                }
                let proxy = self.proxy.as_ref().expect("failover uses the proxy");
                proxy.set_upstream(self.servers[r].port);
                proxy.drop_all();
                self.primary = r;
                self.faults += 1;
                let new_primary = self.servers[r].port;
                self.servers[p].restart_as(Some(new_primary)).await?;
                self.servers[p].replica_synced().await?;
                if let Some(i) = paused {
                    sleep_ms(self.spec.ttl_ms + 300).await;
                    self.signal_worker(i, Signal::SIGCONT);
                }
            }
            Fault::SentinelFailover => {
                sleep_ms(self.rng.range(800, 1500)).await;
                let (p, r) = (self.primary, 1 - self.primary);
                // Replication stalls (the replica is stopped, shorter than the
                // Sentinels' down-after), then the primary dies with whatever
                // it granted meanwhile; with replicas=1 those grants failed.
                self.servers[r].signal(Signal::SIGSTOP);
                sleep_ms(300).await;
                self.servers[p].stop();
                self.servers[r].signal(Signal::SIGCONT);
                self.faults += 1;
                let want = self.servers[r].port;
                let sentinel = self.servers[2].port;
                let deadline = mono_ns() + 20_000_000_000;
                while topology::sentinel_primary(sentinel, SERVICE).await != Some(want) {
                    if mono_ns() > deadline {
                        return Err("the Sentinels did not promote the replica".into());
                    }
                    sleep_ms(50).await;
                }
                self.primary = r;
                self.servers[p].restart_as(Some(want)).await?;
                self.servers[p].replica_synced().await?;
            }
            Fault::ClusterFailover => {
                sleep_ms(self.rng.range(800, 1500)).await;
                let view = topology::nodes(self.data_port()).await?;
                let old = topology::owner(&view, self.slot)
                    .ok_or("no owner of the slot")?
                    .clone();
                let replica = topology::replica_of(&view, &old.id)
                    .ok_or("the lock's shard has no replica")?
                    .clone();
                let (p, r) = (self.index_of(old.port), self.index_of(replica.port));
                self.servers[r].signal(Signal::SIGSTOP);
                sleep_ms(300).await;
                self.servers[p].stop();
                self.servers[r].signal(Signal::SIGCONT);
                self.faults += 1;
                let live: Vec<u16> = self
                    .servers
                    .iter()
                    .filter(|s| s.is_running())
                    .map(|s| s.port)
                    .collect();
                let new =
                    topology::wait_new_owner(&live, self.slot, old.port, Duration::from_secs(20))
                        .await?;
                self.primary = self.index_of(new);
                // Back with its nodes.conf, the old primary rejoins as a
                // replica of the node that took its slots over.
                self.servers[p].restart_as(None).await?;
                self.servers[p].replica_synced().await?;
            }
            Fault::ClusterReshard => {
                sleep_ms(self.rng.range(500, 1500)).await;
                let view = topology::nodes(self.data_port()).await?;
                let src = topology::owner(&view, self.slot)
                    .ok_or("no owner of the slot")?
                    .clone();
                // Another shard's primary: one that serves slots.
                let others: Vec<&topology::ClusterNode> = view
                    .iter()
                    .filter(|n| n.primary && !n.failed && n.id != src.id && !n.slots.is_empty())
                    .collect();
                if others.is_empty() {
                    return Err("no other shard's primary to move the slot to".into());
                }
                let dst = others[self.rng.range(0, others.len() as u64 - 1) as usize].clone();
                let all: Vec<u16> = self.servers.iter().map(|s| s.port).collect();
                topology::move_slot(&all, &src, &dst, self.slot).await?;
                self.primary = self.index_of(dst.port);
                self.faults += 1;
            }
        }
        Ok(())
    }

    fn index_of(&self, port: u16) -> usize {
        self.servers
            .iter()
            .position(|s| s.port == port)
            .expect("a node of this run")
    }

    /// After the nemesis: everything running and unpaused again.
    async fn heal(&mut self) -> Result<(), String> {
        for i in 0..self.workers.len() {
            self.signal_worker(i, Signal::SIGCONT);
        }
        if let Some(p) = &self.proxy {
            p.set_latency(0);
        }
        let primary = self.data_port();
        for (i, s) in self.servers.iter_mut().enumerate() {
            s.signal(Signal::SIGCONT);
            if !s.is_running() {
                // A Sentinel group's data node comes back as a replica.
                let of = (self.spec.topo == Topo::Sentinel && i < 2).then_some(primary);
                s.restart_as(of).await?;
            }
        }
        Ok(())
    }

    /// Secrets: no token read from Redis during the run may appear in any
    /// history, worker stderr (the libraries' logs) or server log.
    fn token_leaks(&self) -> Vec<String> {
        let mut leaks = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return leaks;
        };
        for entry in entries.flatten() {
            // Histories, worker stderr, server logs; not Redis's own data
            // files (a replica's full sync writes dump.rdb, tokens included).
            let name = entry.file_name().to_string_lossy().into_owned();
            if ![".jsonl", ".stderr", ".log"]
                .iter()
                .any(|e| name.ends_with(e))
            {
                continue;
            }
            let Ok(data) = std::fs::read(entry.path()) else {
                continue;
            };
            // One pass per distinct token length (all UUIDs: one pass).
            let lengths: HashSet<usize> = self.tokens.iter().map(Vec::len).collect();
            let found = lengths
                .iter()
                .filter(|&&n| n > 0)
                .any(|&n| data.windows(n).any(|w| self.tokens.contains(w)));
            if found {
                leaks.push(format!("a token appears in {name}"));
            }
        }
        leaks
    }

    /// (d): after the workers exit, no lock key may remain once a TTL has
    /// passed, and no lock key may ever be without a TTL.
    async fn final_check(&self) -> Vec<String> {
        let mut findings = Vec::new();
        let ports: Vec<u16> = match self.spec.topo {
            // Replicas hold copies (a cluster replica answers MOVED): the
            // primary alone says whether the lock is still held.
            Topo::Failover | Topo::Sentinel | Topo::Cluster => vec![self.data_port()],
            _ => self.servers.iter().map(|s| s.port).collect(),
        };
        // A primitive's holders live in sorted sets. Its line empties as
        // waiters give up; a place whose leaving was lost (a cut connection)
        // lapses within 3 s (the core's `Kind::line_patience`), never later.
        let mut keys = self.spec.primitive.holder_sets(&self.lock_key);
        if keys.is_empty() {
            keys.push(self.lock_key.clone());
        }
        let line = self.spec.primitive.line(&self.lock_key);
        let mut line_ms = 0i64;
        for (&port, line) in ports.iter().flat_map(|p| line.iter().map(move |l| (p, l))) {
            match resp::cmd(port, &[b"PTTL", line]).await {
                Ok(resp::Value::Int(-1)) => {
                    findings.push(format!("a line without TTL on 127.0.0.1:{port}"))
                }
                Ok(resp::Value::Int(ms)) if ms > 3_000 => {
                    findings.push(format!("the line's PTTL {ms} ms exceeds a place's 3 s"))
                }
                Ok(resp::Value::Int(ms)) => line_ms = line_ms.max(ms),
                other => findings.push(format!("PTTL on 127.0.0.1:{port}: {other:?}")),
            }
        }
        let mut wait_ms = 0i64;
        for (&port, key) in ports.iter().flat_map(|p| keys.iter().map(move |k| (p, k))) {
            match resp::cmd(port, &[b"PTTL", key]).await {
                Ok(resp::Value::Int(-1)) => {
                    findings.push(format!("lock key without TTL on 127.0.0.1:{port}"))
                }
                Ok(resp::Value::Int(ms)) => wait_ms = wait_ms.max(ms),
                other => findings.push(format!("PTTL on 127.0.0.1:{port}: {other:?}")),
            }
        }
        if wait_ms > self.spec.ttl_ms as i64 {
            findings.push(format!("lock key PTTL {wait_ms} ms exceeds the TTL"));
        }
        let wait_ms = wait_ms.clamp(0, self.spec.ttl_ms as i64).max(line_ms);
        if wait_ms > 0 {
            sleep_ms(wait_ms as u64 + 50).await;
        }
        for (&port, line) in ports.iter().flat_map(|p| line.iter().map(move |l| (p, l))) {
            if let Ok(resp::Value::Int(1)) = resp::cmd(port, &[b"EXISTS", line]).await {
                findings.push(format!(
                    "a place in the line outlived its waiter on 127.0.0.1:{port}"
                ));
            }
        }
        for (&port, key) in ports.iter().flat_map(|p| keys.iter().map(move |k| (p, k))) {
            if let Ok(resp::Value::Int(1)) = resp::cmd(port, &[b"EXISTS", key]).await {
                findings.push(format!("lock still held on 127.0.0.1:{port} after its TTL"));
            }
        }
        findings
    }
}

pub async fn run_scenario(spec: &Spec, cfg: &Config, index: u64) -> Row {
    let t_start = mono_ns();
    let mut row = Row {
        spec: spec.clone(),
        langs: cfg.langs.join("+"),
        faults: 0,
        unreplicated_locks: 0,
        verdict: Verdict::default(),
        seconds: 0.0,
        pass: false,
        error: None,
    };
    match run_inner(spec, cfg, index).await {
        Ok((faults, unreplicated, verdict)) => {
            row.faults = faults;
            row.unreplicated_locks = unreplicated;
            row.verdict = verdict;
        }
        Err(e) => row.error = Some(e),
    }
    let v = &row.verdict;
    row.pass = row.error.is_none()
        && v.secrets.is_empty()
        && v.c.is_empty()
        && v.d.is_empty()
        && v.critical_sections > 0
        && if spec.control {
            !v.a.is_empty()
        } else {
            v.a.is_empty()
                && (v.b.is_empty() || !spec.b_guaranteed)
                && ((v.e.is_empty() && v.f.is_empty()) || !spec.e_guaranteed)
                && (v.lost == 0 || !spec.renewals_survive)
        };
    row.seconds = (mono_ns() - t_start) as f64 / 1e9;
    row
}

async fn run_inner(
    spec: &Spec,
    cfg: &Config,
    index: u64,
) -> Result<(usize, usize, Verdict), String> {
    let dir = cfg.run_dir.join(spec.name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let lock = format!("safety-{}-{:x}", spec.name, cfg.seed);
    let lock_key = format!("fencelock:{{{lock}}}").into_bytes();

    let mut servers = Vec::new();
    let mut proxy = None;
    let client_urls;
    let mut worker_topology = "standalone".to_owned();
    let mut slot = 0;
    let mut primary = 0;
    match spec.topo {
        Topo::Single => {
            servers.push(redis_server::start(&dir, "redis", None).await?);
            client_urls = vec![servers[0].url()];
        }
        Topo::Proxied => {
            servers.push(redis_server::start(&dir, "redis", None).await?);
            let p = Proxy::start(servers[0].port)
                .await
                .map_err(|e| e.to_string())?;
            client_urls = vec![p.url()];
            proxy = Some(p);
        }
        Topo::Redlock5 | Topo::Redlock3 => {
            let n = if spec.topo == Topo::Redlock5 { 5 } else { 3 };
            for i in 0..n {
                servers.push(redis_server::start(&dir, &format!("node{i}"), None).await?);
            }
            client_urls = servers.iter().map(RedisServer::url).collect();
        }
        Topo::Failover => {
            servers.push(redis_server::start(&dir, "a", None).await?);
            let primary = servers[0].port;
            servers.push(redis_server::start(&dir, "b", Some(primary)).await?);
            servers[1].replica_synced().await?;
            let p = Proxy::start(primary).await.map_err(|e| e.to_string())?;
            client_urls = vec![p.url()];
            proxy = Some(p);
        }
        Topo::Sentinel => {
            servers.push(redis_server::start(&dir, "a", None).await?);
            let primary = servers[0].port;
            servers.push(redis_server::start(&dir, "b", Some(primary)).await?);
            servers[1].replica_synced().await?;
            for i in 1..=3 {
                let conf = dir.join(format!("sentinel{i}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
                         sentinel down-after-milliseconds {SERVICE} 1000\n\
                         sentinel failover-timeout {SERVICE} 4000\n"
                    ),
                )
                .map_err(|e| e.to_string())?;
                let flavor = Flavor {
                    extra: vec!["--sentinel".into()],
                    conf: Some(conf),
                };
                servers
                    .push(redis_server::start_flavor(&dir, &format!("s{i}"), None, flavor).await?);
            }
            // Every Sentinel knows the other two before the nemesis starts.
            for _ in 0..400 {
                let mut known = 0;
                for s in &servers[2..] {
                    if let Ok(resp::Value::Array(Some(v))) =
                        resp::cmd_str(s.port, &["SENTINEL", "sentinels", SERVICE]).await
                    {
                        known += usize::from(v.len() == 2);
                    }
                }
                if known == 3 {
                    break;
                }
                sleep_ms(50).await;
            }
            client_urls = servers[2..].iter().map(RedisServer::url).collect();
            worker_topology = format!("sentinel:{SERVICE}");
        }
        Topo::Cluster => {
            for i in 0..6 {
                let flavor = Flavor {
                    extra: [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &format!("nodes-{i}.conf"),
                        "--cluster-node-timeout",
                        "1500",
                    ]
                    .map(str::to_owned)
                    .to_vec(),
                    conf: None,
                };
                servers
                    .push(redis_server::start_flavor(&dir, &format!("c{i}"), None, flavor).await?);
            }
            let ports: Vec<u16> = servers.iter().map(|s| s.port).collect();
            topology::create_cluster(&ports).await?;
            slot = topology::keyslot(ports[0], &lock_key).await?;
            let view = topology::nodes(ports[0]).await?;
            let owner = topology::owner(&view, slot)
                .ok_or("no owner of the lock's slot")?
                .port;
            primary = ports.iter().position(|&p| p == owner).expect("one of ours");
            client_urls = servers.iter().map(RedisServer::url).collect();
            worker_topology = "cluster".to_owned();
        }
    }
    let resource = Resource::start(!spec.control)
        .await
        .map_err(|e| e.to_string())?;
    let seconds = cfg.seconds * spec.time_share;
    let mut ctx = Ctx {
        spec,
        cfg,
        dir: dir.clone(),
        lock,
        lock_key,
        servers,
        primary,
        next_restart: 0,
        proxy,
        client_urls,
        resource_port: resource.port,
        workers: Vec::new(),
        retired: Vec::new(),
        killed: HashSet::new(),
        started: Vec::new(),
        spawned: 0,
        faults: 0,
        unreplicated: Vec::new(),
        slot,
        worker_topology,
        tokens: HashSet::new(),
        rng: Rng(cfg.seed ^ (index.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1),
        deadline: mono_ns() + (seconds * 1e9) as u64,
        hard_deadline: mono_ns() + (seconds * if spec.control { 3e9 } else { 1e9 }) as u64,
        stop_file: dir.join("STOP"),
    };
    for slot in 0..cfg.workers {
        ctx.spawn_worker(slot)?;
    }
    // The nemesis: bounded by the scenario's deadline (each step is bounded).
    let mut nemesis_error = None;
    // A control run goes on (up to 3x its time) until it has produced a
    // stale write, so a short run cannot make it pass or fail by luck.
    let must_go_on = |ctx: &Ctx<'_>| {
        spec.control
            && mono_ns() < ctx.hard_deadline
            && checker::stale_accepted(&resource.log()) == 0
    };
    while mono_ns() < ctx.deadline || must_go_on(&ctx) {
        ctx.holder_tokens().await;
        if let Err(e) = ctx.nemesis_step().await {
            nemesis_error = Some(e);
            break;
        }
    }
    let _ = std::fs::write(&ctx.stop_file, b"stop\n");
    ctx.heal().await?;
    // Workers stop at the deadline plus at most one bounded acquire wait.
    let grace = Duration::from_millis(2 * spec.ttl_ms + 1000 + 10_000);
    let mut finished = HashSet::new();
    let until = tokio::time::Instant::now() + grace;
    for w in ctx.workers.iter_mut() {
        match tokio::time::timeout_at(until, w.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => {
                let err = std::fs::read_to_string(ctx.dir.join(format!("{}.stderr", w.id)))
                    .unwrap_or_default();
                eprintln!(
                    "  worker {} ({}) exited with {status}: {}",
                    w.id,
                    w.lang,
                    err.trim()
                );
            }
            _ => {
                let _ = w.child.start_kill();
                let _ = w.child.wait().await;
            }
        }
    }
    for w in ctx.workers.iter().chain(ctx.retired.iter()) {
        let _ = std::fs::remove_file(ctx.dir.join(format!("{}.pid", w.id)));
    }
    let d_findings = ctx.final_check().await;

    let mut records = Vec::new();
    for w in ctx.workers.iter().chain(ctx.retired.iter()) {
        let h = history::read(&w.history);
        if h.iter().any(|r| r.ev == "done") {
            finished.insert(w.id.clone());
        }
        records.extend(h);
    }
    records.sort_by_key(|r| r.t);
    let leaks = ctx.token_leaks();
    let verdict = checker::check(
        &records,
        &resource.log(),
        &ctx.killed,
        &finished,
        &ctx.started,
        d_findings,
        match spec.primitive {
            Prim::Semaphore(n) => n as usize,
            _ => 1,
        },
    );
    let mut verdict = verdict;
    verdict.secrets = leaks;
    if let Some(e) = nemesis_error {
        return Err(format!("nemesis: {e}"));
    }
    // A lock lost in a failover: a token only the dead primary had, that a
    // worker had been handed before it died (with replicas=1 such grants
    // are refused). The same token may be granted again later, by the new
    // primary (a retry after the unknown outcome): that one was not lost.
    let lost = ctx
        .unreplicated
        .iter()
        .filter(|(token, died)| {
            let hash = sha256_hex(token);
            records.iter().any(|r| {
                r.ev == "acquired" && r.t < *died && r.lease.as_deref() == Some(hash.as_str())
            })
        })
        .count();
    Ok((ctx.faults, lost, verdict))
}
