//! [`Connections`]: what every lease actor of one client shares — the nodes,
//! the pub/sub notifier, the closed flag and the task tracker `close` waits on.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use fencelock_core::{Error, Inspect, LockInfo, LockName, Operation, Token};

use tokio::sync::watch;

use crate::connection::Node;
use crate::notify::Notifier;

pub(crate) struct Connections {
    pub nodes: Vec<Node>,
    pub notifier: Arc<Notifier>,
    /// `true` once `Client::close` ran: actors stop renewing and leave.
    pub closed: watch::Sender<bool>,
    /// `replicas=N`: how many replicas must acknowledge, and how long
    /// `WAIT` may take.
    pub replicas: (u32, std::time::Duration),
    /// A release's notification was refused (`Event::NotPublished`) and
    /// logged: said once per client, not once per release.
    pub not_published_logged: AtomicBool,
    /// Every lease actor, so `close` can wait for those still finishing a
    /// release (a failed or cancelled acquire's compensation).
    pub actors: tokio_util::task::TaskTracker,
    /// The tokens of this client's live lease actors, per lock name (see
    /// [`Connections::own`]).
    pub owned: Mutex<HashMap<Vec<u8>, Vec<Token>>>,
}

impl Connections {
    /// Note that an acquire of this client holds (or may come to hold)
    /// `token` for `name`, until the returned guard is dropped (the lease
    /// actor's end): `Client::inspect`'s `held_by_me` asks Redis about these.
    pub(crate) fn own(self: &Arc<Self>, name: &LockName, token: &Token) -> Owned {
        self.owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.as_bytes().to_vec())
            .or_default()
            .push(token.clone());
        Owned {
            conns: Arc::clone(self),
            name: name.as_bytes().to_vec(),
            token: token.clone(),
        }
    }

    /// This client's tokens for `name` (secrets: only sent to Redis).
    pub(crate) fn tokens(&self, name: &LockName) -> Vec<Token> {
        self.owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name.as_bytes())
            .cloned()
            .unwrap_or_default()
    }

    /// Run `inspect.lua` on every node at once and combine the answers
    /// (the core decides what they mean).
    pub(crate) async fn inspect(&self, inspect: &Inspect) -> Result<LockInfo, Error> {
        if *self.closed.borrow() {
            return Err(Error::closed(inspect.name(), Operation::Inspect));
        }
        let nodes = self.nodes.len();
        let runs = self.nodes.iter().enumerate().map(|(i, node)| {
            let command = inspect.command(i);
            let give_up = self.closed.subscribe();
            async move {
                let bound = node.retry_bound(&command, None, nodes);
                inspect.read(node.run(&command, bound, give_up).await)
            }
        });
        inspect.combine(futures_util::future::join_all(runs).await)
    }
}

/// See [`Connections::own`].
pub(crate) struct Owned {
    conns: Arc<Connections>,
    name: Vec<u8>,
    token: Token,
}

impl Drop for Owned {
    fn drop(&mut self) {
        let mut owned = self.conns.owned.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tokens) = owned.get_mut(&self.name) {
            tokens.retain(|t| *t != self.token);
            if tokens.is_empty() {
                owned.remove(&self.name);
            }
        }
    }
}
