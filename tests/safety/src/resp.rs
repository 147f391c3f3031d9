//! A tiny RESP2 client for the nemesis and the final checks: one command
//! per connection, bounded by a timeout. Deliberately independent of the
//! library under test (and of redis-rs) so a driver bug cannot hide here.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Nil,
    Int(i64),
    Str(Vec<u8>),
    Err(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Str(b) => Some(b),
            _ => None,
        }
    }
}

/// Send one command to 127.0.0.1:`port`, return its reply (2 s bound).
pub async fn cmd(port: u16, args: &[&[u8]]) -> Result<Value, String> {
    tokio::time::timeout(Duration::from_secs(2), cmd_inner(port, args))
        .await
        .map_err(|_| format!("127.0.0.1:{port}: timed out"))?
}

pub async fn cmd_str(port: u16, args: &[&str]) -> Result<Value, String> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd(port, &args).await
}

async fn cmd_inner(port: u16, args: &[&[u8]]) -> Result<Value, String> {
    let stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("127.0.0.1:{port}: {e}"))?;
    let mut stream = BufReader::new(stream);
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    stream
        .get_mut()
        .write_all(&out)
        .await
        .map_err(|e| e.to_string())?;
    read_value(&mut stream).await
}

fn read_value(
    r: &mut BufReader<TcpStream>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + '_>> {
    Box::pin(async move {
        let mut line = String::new();
        r.read_line(&mut line).await.map_err(|e| e.to_string())?;
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return Err("connection closed".into());
        }
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Ok(Value::Str(rest.as_bytes().to_vec())),
            "-" => Ok(Value::Err(rest.to_owned())),
            ":" => rest.parse().map(Value::Int).map_err(|e| e.to_string()),
            "$" => {
                let n: i64 = rest
                    .parse()
                    .map_err(|e: std::num::ParseIntError| e.to_string())?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
                buf.truncate(n as usize);
                Ok(Value::Str(buf))
            }
            "*" => {
                let n: i64 = rest
                    .parse()
                    .map_err(|e: std::num::ParseIntError| e.to_string())?;
                if n < 0 {
                    return Ok(Value::Nil);
                }
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(read_value(r).await?);
                }
                Ok(Value::Array(items))
            }
            _ => Err(format!("unexpected RESP line {line:?}")),
        }
    })
}
