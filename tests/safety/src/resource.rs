//! The protected resource: a small line-protocol server on loopback that
//! accepts a write only if its fence is newer than the last accepted one
//! (`fence > last`, or `fence == last` from the same lease). Every write is
//! logged in the order the resource applied it, accepted or not; the checker
//! re-verifies (a) by replaying that log through [`Rule`], whatever the live
//! resource answered. With the check disabled (the control run) every write
//! is accepted, so the stale writes that faults produce become visible to
//! the checker.
//!
//! Protocol: `<op> <fence> <lease sha256> <worker>\n` -> `1\n` (accepted) or
//! `0\n`. Ops ([`Rule::admits`]):
//! - `W`, a write (the mutex's, a read-write lock's writer): newer than
//!   every op accepted before (reads included: a reader that held after a
//!   paused writer has the larger fence);
//! - `R`, a read under a read-write lock: newer than every accepted write
//!   (readers share, so reads need not order among themselves);
//! - `P`, a use under a semaphore permit: its fence not presented before by
//!   another lease (permits share, so fences only identify grants).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

#[derive(Clone, Debug)]
pub struct Write {
    /// When the resource applied it (CLOCK_MONOTONIC ns), for debugging.
    #[allow(dead_code)]
    pub t: u64,
    /// `W`, `R` or `P` (see the module docs).
    pub op: char,
    pub fence: u64,
    pub lease: String,
    pub worker: String,
    pub accepted: bool,
}

/// What the resource has accepted so far, and the rule for the next op.
#[derive(Debug, Default, Clone)]
pub struct Rule {
    /// The newest accepted op of any kind, and the newest write.
    last: Option<(u64, String)>,
    last_write: Option<(u64, String)>,
    /// `P` ops: which lease presented each fence.
    presented: std::collections::HashMap<u64, String>,
}

impl Rule {
    /// Whether `op` with `fence` from `lease` is fresh; `Err` names the
    /// lease whose op made it stale.
    pub fn admits(&self, op: char, fence: u64, lease: &str) -> Result<(), String> {
        let newer = |last: &Option<(u64, String)>| match last {
            Some((f, l)) if fence < *f || (fence == *f && lease != l) => Err(l.clone()),
            _ => Ok(()),
        };
        match op {
            'R' => newer(&self.last_write),
            'P' => match self.presented.get(&fence) {
                Some(other) if other != lease => Err(other.clone()),
                _ => Ok(()),
            },
            _ => newer(&self.last),
        }
    }

    /// Record an accepted op.
    pub fn accept(&mut self, op: char, fence: u64, lease: &str) {
        let raise = |last: &mut Option<(u64, String)>| {
            if last.as_ref().is_none_or(|(f, _)| fence >= *f) {
                *last = Some((fence, lease.to_owned()));
            }
        };
        match op {
            'P' => {
                self.presented.insert(fence, lease.to_owned());
            }
            'R' => raise(&mut self.last),
            _ => {
                raise(&mut self.last);
                raise(&mut self.last_write);
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    rule: Rule,
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
    let [op, fence, lease, worker] = parts.as_slice() else {
        return "E\n";
    };
    let (Ok(fence), Some(op)) = (fence.parse::<u64>(), op.chars().next()) else {
        return "E\n";
    };
    let mut st = state.lock().expect("not poisoned");
    let accepted = st.rule.admits(op, fence, lease).is_ok() || !check_fence;
    if accepted {
        st.rule.accept(op, fence, lease);
    }
    st.log.push(Write {
        t: crate::clock::mono_ns(),
        op,
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
