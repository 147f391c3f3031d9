//! [`LockList`]: the locks held now whose names match a pattern, each
//! with what [`Client::inspect`] says about it.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use fencelock_core::{Error, Listing, LockInfo, LockName, NamePattern, Operation};
use futures_util::stream::{FuturesOrdered, StreamExt};

use crate::client::Client;
use crate::connections::Connections;

impl Client {
    /// The locks held now whose names match `pattern` (Redis's glob syntax
    /// over lock names: `*`, `?`, `[a-z]`, `\` escapes; `*` for all),
    /// each with its [`LockInfo`], in name order: see [`LockList`]. Uses
    /// `SCAN` on every node (every primary of a cluster), never `KEYS`.
    /// A bad pattern (empty, over 1,024 bytes, an unclosed `[`, a trailing
    /// `\`) is an `InvalidArgument` at once; nothing is written.
    pub fn list(&self, pattern: impl AsRef<[u8]>) -> Result<LockList, Error> {
        self.list_matching(NamePattern::new(pattern)?)
    }

    /// [`Client::list`] for a pattern validated already (the bindings').
    pub fn list_matching(&self, pattern: NamePattern) -> Result<LockList, Error> {
        let conns = self.connections(pattern.as_name(), Operation::List)?;
        let listing = Listing::new(self.keyspace(), pattern);
        Ok(LockList::new(self.clone(), conns, listing))
    }
}

/// How many locks are inspected at once while a list is read.
const INSPECTING: usize = 16;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One held lock found by [`Client::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedLock {
    pub name: LockName,
    /// What [`Client::inspect`] said about it (always `held`).
    pub info: LockInfo,
}

/// The locks matching a pattern, in name order (bytewise), read with
/// [`LockList::next`]: first a `SCAN` walk of every node (every primary
/// of a cluster; the union over Redlock nodes, of which a majority must
/// answer), then an inspection of each name (16 at a time; the majority's
/// view with Redlock). A lock released between the walk and its
/// inspection is left out. Nothing is written.
pub struct LockList {
    client: Client,
    /// The walk, until it is done.
    walking: Option<Boxed<Result<Vec<LockName>, Error>>>,
    names: VecDeque<LockName>,
    inspecting: FuturesOrdered<Boxed<(LockName, Result<LockInfo, Error>)>>,
}

impl fmt::Debug for LockList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockList")
            .field("walked", &self.walking.is_none())
            .field("left", &(self.names.len() + self.inspecting.len()))
            .finish()
    }
}

impl LockList {
    pub(crate) fn new(client: Client, conns: Arc<Connections>, listing: Listing) -> LockList {
        let walking = async move {
            let walks = conns
                .nodes
                .iter()
                .map(|node| crate::scan::walk(node, &listing));
            let walks = futures_util::future::join_all(walks).await;
            listing.combine(conns.nodes.len(), walks)
        };
        LockList {
            client,
            walking: Some(Box::pin(walking)),
            names: VecDeque::new(),
            inspecting: FuturesOrdered::new(),
        }
    }

    /// The next held lock, `None` once every one was read. Cancel-safe:
    /// a dropped call loses nothing (the walk and the inspections in
    /// flight go on at the next call).
    pub async fn next(&mut self) -> Result<Option<ListedLock>, Error> {
        if let Some(walking) = &mut self.walking {
            let names = walking.await;
            self.walking = None;
            self.names = names?.into();
        }
        loop {
            while self.inspecting.len() < INSPECTING {
                let Some(name) = self.names.pop_front() else {
                    break;
                };
                let client = self.client.clone();
                self.inspecting.push_back(Box::pin(async move {
                    let info = client.inspect_named(name.clone()).await;
                    (name, info)
                }));
            }
            match self.inspecting.next().await {
                None => return Ok(None),
                Some((name, Ok(info))) if info.held => {
                    return Ok(Some(ListedLock { name, info }));
                }
                // Released since the walk saw it.
                Some((_, Ok(_))) => {}
                Some((_, Err(e))) => return Err(e),
            }
        }
    }

    /// Every lock left, in name order.
    pub async fn all(mut self) -> Result<Vec<ListedLock>, Error> {
        let mut locks = Vec::new();
        while let Some(lock) = self.next().await? {
            locks.push(lock);
        }
        Ok(locks)
    }
}
