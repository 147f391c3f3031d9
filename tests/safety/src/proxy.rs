//! A TCP proxy on loopback between the workers and Redis, for two faults:
//! added latency (every chunk in both directions is held back) and dropped
//! connections (every open connection is cut at once, mid-command or not).
//! The upstream can be switched, which is how the failover scenario points
//! clients at the promoted replica.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug)]
struct State {
    upstream: AtomicU64,
    latency_ms: AtomicU64,
    conns: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug)]
pub struct Proxy {
    pub port: u16,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: u16) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(State {
            upstream: AtomicU64::new(u64::from(upstream)),
            latency_ms: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let accept = tokio::spawn(async move {
            // Bounded by the scenario: the task is aborted when the proxy drops.
            while let Ok((client, _)) = listener.accept().await {
                let up = st.upstream.load(Ordering::SeqCst) as u16;
                let Ok(server) = TcpStream::connect(("127.0.0.1", up)).await else {
                    continue; // upstream down: the client sees a closed connection
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                let a = tokio::spawn(pump(cr, sw, st.clone()));
                let b = tokio::spawn(pump(sr, cw, st.clone()));
                let mut conns = st.conns.lock().expect("not poisoned");
                conns.retain(|h| !h.is_finished());
                conns.push(a);
                conns.push(b);
            }
        });
        Ok(Proxy {
            port,
            state,
            accept,
        })
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn set_latency(&self, ms: u64) {
        self.state.latency_ms.store(ms, Ordering::SeqCst);
    }

    pub fn set_upstream(&self, port: u16) {
        self.state.upstream.store(u64::from(port), Ordering::SeqCst);
    }

    /// Cut every open connection; returns how many pumps were cut.
    pub fn drop_all(&self) -> usize {
        let mut conns = self.state.conns.lock().expect("not poisoned");
        let n = conns.iter().filter(|h| !h.is_finished()).count();
        for h in conns.drain(..) {
            h.abort();
        }
        n
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.drop_all();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<State>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let latency = state.latency_ms.load(Ordering::SeqCst);
        if latency > 0 {
            tokio::time::sleep(Duration::from_millis(latency)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
