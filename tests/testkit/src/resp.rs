//! A minimal blocking RESP2 client: setup commands, checks of what is in
//! Redis, MONITOR, the safety checker's nemesis. Deliberately independent of
//! the library under test (and of redis-rs), so a driver bug cannot hide
//! here.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One reply, as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

impl Value {
    /// The bytes of a string reply (simple or bulk), None for anything else
    /// (nil included).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Simple(s) => Some(s.as_bytes()),
            Value::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }
}

/// `args` as a RESP array of bulk strings.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One connection. The panicking methods are for tests (a failure there is
/// the test's failure); the `try_` ones report errors as text.
#[derive(Debug)]
pub struct Conn {
    pub(crate) writer: TcpStream,
    pub(crate) reader: BufReader<TcpStream>,
}

impl Conn {
    /// Connect to a `redis://[user:pw@]host:port[/db]` URL (the credentials
    /// are ignored) and SELECT its database. Panics on failure.
    pub fn connect(url: &str) -> Conn {
        let rest = url.strip_prefix("redis://").expect("redis:// URL");
        let (hostport, db) = rest.split_once('/').unwrap_or((rest, "0"));
        let hostport = hostport.rsplit('@').next().expect("host");
        let stream = TcpStream::connect(hostport).unwrap_or_else(|e| panic!("{hostport}: {e}"));
        let mut conn = Conn::from_stream(stream);
        if !db.is_empty() && db != "0" {
            conn.cmd(&[b"SELECT", db.as_bytes()]);
        }
        conn
    }

    /// Connect to 127.0.0.1:`port`, every step (connect, each write, each
    /// read) bounded by `timeout`.
    pub fn open(port: u16, timeout: Duration) -> Result<Conn, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| format!("127.0.0.1:{port}: {}", text(e)))?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(text)?;
        Ok(Conn::from_stream(stream))
    }

    fn from_stream(stream: TcpStream) -> Conn {
        stream.set_nodelay(true).ok();
        Conn {
            reader: BufReader::new(stream.try_clone().expect("clone a TcpStream")),
            writer: stream,
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        self.try_send(args).expect("write to redis");
    }

    pub fn cmd(&mut self, args: &[&[u8]]) -> Value {
        self.send(args);
        self.read()
    }

    pub fn read(&mut self) -> Value {
        self.try_read()
            .unwrap_or_else(|e| panic!("read from redis: {e}"))
    }

    pub fn try_send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        self.writer.write_all(&encode(args)).map_err(text)
    }

    pub fn try_cmd(&mut self, args: &[&[u8]]) -> Result<Value, String> {
        self.try_send(args)?;
        self.try_read()
    }

    pub fn try_read(&mut self) -> Result<Value, String> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).map_err(text)?;
        if !line.ends_with(b"\r\n") {
            return Err("connection closed".into());
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let len = |body: &str| -> Result<i64, String> {
            body.parse()
                .map_err(|e| format!("bad RESP length {body:?}: {e}"))
        };
        match line[0] {
            b'+' => Ok(Value::Simple(body)),
            b'-' => Ok(Value::Error(body)),
            b':' => len(&body).map(Value::Int),
            b'$' => {
                let Ok(n) = usize::try_from(len(&body)?) else {
                    return Ok(Value::Bulk(None));
                };
                let mut buf = vec![0; n + 2];
                self.reader.read_exact(&mut buf).map_err(text)?;
                buf.truncate(n);
                Ok(Value::Bulk(Some(buf)))
            }
            b'*' => {
                let Ok(n) = usize::try_from(len(&body)?) else {
                    return Ok(Value::Array(None));
                };
                let items = (0..n).map(|_| self.try_read()).collect::<Result<_, _>>()?;
                Ok(Value::Array(Some(items)))
            }
            _ => Err(format!(
                "unexpected RESP line {:?}",
                String::from_utf8_lossy(&line)
            )),
        }
    }
}

/// Send one command to 127.0.0.1:`port` on a connection of its own and
/// return its reply, each step bounded by `timeout`.
pub fn cmd(port: u16, args: &[&[u8]], timeout: Duration) -> Result<Value, String> {
    let mut conn = Conn::open(port, timeout)?;
    conn.try_cmd(args)
        .map_err(|e| format!("127.0.0.1:{port}: {e}"))
}

/// An IO error as text; a read or write past its timeout says so.
fn text(e: std::io::Error) -> String {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => "timed out".into(),
        _ => e.to_string(),
    }
}
