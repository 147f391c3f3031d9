//! The Rust worker: a loop of acquire -> work -> fenced write -> release,
//! recording every step. Python (`workers/worker.py`) and Node
//! (`workers/worker.js`) implement the same loop with the same arguments and
//! the same history schema.
//!
//! `--primitive`: `mutex` (the lock; resource op `W`), `semaphore:N` (a
//! permit of N; op `P`) or `rw` (a read-write lock: iteration i, counted
//! from 0, takes the write lock when i % 3 == 0 (op `W`), else a read lock
//! (op `R`)). Leases of a primitive record their `role`.

use std::io::Write as _;
use std::time::Duration;

use fencelock::{Client, ClientOptions, Error, LockOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::clock::{mono_ns, sha256_hex};
use crate::history::Record;

#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub id: String,
    pub urls: Vec<String>,
    pub lock: String,
    pub ttl_ms: u64,
    pub wait_ms: u64,
    pub work_ms: u64,
    /// Pause after each release (lets the lock be free between holders).
    pub think_ms: u64,
    /// Take leases with auto-renewal (every ttl/3).
    pub auto_renew: bool,
    pub iterations: u64,
    pub seconds: f64,
    pub resource: u16,
    pub history: std::path::PathBuf,
    /// The worker ends its loop once this file exists.
    pub stop_file: std::path::PathBuf,
    /// `standalone`, `cluster` or `sentinel:<service>`.
    pub topology: String,
    /// `replicas=N` of the client.
    pub replicas: u32,
    /// `mutex`, `semaphore:N` or `rw`.
    pub primitive: String,
}

impl WorkerArgs {
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--id".into(),
            self.id.clone(),
            "--urls".into(),
            self.urls.join(","),
            "--lock".into(),
            self.lock.clone(),
            "--ttl-ms".into(),
            self.ttl_ms.to_string(),
            "--wait-ms".into(),
            self.wait_ms.to_string(),
            "--work-ms".into(),
            self.work_ms.to_string(),
            "--think-ms".into(),
            self.think_ms.to_string(),
            "--auto-renew".into(),
            u8::from(self.auto_renew).to_string(),
            "--iterations".into(),
            self.iterations.to_string(),
            "--seconds".into(),
            self.seconds.to_string(),
            "--resource".into(),
            self.resource.to_string(),
            "--history".into(),
            self.history.display().to_string(),
            "--stop-file".into(),
            self.stop_file.display().to_string(),
            "--topology".into(),
            self.topology.clone(),
            "--replicas".into(),
            self.replicas.to_string(),
            "--primitive".into(),
            self.primitive.clone(),
        ]
    }

    pub fn parse(args: &[String]) -> Result<WorkerArgs, String> {
        let get = |flag: &str| -> Result<String, String> {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1).cloned())
                .ok_or_else(|| format!("missing {flag}"))
        };
        let num = |flag: &str| -> Result<u64, String> {
            get(flag)?.parse().map_err(|e| format!("{flag}: {e}"))
        };
        Ok(WorkerArgs {
            id: get("--id")?,
            urls: get("--urls")?.split(',').map(str::to_owned).collect(),
            lock: get("--lock")?,
            ttl_ms: num("--ttl-ms")?,
            wait_ms: num("--wait-ms")?,
            work_ms: num("--work-ms")?,
            think_ms: num("--think-ms")?,
            auto_renew: num("--auto-renew")? != 0,
            iterations: num("--iterations")?,
            seconds: get("--seconds")?
                .parse()
                .map_err(|e| format!("--seconds: {e}"))?,
            resource: num("--resource")? as u16,
            history: get("--history")?.into(),
            stop_file: get("--stop-file")?.into(),
            topology: get("--topology")?,
            replicas: num("--replicas")? as u32,
            primitive: get("--primitive")?,
        })
    }
}

struct Log {
    id: String,
    file: std::fs::File,
}

impl Log {
    fn rec(&mut self, mut r: Record) {
        if r.t == 0 {
            r.t = mono_ns();
        }
        r.w = self.id.clone();
        let mut line = serde_json::to_string(&r).expect("serializable");
        line.push('\n');
        // One write(2) per line: a SIGKILL cannot leave half a record
        // except at the very end, which the reader skips.
        let _ = self.file.write_all(line.as_bytes());
    }
}

fn kind(e: &Error) -> String {
    match e {
        Error::NotAcquired { .. } => "not_acquired".into(),
        Error::LockLost { .. } => "lock_lost".into(),
        Error::Redis { .. } => "redis".into(),
        Error::Closed { .. } => "closed".into(),
        Error::StaleFence { .. } => "stale_fence".into(),
        Error::InvalidArgument(_) => "invalid_argument".into(),
    }
}

