//! The redis-servers the checker starts, faults and stops itself:
//! fencelock-testkit's launcher (a child process on a loopback port from
//! `ci/ports.sh`, no persistence, killed on drop), each named in the run
//! dir: its pid in `<run dir>/<name>.pid` (so `run.sh`'s trap can stop
//! exactly these even if the checker itself dies) and its log beside it.
//! This module adds only what the nemesis needs: signals, and the
//! launcher's blocking waits kept off the other tasks of the runtime.

use std::path::{Path, PathBuf};

use fencelock_testkit::{Config, Server};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub type RedisServer = Server;

/// How to start a server of a topology (ports from `ci/ports.sh` cover a
/// cluster node's bus port, port + 10000, too).
#[derive(Clone, Debug, Default)]
pub struct Flavor {
    /// Extra `redis-server` arguments (cluster mode, Sentinel), kept for
    /// restarts.
    pub extra: Vec<String>,
    /// A config file to start with (Sentinels need one they can rewrite).
    pub conf: Option<PathBuf>,
}

/// Start a fresh server named `name` in `dir` (see [`start_flavor`]).
pub async fn start(dir: &Path, name: &str, replica_of: Option<u16>) -> Result<Server, String> {
    start_flavor(dir, name, replica_of, Flavor::default()).await
}

/// Start with extra arguments / a config file (see [`Flavor`]), on a port
/// of its own (kept across restarts, released on drop).
pub async fn start_flavor(
    dir: &Path,
    name: &str,
    replica_of: Option<u16>,
    flavor: Flavor,
) -> Result<Server, String> {
    // Full syncs (a replica restarted after a failover) start at once.
    let mut args: Vec<String> = ["--daemonize", "no", "--repl-diskless-sync-delay", "0"]
        .map(str::to_owned)
        .to_vec();
    args.extend(flavor.extra);
    let config = Config {
        args,
        conf: flavor.conf,
        run_dir: Some((dir.to_owned(), name.to_owned())),
        replica_of,
    };
    tokio::task::block_in_place(|| Server::launch(config))
        .map_err(|e| format!("could not start redis-server {name}: {e}"))
}

/// What the nemesis does to a server.
pub(crate) trait Nemesis {
    /// Send `signal` (SIGSTOP/SIGCONT) to the running server.
    fn signal(&self, signal: Signal);
    /// Restart on the same port with an empty dataset (no persistence), as
    /// a replica of `replica_of` or a primary.
    async fn restart_as(&mut self, replica_of: Option<u16>) -> Result<(), String>;
    /// Wait until a replica reports its link to the primary up.
    async fn replica_synced(&self) -> Result<(), String>;
}

impl Nemesis for Server {
    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid as i32), signal);
        }
    }

    async fn restart_as(&mut self, replica_of: Option<u16>) -> Result<(), String> {
        self.set_replica_of(replica_of);
        tokio::task::block_in_place(|| self.try_restart())
    }

    async fn replica_synced(&self) -> Result<(), String> {
        tokio::task::block_in_place(|| Server::wait_replica_synced(self))
    }
}
