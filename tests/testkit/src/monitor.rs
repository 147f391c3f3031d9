//! MONITOR: what a server executed, parsed with the same rules as
//! tests/support/fltest.py and tests/support/fltest.js.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::resp::{Conn, Value};

/// One line of MONITOR output: the client ("127.0.0.1:5000", or "lua") and
/// the command's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub client: String,
    pub args: Vec<Vec<u8>>,
}

/// `+1700000000.123456 [0 127.0.0.1:5000] "EVALSHA" "abc" ...`
pub fn parse_monitor_line(line: &str) -> Option<Seen> {
    let open = line.find('[')?;
    let close = line[open..].find(']')? + open;
    let client = line[open + 1..close].split_once(' ')?.1.to_owned();
    let mut args = Vec::new();
    let rest = &line.as_bytes()[close + 1..];
    let mut i = 0;
    while i < rest.len() {
        if rest[i] != b'"' {
            i += 1;
            continue;
        }
        i += 1;
        let mut arg = Vec::new();
        while i < rest.len() && rest[i] != b'"' {
            if rest[i] == b'\\' && i + 1 < rest.len() {
                i += 1;
                match rest[i] {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' => {
                        let h = std::str::from_utf8(&rest[i + 1..i + 3]).ok()?;
                        arg.push(u8::from_str_radix(h, 16).ok()?);
                        i += 2;
                    }
                    other => arg.push(other),
                }
            } else {
                arg.push(rest[i]);
            }
            i += 1;
        }
        i += 1;
        args.push(arg);
    }
    Some(Seen { client, args })
}

const MARKER: &str = "monitor-sync-";

/// A MONITOR connection read by a background thread (closed on drop).
#[derive(Debug)]
pub struct Monitor {
    seen: Arc<(Mutex<Vec<Seen>>, Condvar)>,
    url: String,
    conn: std::net::TcpStream,
    /// How much of `seen` `commands()` has returned.
    counted: usize,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
    }
}

impl Monitor {
    /// Starts MONITOR on `url` and returns once it is live (a marker was
    /// seen).
    pub fn start(url: &str) -> Monitor {
        let mut raw = Conn::connect(url);
        assert_eq!(raw.cmd(&[b"MONITOR"]), Value::Simple("OK".into()));
        let conn = raw.writer.try_clone().expect("clone");
        let seen = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let shared = Arc::clone(&seen);
        std::thread::spawn(move || {
            let mut reader = raw.reader;
            let mut line = String::new();
            loop {
                line.clear();
                // Non-UTF-8 never reaches us: MONITOR escapes it as \xNN.
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if let Some(seen) = parse_monitor_line(line.trim_end()) {
                    let (lock, cvar) = &*shared;
                    lock.lock().unwrap().push(seen);
                    cvar.notify_all();
                }
            }
        });
        let mut monitor = Monitor {
            seen,
            url: url.to_owned(),
            conn,
            counted: 0,
        };
        monitor.counted = monitor.sync() + 1;
        monitor
    }

    /// Everything the server executed before this call is in `seen()` after
    /// it; returns the index in `seen()` of the marker this call sent (an
    /// `ECHO` on a connection of its own, which sends nothing else).
    pub fn sync(&self) -> usize {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{MARKER}{}-{n}", std::process::id());
        Conn::connect(&self.url).cmd(&[b"ECHO", marker.as_bytes()]);
        let is_marker = |s: &Seen| s.args.len() == 2 && s.args[1] == marker.as_bytes();
        self.wait_for(|seen| seen.iter().any(is_marker));
        self.seen
            .0
            .lock()
            .unwrap()
            .iter()
            .position(is_marker)
            .expect("the marker was seen")
    }

    /// Blocks until `pred(seen)` holds (at most 10 s, then panics).
    pub fn wait_for(&self, pred: impl Fn(&[Seen]) -> bool) {
        let (lock, cvar) = &*self.seen;
        let guard = lock.lock().unwrap();
        let (_guard, timeout) = cvar
            .wait_timeout_while(guard, Duration::from_secs(10), |seen| !pred(seen))
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "MONITOR never showed the expected command"
        );
    }

    /// Every command seen since `start` (the markers of `sync` included).
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.0.lock().unwrap().clone()
    }

    /// The top-level commands (not the ones scripts run, not the markers of
    /// `sync`) executed since the last call (or `start`), lowercase, e.g.
    /// `["evalsha"]`: to count what a client sent.
    pub fn commands(&mut self) -> Vec<String> {
        let upto = self.sync();
        let seen = self.seen.0.lock().unwrap();
        let commands = seen[self.counted..upto]
            .iter()
            .filter(|s| s.client != "lua" && !is_sync_marker(s))
            .filter_map(|s| s.args.first())
            .map(|verb| String::from_utf8_lossy(verb).to_lowercase())
            .collect();
        self.counted = upto + 1;
        commands
    }
}

fn is_sync_marker(s: &Seen) -> bool {
    s.args.len() == 2
        && s.args[0].eq_ignore_ascii_case(b"ECHO")
        && s.args[1].starts_with(MARKER.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    #[test]
    fn a_line_is_its_client_and_unescaped_arguments() {
        let seen = parse_monitor_line(r#"+1700000000.123456 [0 lua] "GET" "a\"b\x01\n""#);
        assert_eq!(
            seen,
            Some(Seen {
                client: "lua".into(),
                args: vec![b"GET".to_vec(), b"a\"b\x01\n".to_vec()],
            })
        );
        assert_eq!(parse_monitor_line("OK"), None);
    }

    #[test]
    fn commands_are_the_top_level_ones_since_the_last_call() {
        let server = Server::start();
        let mut monitor = Monitor::start(&server.url());
        let mut conn = Conn::connect(&server.url());
        assert_eq!(conn.cmd(&[b"SET", b"k", b"v"]), Value::Simple("OK".into()));
        let script = b"return redis.call('GET', KEYS[1])";
        assert_eq!(
            conn.cmd(&[b"EVAL", script, b"1", b"k"]),
            Value::Bulk(Some(b"v".to_vec()))
        );
        assert_eq!(monitor.commands(), ["set", "eval"]);
        assert_eq!(monitor.commands(), Vec::<String>::new());
        conn.cmd(&[b"GET", b"k"]);
        assert_eq!(monitor.commands(), ["get"]);
        assert!(monitor.seen().iter().any(|s| s.client == "lua"));
    }
}
