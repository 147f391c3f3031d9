//! The protected resource: a small line-protocol server on loopback that
//! accepts a write only if its fence is newer than the last accepted one
//! (`fence > last`, or `fence == last` from the same lease). Every write is
//! logged in the order the resource applied it, accepted or not; the checker
//! re-verifies (a) from that log independently of this rule. With the check
//! disabled (the control run) every write is accepted, so the stale writes
//! that faults produce become visible to the checker.
//!
//! Protocol: `W <fence> <lease sha256> <worker>\n` -> `1\n` (accepted) or `0\n`.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[derive(Clone, Debug)]
pub struct Write {
    /// When the resource applied it (CLOCK_MONOTONIC ns), for debugging.
    #[allow(dead_code)]
    pub t: u64,
    pub fence: u64,
    pub lease: String,
    pub worker: String,
    pub accepted: bool,
}

#[derive(Debug, Default)]
struct State {
    last: Option<(u64, String)>,
    log: Vec<Write>,
}

#[derive(Debug)]
pub struct Resource {
    pub port: u16,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

impl Resource {
    pub async fn start(check_fence: bool) -> std::io::Result<Resource> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = conn.set_nodelay(true);
                    let (r, mut w) = conn.into_split();
                    let mut lines = BufReader::new(r).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let reply = apply(&st, &line, check_fence);
                        if w.write_all(reply.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Ok(Resource {
            port,
            state,
            accept,
        })
    }

    pub fn log(&self) -> Vec<Write> {
        self.state.lock().expect("not poisoned").log.clone()
    }
}

impl Drop for Resource {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn apply(state: &Mutex<State>, line: &str, check_fence: bool) -> &'static str {
    let parts: Vec<&str> = line.split_whitespace().collect();
    let [_, fence, lease, worker] = parts.as_slice() else {
        return "E\n";
    };
    let Ok(fence) = fence.parse::<u64>() else {
        return "E\n";
    };
    let mut st = state.lock().expect("not poisoned");
    let fresh = match &st.last {
        None => true,
        Some((last, last_lease)) => fence > *last || (fence == *last && lease == last_lease),
    };
    let accepted = fresh || !check_fence;
    if accepted {
        st.last = Some((fence, (*lease).to_owned()));
    }
    st.log.push(Write {
        t: crate::clock::mono_ns(),
        fence,
        lease: (*lease).to_owned(),
        worker: (*worker).to_owned(),
        accepted,
    });
    if accepted {
        "1\n"
    } else {
        "0\n"
    }
}