fn ms_f(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub async fn run(args: WorkerArgs) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.history)
        .map_err(|e| e.to_string())?;
    let mut log = Log {
        id: args.id.clone(),
        file,
    };
    log.rec(Record {
        ev: "start".into(),
        pid: Some(std::process::id()),
        lang: Some("rust".into()),
        ..Default::default()
    });
    let deadline = mono_ns() + (args.seconds * 1e9) as u64;
    let (topology, service) = match args.topology.split_once(':') {
        Some((topology, service)) => (topology, Some(service)),
        None => (args.topology.as_str(), None),
    };
    let options = ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(1000),
        topology: fencelock::Topology::parse(Some(topology), service).map_err(|e| e.to_string())?,
        replicas: args.replicas,
        ..ClientOptions::default()
    };
    // Connecting may fail while the nemesis has Redis down: retry, bounded.
    let client = loop {
        match Client::connect_with(args.urls.clone(), options.clone()).await {
            Ok(c) => break c,
            Err(e) if mono_ns() < deadline => {
                log.rec(Record {
                    ev: "connect_failed".into(),
                    err: Some(kind(&e)),
                    ..Default::default()
                });
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(format!("connect: {e}")),
        }
    };
    let mut resource = Resource::connect(args.resource).await?;
    let lock_options = LockOptions::new(Duration::from_millis(args.ttl_ms))
        .wait(Duration::from_millis(args.wait_ms))
        .auto_renew(args.auto_renew);
    let permits: Option<u32> = match args.primitive.split_once(':') {
        Some(("semaphore", n)) => Some(n.parse().map_err(|e| format!("--primitive: {e}"))?),
        _ => None,
    };
    let mut i = 0;
    while i < args.iterations && mono_ns() < deadline && !args.stop_file.exists() {
        // The role of this iteration (see the module docs) and its resource op.
        let (role, op) = match (permits, args.primitive.as_str()) {
            (Some(_), _) => (Some("permit"), 'P'),
            (None, "rw") if i % 3 == 0 => (Some("write"), 'W'),
            (None, "rw") => (Some("read"), 'R'),
            _ => (None, 'W'),
        };
        i += 1;
        let t0 = mono_ns();
        log.rec(Record {
            t: t0,
            ev: "acquire_start".into(),
            ..Default::default()
        });
        let name = args.lock.as_str();
        let acquired = match (permits, role) {
            (Some(n), _) => match client.semaphore(name, n) {
                Ok(sem) => sem.acquire(&lock_options).await,
                Err(e) => Err(e),
            },
            (None, Some(role)) => match client.rw_lock(name) {
                Ok(rw) if role == "write" => rw.write(&lock_options).await,
                Ok(rw) => rw.read(&lock_options).await,
                Err(e) => Err(e),
            },
            (None, None) => client.acquire(name, &lock_options).await,
        };
        let lease = match acquired {
            Ok(lease) => lease,
            Err(e) => {
                log.rec(Record {
                    ev: "acquire_failed".into(),
                    err: Some(kind(&e)),
                    ..Default::default()
                });
                if matches!(e, Error::Redis { .. }) {
                    // Redis is down (a fault): do not spin.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                continue;
            }
        };
        // Timestamp first, then validity: t + valid_ms never overstates it.
        let t = mono_ns();
        let hash = sha256_hex(lease.token().as_bytes());
        let fence = lease.fence();
        log.rec(Record {
            t,
            ev: "acquired".into(),
            lease: Some(hash.clone()),
            fence: Some(fence),
            valid_ms: Some(ms_f(lease.valid_for())),
            t0: Some(t0),
            role: role.map(str::to_owned),
            ..Default::default()
        });
        tokio::time::sleep(Duration::from_millis(args.work_ms)).await;
        let t = mono_ns();
        log.rec(Record {
            t,
            ev: "write_start".into(),
            lease: Some(hash.clone()),
            fence: Some(fence),
            valid_ms: Some(ms_f(lease.valid_for())),
            ..Default::default()
        });
        let accepted = resource.write(op, fence, &hash, &args.id).await?;
        log.rec(Record {
            ev: "write_end".into(),
            lease: Some(hash.clone()),
            fence: Some(fence),
            accepted: Some(accepted),
            ..Default::default()
        });
        let t = mono_ns();
        log.rec(Record {
            t,
            ev: "release_start".into(),
            lease: Some(hash.clone()),
            valid_ms: Some(ms_f(lease.valid_for())),
            ..Default::default()
        });
        let (ev, err) = match lease.release().await {
            Ok(()) => ("released", None),
            Err(Error::LockLost { .. }) => ("release_lost", None),
            Err(e) => ("release_error", Some(kind(&e))),
        };
        log.rec(Record {
            ev: ev.into(),
            lease: Some(hash),
            err,
            ..Default::default()
        });
        if args.think_ms > 0 {
            tokio::time::sleep(Duration::from_millis(args.think_ms)).await;
        }
    }
    client.close().await;
    log.rec(Record {
        ev: "done".into(),
        ..Default::default()
    });
    Ok(())
}

struct Resource {
    r: BufReader<tokio::net::tcp::OwnedReadHalf>,
    w: tokio::net::tcp::OwnedWriteHalf,
}

impl Resource {
    async fn connect(port: u16) -> Result<Resource, String> {
        let s = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| format!("resource: {e}"))?;
        let _ = s.set_nodelay(true);
        let (r, w) = s.into_split();
        Ok(Resource {
            r: BufReader::new(r),
            w,
        })
    }

    async fn write(
        &mut self,
        op: char,
        fence: u64,
        lease: &str,
        worker: &str,
    ) -> Result<bool, String> {
        self.w
            .write_all(format!("{op} {fence} {lease} {worker}\n").as_bytes())
            .await
            .map_err(|e| format!("resource: {e}"))?;
        let mut line = String::new();
        self.r
            .read_line(&mut line)
            .await
            .map_err(|e| format!("resource: {e}"))?;
        Ok(line.trim() == "1")
    }
}
