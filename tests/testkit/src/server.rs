//! A private redis-server (no persistence) on a claimed loopback port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports;

/// A child redis-server on a port of its own. `stop()` kills it and keeps
/// the port (`restart()` starts it again there, empty); drop kills it and
/// releases the port.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    pub port: u16,
    args: Vec<String>,
    dir: PathBuf,
}

impl Server {
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Extra redis-server arguments, e.g. `["--requirepass", "pw"]`.
    pub fn start_with(args: &[&str]) -> Server {
        let mut last = String::new();
        for _ in 0..3 {
            let port = ports::claim(1)[0];
            let dir = std::env::temp_dir().join(format!("fencelock-redis-{port}"));
            let _ = std::fs::create_dir_all(&dir);
            let mut server = Server {
                child: None,
                port,
                args: args.iter().map(|s| s.to_string()).collect(),
                dir,
            };
            match server.spawn() {
                Ok(()) => return server,
                // Only a process outside the allocator can hold a claimed
                // port: leave it that one and try another (drop releases).
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let exe = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut child = Command::new(exe)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (ci/setup.sh)");
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
                return Err(format!("redis-server on port {} did not start", self.port));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn password(&self) -> Option<String> {
        let at = self.args.iter().position(|a| a == "--requirepass")?;
        self.args.get(at + 1).cloned()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kill the server (SIGKILL: no goodbye to clients); the port stays ours.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("{e}");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        ports::release(&[self.port]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `process_id` from `INFO server` on 127.0.0.1:`port` (after AUTH when a
/// password is given), or None while nothing (or not Redis) answers.
fn process_id(port: u16, password: Option<&str>) -> Option<u32> {
    let stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut writer = stream;
    let mut line = String::new();
    if let Some(pw) = password {
        write!(writer, "*2\r\n$4\r\nAUTH\r\n${}\r\n{pw}\r\n", pw.len()).ok()?;
        reader.read_line(&mut line).ok()?;
        if !line.starts_with('+') {
            return None;
        }
    }
    writer
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    line.clear();
    reader.read_line(&mut line).ok()?;
    // `$<len>` then the text; an error (`-LOADING ...`) means not yet.
    let len: usize = line.strip_prefix('$')?.trim().parse().ok()?;
    let mut body = vec![0; len + 2];
    reader.read_exact(&mut body).ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))?
        .trim()
        .parse()
        .ok()
}
