//! A private redis-server (no persistence) on a claimed loopback port: the
//! one launcher of the Rust suites (driver tests, conformance, the safety
//! checker's topologies).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports;
use crate::resp::{self, Value};

/// How to start a server beyond the defaults (`Server::start` needs none).
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Extra redis-server arguments, e.g. `["--requirepass", "pw"]`.
    pub args: Vec<String>,
    /// A config file to start with (a Sentinel needs one it can rewrite).
    pub conf: Option<PathBuf>,
    /// `Some((dir, name))`: the server's working directory is `dir` (shared
    /// with others, kept on drop), it logs to `<dir>/<name>.log` and its pid
    /// is in `<dir>/<name>.pid` while it runs, so a script's trap can stop
    /// exactly it even if the test process dies. None: a private directory
    /// of its own, removed on drop, and no log.
    pub run_dir: Option<(PathBuf, String)>,
    /// Start as a replica of 127.0.0.1:this port.
    pub replica_of: Option<u16>,
}

/// A child redis-server on a port of its own. `stop()` kills it and keeps
/// the port (`restart()` starts it again there, empty); drop kills it and
/// releases the port.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    config: Config,
    dir: PathBuf,
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Extra redis-server arguments, e.g. `["--requirepass", "pw"]`.
    pub fn start_with(args: &[&str]) -> Server {
        let config = Config {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Config::default()
        };
        Self::launch(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start a server as `config` says.
    pub fn launch(config: Config) -> Result<Server, String> {
        let mut last = String::new();
        for _ in 0..3 {
            let port = ports::claim(1)[0];
            let dir = match &config.run_dir {
                Some((dir, _)) => dir.clone(),
                None => std::env::temp_dir().join(format!("fencelock-redis-{port}")),
            };
            let _ = std::fs::create_dir_all(&dir);
            let mut server = Server {
                child: None,
                port,
                config: config.clone(),
                dir,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                // Only a process outside the allocator can hold a claimed
                // port: leave it that one and try another (drop releases).
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let exe = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut cmd = Command::new(exe);
        if let Some(conf) = &self.config.conf {
            cmd.arg(conf);
        }
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir);
        if let Some((dir, name)) = &self.config.run_dir {
            cmd.arg("--logfile").arg(dir.join(format!("{name}.log")));
        }
        if let Some(primary) = self.config.replica_of {
            cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        let mut child = cmd
            .args(&self.config.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server (ci/setup.sh installs it): {e}"))?;
        if let Some(pidfile) = self.pidfile() {
            std::fs::write(pidfile, child.id().to_string()).map_err(|e| e.to_string())?;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // Ready when the server that answers is this child, not a stranger
        // on the port.
        let password = self.password();
        loop {
            if process_id(self.port, password.as_deref()) == Some(child.id()) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
                self.remove_pidfile();
                return Err(format!("redis-server on port {} did not start", self.port));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn pidfile(&self) -> Option<PathBuf> {
        let (dir, name) = self.config.run_dir.as_ref()?;
        Some(dir.join(format!("{name}.pid")))
    }

    fn remove_pidfile(&self) {
        if let Some(pidfile) = self.pidfile() {
            let _ = std::fs::remove_file(pidfile);
        }
    }

    fn password(&self) -> Option<String> {
        let args = &self.config.args;
        let at = args.iter().position(|a| a == "--requirepass")?;
        args.get(at + 1).cloned()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The running server's process id (None once stopped), e.g. to pause
    /// it with SIGSTOP.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kill the server (SIGKILL: no goodbye to clients); the port stays ours.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.remove_pidfile();
        }
    }

    /// Start again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        if let Err(e) = self.try_restart() {
            panic!("{e}");
        }
    }

    /// `restart`, reporting a failure instead of panicking.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.stop();
        let mut last = String::new();
        // The old socket may linger briefly; Redis sets SO_REUSEADDR.
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last)
    }

    /// Whom the next `restart` replicates (None: a primary).
    pub fn set_replica_of(&mut self, primary: Option<u16>) {
        self.config.replica_of = primary;
    }

    /// Wait (up to 5 s) until this replica reports its link to the primary
    /// up.
    pub fn wait_replica_synced(&self) -> Result<(), String> {
        for _ in 0..250 {
            let info = resp::cmd(self.port, &[b"INFO", b"replication"], RESP_TIMEOUT);
            if let Ok(Value::Bulk(Some(info))) = info {
                if String::from_utf8_lossy(&info).contains("master_link_status:up") {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("replica on port {} never synced", self.port))
    }
}

const RESP_TIMEOUT: Duration = Duration::from_secs(2);

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        ports::release(&[self.port]);
        if self.config.run_dir.is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `process_id` from `INFO server` on 127.0.0.1:`port` (after AUTH when a
/// password is given), or None while nothing (or not Redis) answers.
fn process_id(port: u16, password: Option<&str>) -> Option<u32> {
    let mut conn = resp::Conn::open(port, RESP_TIMEOUT).ok()?;
    if let Some(pw) = password {
        if !matches!(
            conn.try_cmd(&[b"AUTH", pw.as_bytes()]),
            Ok(Value::Simple(_))
        ) {
            return None;
        }
    }
    // An error (`-LOADING ...`) means not yet.
    let Ok(Value::Bulk(Some(info))) = conn.try_cmd(&[b"INFO", b"server"]) else {
        return None;
    };
    String::from_utf8_lossy(&info)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))?
        .trim()
        .parse()
        .ok()
}
