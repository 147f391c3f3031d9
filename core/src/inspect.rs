//! Inspection: what Redis says about a lock right now, without taking it.
//! Sans-IO like the rest: [`Inspect`] builds one `inspect.lua` command per
//! node, reads each node's reply, and combines them into a [`LockInfo`].
//!
//! With several nodes (Redlock) the answer is the majority's: the lock is
//! `held` when a majority of the nodes has a holder, `ttl` is the smallest
//! remaining TTL among the majority with the longest TTLs (the time the
//! majority is sure to last), `fence` is the largest fence a majority of
//! the nodes holds (the holder's: a node whose acquire answered after the
//! majority decided may have issued a larger one that no lease carries),
//! and `held_by_me` says a majority holds one of the caller's tokens.
//! Fewer answers than a majority is a `Redis` error.
//!
//! A semaphore's or a read-write lock's side (a holders set) is inspected
//! with `holders_inspect.lua`, which answers in the same shape: `held` while
//! any live holder is there, `ttl` until the last one expires, `held_by_me`
//! when one of the caller's tokens holds a permit; with Redlock the
//! majority is the kind's quorum ([`Kind::quorum`]).
//!
//! `fence` is the last fence issued while its key remains (the lock ttl plus
//! the fence grace after the last grant or extend), so a free lock may still
//! report the fence of its last holder; `None` once that key has expired.

use std::fmt;
use std::time::Duration;

use crate::{Bytes, Command, CommandId, Error, Kind, LockKeys, LockName, Reply, Script, Token};

/// What a lock looks like in Redis. Never carries a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// Someone (a majority of the nodes, with Redlock) holds the lock.
    pub held: bool,
    /// The holder's remaining TTL (`None` when free, or a key without expiry).
    pub ttl: Option<Duration>,
    /// The last fence issued, while its key remains.
    pub fence: Option<u64>,
    /// The holder is one of the caller's own leases.
    pub held_by_me: bool,
}

/// One node's answer to `inspect.lua`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// `None`: the lock key is absent. `Some(None)`: present without expiry.
    pub ttl: Option<Option<Duration>>,
    pub fence: Option<u64>,
    pub ours: bool,
}

/// One inspection of one lock over `nodes` nodes.
pub struct Inspect {
    name: LockName,
    kind: Kind,
    keys: Vec<Bytes>,
    tokens: Vec<Bytes>,
    nodes: usize,
}

impl fmt::Debug for Inspect {
    /// The tokens are secrets: only their number is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspect")
            .field("name", &self.name)
            .field("tokens", &self.tokens.len())
            .field("nodes", &self.nodes)
            .finish()
    }
}

