//! [`Connections`]: what every lease actor of one client shares — the nodes,
//! the pub/sub notifier, the closed flag and the task tracker `close` waits on.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use fencelock_core::{
    Command, Error, Inspect, KeySpace, LockInfo, LockName, Operation, Reply, Token,
};

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
    pub owned: Mutex<HashMap<LockName, Tokens>>,
    /// The client's key layout: a lease asks it for its keys when it needs
    /// them (`Lease::held`) instead of keeping a copy of its own. Shared
    /// with the client, which keeps it past `close`.
    pub keyspace: Arc<KeySpace>,
    /// The client's runtime: what a lease finishes in the background (a
    /// release nobody waited for) runs there.
    pub runtime: tokio::runtime::Handle,
}

impl Connections {
    /// Note that an acquire of this client holds (or may come to hold)
    /// `token` for `name`, until the returned guard is dropped: at the
    /// lease actor's end, or for an inline lease (which keeps a flag
    /// instead, see [`Owned::keep`]) at its release that succeeded or at its
    /// drop. `Client::inspect`'s `held_by_me` asks Redis about these.
    pub(crate) fn own(self: &Arc<Self>, name: &LockName, token: &Token) -> Owned {
        self.owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.clone())
            .and_modify(|tokens| tokens.push(token.clone()))
            .or_insert_with(|| Tokens::One(token.clone()));
        Owned {
            conns: Arc::downgrade(self),
            name: name.clone(),
            token: token.clone(),
        }
    }

    /// This client's tokens for `name` (secrets: only sent to Redis).
    pub(crate) fn tokens(&self, name: &LockName) -> Vec<Token> {
        self.owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .map(Tokens::to_vec)
            .unwrap_or_default()
    }

    /// `inspect.lua` on every node, combined by the core.
    pub(crate) async fn inspect(&self, inspect: &Inspect) -> Result<LockInfo, Error> {
        let (name, op) = (inspect.name(), Operation::Inspect);
        let views = self
            .on_every_node(name, op, |i| inspect.command(i), |r| inspect.read(r))
            .await?;
        inspect.combine(views)
    }

    /// One core command on its node, as the inline path runs them: a reply
    /// whatever happens (see `Node::run`).
    pub(crate) async fn run_one(
        &self,
        command: &Command,
        acquire_deadline: Option<tokio::time::Instant>,
    ) -> Reply {
        let node = &self.nodes[command.node];
        let retry_until = node.retry_bound(command, acquire_deadline, self.nodes.len());
        // Boxed: the command's future is about a kilobyte (every
        // topology's connection futures), and inline it would make every
        // future that awaits it as large, copied whole each time one is
        // moved.
        Box::pin(node.run(command, retry_until, self.closed.subscribe())).await
    }

    /// Run `command(node)` on every node at once, each reply read by
    /// `read`: the fan-out of inspect and force-release (the core decides
    /// what the answers mean). `Closed` for `operation` once closed.
    pub(crate) async fn on_every_node<T>(
        &self,
        name: &LockName,
        operation: Operation,
        command: impl Fn(usize) -> Command,
        read: impl Fn(Reply) -> Result<T, Error>,
    ) -> Result<Vec<Result<T, Error>>, Error> {
        if *self.closed.borrow() {
            return Err(Error::closed(name, operation));
        }
        let nodes = self.nodes.len();
        let runs = self.nodes.iter().enumerate().map(|(i, node)| {
            let command = command(i);
            let give_up = self.closed.subscribe();
            let read = &read;
            async move {
                let bound = node.retry_bound(&command, None, nodes);
                read(node.run(&command, bound, give_up).await)
            }
        });
        Ok(futures_util::future::join_all(runs).await)
    }
}

/// One name's tokens in [`Connections::owned`]. Most names have one lease
/// at a time: inline, so a held lease costs no allocation here.
#[derive(Debug)]
pub(crate) enum Tokens {
    One(Token),
    Many(Vec<Token>),
}

impl Tokens {
    fn push(&mut self, token: Token) {
        match self {
            Tokens::One(first) => *self = Tokens::Many(vec![first.clone(), token]),
            Tokens::Many(tokens) => tokens.push(token),
        }
    }

    /// Forget `token`; true if none is left.
    fn remove(&mut self, token: &Token) -> bool {
        match self {
            Tokens::One(only) => only == token,
            Tokens::Many(tokens) => {
                tokens.retain(|t| t != token);
                tokens.is_empty()
            }
        }
    }

    fn to_vec(&self) -> Vec<Token> {
        match self {
            Tokens::One(only) => vec![only.clone()],
            Tokens::Many(tokens) => tokens.clone(),
        }
    }
}

/// See [`Connections::own`].
/// Weak: it must not keep a closed client's connections open.
pub(crate) struct Owned {
    conns: std::sync::Weak<Connections>,
    name: LockName,
    token: Token,
}

impl Owned {
    /// The guard of a token [`Connections::own`] recorded, for a holder
    /// that kept only a flag ([`Owned::keep`]).
    pub(crate) fn adopt(conns: &Arc<Connections>, name: &LockName, token: &Token) -> Owned {
        Owned {
            conns: Arc::downgrade(conns),
            name: name.clone(),
            token: token.clone(),
        }
    }

    /// Keep the record, drop the guard: an inline lease, which has the
    /// name, the token and the connections already, keeps a flag instead
    /// of these 40 bytes, and adopts the guard again to end the record.
    pub(crate) fn keep(mut self) {
        self.conns = std::sync::Weak::new();
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let Some(conns) = self.conns.upgrade() else {
            return;
        };
        let mut owned = conns.owned.lock().unwrap_or_else(|e| e.into_inner());
        // One lookup (an entry), not a get and then a remove: hashing the
        // name is a visible part of a short acquire + release.
        if let Entry::Occupied(mut tokens) = owned.entry(self.name.clone()) {
            if tokens.get_mut().remove(&self.token) {
                tokens.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tokens;
    use fencelock_core::Token;

    fn token(t: &str) -> Token {
        Token(t.into())
    }

    /// Two leases of one name (a semaphore's permits): forgetting one keeps
    /// the other, and only the last leaves the name empty.
    #[test]
    fn tokens_of_one_name() {
        let mut tokens = Tokens::One(token("a"));
        assert!(!tokens.remove(&token("b")), "not ours: a is kept");
        tokens.push(token("b"));
        tokens.push(token("c"));
        assert_eq!(tokens.to_vec(), [token("a"), token("b"), token("c")]);
        assert!(!tokens.remove(&token("b")));
        assert_eq!(tokens.to_vec(), [token("a"), token("c")]);
        assert!(!tokens.remove(&token("a")));
        assert!(tokens.remove(&token("c")), "the last one");
        assert!(Tokens::One(token("a")).remove(&token("a")));
    }
}
