//! Cross-language conformance, Rust side: reading tests/vectors/*.json
//! (their byte strings and special numbers), a tiny blocking RESP client and
//! MONITOR capture with the same normalisation as tests/support/fltest.py,
//! and a private redis-server. The vectors are checked against
//! fencelock-core in tests/vectors.rs and through the driver against a real
//! Redis in tests/real.rs; the driver also takes part in the interop and
//! wire tests through the `fencelock-agent` binary (src/bin/fencelock-agent.rs,
//! driven by tests/python/test_interop.py).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::Value;

/// `tests/vectors/<file>` parsed.
pub fn vectors(file: &str) -> Value {
    let path = repo_root().join("tests/vectors").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The vectors' byte strings: `"text"` (UTF-8), `{"hex": ".."}`,
/// `{"repeat": "s", "count": n}`.
pub fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) if o.contains_key("hex") => hex(o["hex"].as_str().expect("hex string")),
        Value::Object(o) if o.contains_key("repeat") => o["repeat"]
            .as_str()
            .expect("repeat string")
            .repeat(o["count"].as_u64().expect("count") as usize)
            .into_bytes(),
        other => panic!("not a byte string: {other}"),
    }
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// A number of the vectors: JSON number or "NaN" / "Infinity" / "-Infinity".
pub fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("f64"),
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        other => panic!("not a number: {other}"),
    }
}

// ---------------------------------------------------------------------------
// A minimal blocking RESP2 client (setup commands and MONITOR only).

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

#[derive(Debug)]
pub struct Raw {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(url: &str) -> Raw {
        let rest = url.strip_prefix("redis://").expect("redis:// URL");
        let (hostport, db) = rest.split_once('/').unwrap_or((rest, "0"));
        let hostport = hostport.rsplit('@').next().expect("host");
        let stream = TcpStream::connect(hostport).unwrap_or_else(|e| panic!("{hostport}: {e}"));
        stream.set_nodelay(true).ok();
        let mut raw = Raw {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        };
        if !db.is_empty() && db != "0" {
            raw.cmd(&[b"SELECT", db.as_bytes()]);
        }
        raw
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).expect("write to redis");
    }

    pub fn cmd(&mut self, args: &[&[u8]]) -> Resp {
        self.send(args);
        self.read()
    }

    pub fn read(&mut self) -> Resp {
        let mut line = Vec::new();
        self.reader
            .read_until(b'\n', &mut line)
            .expect("read from redis");
        assert!(line.ends_with(b"\r\n"), "connection closed");
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        match line[0] {
            b'+' => Resp::Simple(body),
            b'-' => Resp::Error(body),
            b':' => Resp::Int(body.parse().expect("int")),
            b'$' => {
                let n: i64 = body.parse().expect("len");
                if n < 0 {
                    return Resp::Bulk(None);
                }
                let mut buf = vec![0; n as usize + 2];
                self.reader.read_exact(&mut buf).expect("bulk");
                buf.truncate(n as usize);
                Resp::Bulk(Some(buf))
            }
            b'*' => {
                let n: i64 = body.parse().expect("len");
                if n < 0 {
                    return Resp::Array(None);
                }
                Resp::Array(Some((0..n).map(|_| self.read()).collect()))
            }
            other => panic!("unexpected RESP type {other}"),
        }
    }
}

// ---------------------------------------------------------------------------
// MONITOR: parse and normalise (the same rules as tests/support/monitor.py
// and tests/support/monitor.js).

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

/// A MONITOR connection read by a background thread (closed on drop).
#[derive(Debug)]
pub struct Monitor {
    seen: Arc<(Mutex<Vec<Seen>>, Condvar)>,
    url: String,
    conn: TcpStream,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.conn.shutdown(std::net::Shutdown::Both);
    }
}

impl Monitor {
    /// Starts MONITOR and returns once it is live (a marker was seen).
    pub fn start(url: &str) -> Monitor {
        let mut raw = Raw::connect(url);
        assert_eq!(raw.cmd(&[b"MONITOR"]), Resp::Simple("OK".into()));
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
        let monitor = Monitor {
            seen,
            url: url.to_owned(),
            conn,
        };
        monitor.sync();
        monitor
    }

    /// Everything the server executed before this call is in `seen()` after it.
    pub fn sync(&self) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let marker = format!("monitor-sync-{}-{n}", std::process::id());
        Raw::connect(&self.url).cmd(&[b"ECHO", marker.as_bytes()]);
        self.wait_for(|seen| {
            seen.iter()
                .any(|s| s.args.len() == 2 && s.args[1] == marker.as_bytes())
        });
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

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.0.lock().unwrap().clone()
    }
}

/// One script call as the vectors describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    pub client: String,
    pub script: String,
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
}

/// The script calls of clients (not the commands scripts run), EVAL turned
/// into its SHA1, and an EVAL that repeats that client's previous call, an
/// EVALSHA (the NOSCRIPT fallback), dropped. `scripts` maps SHA1 -> name.
pub fn script_calls(seen: &[Seen], scripts: &[(String, String)]) -> Vec<ScriptCall> {
    let name_of = |sha: &str| {
        scripts
            .iter()
            .find(|(_, s)| s == sha)
            .map(|(n, _)| n.clone())
    };
    let mut out: Vec<ScriptCall> = Vec::new();
    let mut last_evalsha: std::collections::HashMap<String, ScriptCall> = Default::default();
    for s in seen
        .iter()
        .filter(|s| s.client != "lua" && s.args.len() >= 3)
    {
        let verb = String::from_utf8_lossy(&s.args[0]).to_ascii_uppercase();
        let sha = match verb.as_str() {
            "EVALSHA" => String::from_utf8_lossy(&s.args[1]).to_ascii_lowercase(),
            "EVAL" => sha1_hex(&s.args[1]),
            _ => continue,
        };
        let Some(script) = name_of(&sha) else {
            continue;
        };
        let numkeys: usize = String::from_utf8_lossy(&s.args[2])
            .parse()
            .expect("numkeys");
        let call = ScriptCall {
            client: s.client.clone(),
            script,
            keys: s.args[3..3 + numkeys].to_vec(),
            args: s.args[3 + numkeys..].to_vec(),
        };
        let previous = last_evalsha.remove(&call.client);
        if verb == "EVAL" && previous.as_ref() == Some(&call) {
            continue;
        }
        if verb == "EVALSHA" {
            last_evalsha.insert(call.client.clone(), call.clone());
        }
        out.push(call);
    }
    out
}

/// Is this a UUID v4, lowercase and hyphenated (the token format)?
pub fn is_token(arg: &[u8]) -> bool {
    arg.len() == 36
        && arg.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            14 => b == b'4',
            19 => matches!(b, b'8' | b'9' | b'a' | b'b'),
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// SHA1 (for EVAL bodies); small and dependency-free, tests only.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 80];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(chunk[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

// ---------------------------------------------------------------------------
// redis-server: the harness's, or a private one.

pub use fencelock_testkit::Server;

/// `FENCELOCK_TEST_REDIS_URL` when the harness set it, else a private server
/// (kept alive by the returned guard).
pub fn redis_url() -> (String, Option<Server>) {
    match std::env::var("FENCELOCK_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = Server::start();
            (server.url(), Some(server))
        }
    }
}
