//! redis-server processes the checker starts, faults and stops itself: each
//! a child process on a loopback port from `ci/ports.sh`, with no
//! persistence, its pid in `<run dir>/<name>.pid` (so `run.sh`'s trap can
//! stop exactly these even if the checker itself dies), killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::resp;

#[derive(Debug)]
pub struct RedisServer {
    pub name: String,
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// `Some(port)`: started as a replica of that port.
    replica_of: Option<u16>,
    /// Extra `redis-server` arguments (cluster mode, Sentinel), kept for
    /// restarts.
    extra: Vec<String>,
    /// A config file to start with (Sentinels need one they can rewrite).
    conf: Option<PathBuf>,
}

/// How to start a server of a topology (ports from `ci/ports.sh` cover a
/// cluster node's bus port, port + 10000, too).
#[derive(Clone, Debug, Default)]
pub struct Flavor {
    pub extra: Vec<String>,
    pub conf: Option<PathBuf>,
}

impl RedisServer {
    /// Start a fresh server on a port of its own from `ci/ports.sh` (kept
    /// across restarts, released on drop).
    pub async fn start(dir: &Path, name: &str, replica_of: Option<u16>) -> Result<Self, String> {
        Self::start_flavor(dir, name, replica_of, Flavor::default()).await
    }

    /// Start with extra arguments / a config file (see [`Flavor`]).
    pub async fn start_flavor(
        dir: &Path,
        name: &str,
        replica_of: Option<u16>,
        flavor: Flavor,
    ) -> Result<Self, String> {
        let mut last = String::new();
        for _ in 0..3 {
            // Only a process outside the allocator can hold a claimed port;
            // a failed start drops `server`, which releases the port.
            let port = fencelock_testkit::claim(1)[0];
            let mut server = RedisServer {
                name: name.to_owned(),
                port,
                dir: dir.to_owned(),
                child: None,
                replica_of,
                extra: flavor.extra.clone(),
                conf: flavor.conf.clone(),
            };
            match server.spawn().await {
                Ok(()) => return Ok(server),
                Err(e) => last = e,
            }
        }
        Err(format!("could not start redis-server {name}: {last}"))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn pidfile(&self) -> PathBuf {
        self.dir.join(format!("{}.pid", self.name))
    }

    async fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join(format!("{}.log", self.name));
        let mut cmd = Command::new("redis-server");
        if let Some(conf) = &self.conf {
            cmd.arg(conf);
        }
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            // Full syncs (a replica restarted after a failover) start at once.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log);
        if let Some(primary) = self.replica_of {
            cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        cmd.args(&self.extra);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        let pid = child.id();
        std::fs::write(self.pidfile(), pid.to_string()).map_err(|e| e.to_string())?;
        self.child = Some(child);
        // Ready when PING is answered by OUR process.
        for _ in 0..100 {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                let _ = std::fs::remove_file(self.pidfile());
                return Err(format!("redis-server {} exited at start", self.name));
            }
            if let Ok(resp::Value::Str(info)) = resp::cmd_str(self.port, &["INFO", "server"]).await
            {
                let info = String::from_utf8_lossy(&info);
                if info.contains(&format!("process_id:{pid}\r")) {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.kill_now(Signal::SIGKILL);
        Err(format!("redis-server {} did not answer", self.name))
    }

    /// Restart on the same port with an empty dataset (no persistence).
    pub async fn restart(&mut self, replica_of: Option<u16>) -> Result<(), String> {
        self.kill_now(Signal::SIGKILL);
        self.replica_of = replica_of;
        let mut last = String::new();
        // The old socket may linger briefly; Redis sets SO_REUSEADDR.
        for _ in 0..20 {
            match self.spawn().await {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last)
    }

    /// Send `signal`; SIGKILL/SIGTERM also reap the process.
    pub fn kill_now(&mut self, signal: Signal) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let _ = kill(Pid::from_raw(child.id() as i32), signal);
        if matches!(signal, Signal::SIGKILL | Signal::SIGTERM) {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.wait();
            self.child = None;
            let _ = std::fs::remove_file(self.pidfile());
        }
    }

    pub fn signal(&self, signal: Signal) {
        if let Some(child) = self.child.as_ref() {
            let _ = kill(Pid::from_raw(child.id() as i32), signal);
        }
    }

    /// Wait until a replica reports its link to the primary up.
    pub async fn wait_replica_synced(&self) -> Result<(), String> {
        for _ in 0..250 {
            if let Ok(resp::Value::Str(info)) =
                resp::cmd_str(self.port, &["INFO", "replication"]).await
            {
                if String::from_utf8_lossy(&info).contains("master_link_status:up") {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!("replica {} never synced", self.name))
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill_now(Signal::SIGKILL);
        fencelock_testkit::release(&[self.port]);
    }
}