impl Inspect {
    /// Inspect `name` (`keys` from the client's `KeySpace`); `tokens` are the
    /// caller's own leases of it (for `held_by_me`), maybe none.
    pub fn new<'a>(
        name: LockName,
        keys: &LockKeys,
        tokens: impl IntoIterator<Item = &'a Token>,
        nodes: usize,
    ) -> Inspect {
        Self::of_kind(name, Kind::Mutex, keys, tokens, nodes)
    }

    /// [`Inspect::new`] for a lease of `kind` (`keys` from
    /// `KeySpace::keys_for(name, kind)`): a semaphore's or a read-write
    /// lock side's holders set.
    pub fn of_kind<'a>(
        name: LockName,
        kind: Kind,
        keys: &LockKeys,
        tokens: impl IntoIterator<Item = &'a Token>,
        nodes: usize,
    ) -> Inspect {
        Inspect {
            name,
            kind,
            keys: vec![keys.lock(), keys.fence()],
            tokens: tokens.into_iter().map(|t| t.0.clone().into()).collect(),
            nodes: nodes.max(1),
        }
    }

    pub fn name(&self) -> &LockName {
        &self.name
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The command for node `node` (the same script and arguments on every node).
    pub fn command(&self, node: usize) -> Command {
        Command {
            id: CommandId(node as u64),
            node,
            script: match self.kind.is_mutex() {
                true => Script::Inspect,
                false => Script::HoldersInspect,
            },
            keys: self.keys.clone(),
            args: self.tokens.clone(),
            wait_replicas: None,
        }
    }

    /// Read one node's reply.
    pub fn read(&self, reply: Reply) -> Result<NodeView, Error> {
        let bad = || Error::redis(Some(&self.name), "unexpected reply to the inspect script");
        match reply {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Int(pttl), fence, Reply::Int(ours)] => {
                    let ttl = match *pttl {
                        -2 => None,
                        -1 => Some(None),
                        ms if ms >= 0 => Some(Some(Duration::from_millis(ms as u64))),
                        _ => return Err(bad()),
                    };
                    let fence = match fence {
                        Reply::Nil => None,
                        Reply::Bulk(digits) => Some(
                            std::str::from_utf8(digits)
                                .ok()
                                .and_then(|s| s.parse::<u64>().ok())
                                .ok_or_else(bad)?,
                        ),
                        _ => return Err(bad()),
                    };
                    Ok(NodeView {
                        ttl,
                        fence,
                        ours: *ours == 1 && ttl.is_some(),
                    })
                }
                _ => Err(bad()),
            },
            Reply::Error(message) | Reply::Unknown(message) => {
                Err(Error::redis(Some(&self.name), message))
            }
            _ => Err(bad()),
        }
    }

    /// Combine every node's answer (one per node, in any order) into the
    /// majority's view (see the module docs).
    pub fn combine(&self, views: Vec<Result<NodeView, Error>>) -> Result<LockInfo, Error> {
        let quorum = self.kind.quorum(self.nodes);
        let answered = crate::majority::answers(&self.name, self.nodes, views)?;
        // Longest first; no expiry sorts as the longest.
        let mut ttls: Vec<Option<Duration>> = answered.iter().filter_map(|v| v.ttl).collect();
        ttls.sort_by(|a, b| match (a, b) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => b.cmp(a),
        });
        let held = ttls.len() >= quorum;
        let ttl = if held { ttls[quorum - 1] } else { None };
        // Largest first: the quorum-th is the largest a majority holds.
        let mut fences: Vec<u64> = answered.iter().filter_map(|v| v.fence).collect();
        fences.sort_unstable_by(|a, b| b.cmp(a));
        Ok(LockInfo {
            held,
            ttl,
            fence: fences.get(quorum - 1).copied(),
            held_by_me: held && answered.iter().filter(|v| v.ours).count() >= quorum,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeySpace;

    fn inspect(nodes: usize) -> Inspect {
        let name = LockName::new("job").unwrap();
        let keys = KeySpace::default().keys(&name);
        Inspect::new(name, &keys, [&Token("tok".into())], nodes)
    }

    fn reply(pttl: i64, fence: Option<&str>, ours: i64) -> Reply {
        Reply::Array(vec![
            Reply::Int(pttl),
            fence.map_or(Reply::Nil, |f| Reply::Bulk(f.into())),
            Reply::Int(ours),
        ])
    }

    #[test]
    fn command_has_both_keys_and_the_tokens() {
        let c = inspect(1).command(0);
        assert_eq!(c.script, Script::Inspect);
        assert_eq!(
            c.keys,
            vec![
                b"fencelock:{job}".to_vec(),
                b"fencelock:{job}:fence".to_vec()
            ]
        );
        assert_eq!(c.args, vec![b"tok".to_vec()]);
        assert!(!format!("{:?}", inspect(1)).contains("tok\""));
    }

    #[test]
    fn a_semaphore_is_inspected_by_its_holders_set() {
        let name = LockName::new("pool").unwrap();
        let kind = Kind::Semaphore(crate::Permits::new(2).unwrap());
        let keys = KeySpace::default().keys_for(&name, kind);
        let i = Inspect::of_kind(name, kind, &keys, [&Token("tok".into())], 3);
        let c = i.command(1);
        assert_eq!(c.script, Script::HoldersInspect);
        assert_eq!(c.keys, vec![keys.lock(), keys.fence()]);
        // Two of three nodes is not the semaphore's quorum (three).
        let two = i
            .combine(vec![
                i.read(reply(500, Some("3"), 1)),
                i.read(reply(500, Some("3"), 1)),
                i.read(reply(-2, Some("3"), 0)),
            ])
            .unwrap();
        assert!(!two.held && !two.held_by_me);
    }

    #[test]
    fn single_node() {
        let i = inspect(1);
        let free = i.combine(vec![i.read(reply(-2, Some("7"), 0))]).unwrap();
        assert_eq!(
            free,
            LockInfo {
                held: false,
                ttl: None,
                fence: Some(7),
                held_by_me: false
            }
        );
        let held = i.combine(vec![i.read(reply(900, Some("8"), 1))]).unwrap();
        assert_eq!(
            held,
            LockInfo {
                held: true,
                ttl: Some(Duration::from_millis(900)),
                fence: Some(8),
                held_by_me: true
            }
        );
        assert!(i
            .combine(vec![i.read(Reply::Error("ERR x".into()))])
            .is_err());
        assert!(i.read(Reply::Int(1)).is_err());
    }

    #[test]
    fn majority_of_three() {
        let i = inspect(3);
        let info = i
            .combine(vec![
                i.read(reply(500, Some("3"), 1)),
                i.read(reply(-2, Some("4"), 0)),
                i.read(reply(800, Some("3"), 1)),
            ])
            .unwrap();
        // 4 is on one node only: the fence two nodes hold is 3.
        assert_eq!(
            info,
            LockInfo {
                held: true,
                ttl: Some(Duration::from_millis(500)),
                fence: Some(3),
                held_by_me: true
            }
        );
        let raised = i
            .combine(vec![
                i.read(reply(500, Some("5"), 1)),
                i.read(reply(500, Some("9"), 1)),
                i.read(reply(500, Some("7"), 1)),
            ])
            .unwrap();
        assert_eq!(raised.fence, Some(7));
        let minority = i
            .combine(vec![
                i.read(reply(500, None, 1)),
                i.read(reply(-2, None, 0)),
                i.read(reply(-2, None, 0)),
            ])
            .unwrap();
        assert!(!minority.held && !minority.held_by_me && minority.ttl.is_none());
        let down = i.combine(vec![
            i.read(reply(500, None, 1)),
            Err(Error::redis(None, "down")),
            Err(Error::redis(None, "down")),
        ]);
        assert!(matches!(down, Err(Error::Redis { .. })));
    }
}
