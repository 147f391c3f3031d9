//! Force-release: an operator removes a lock whoever holds it and advances
//! its fence (`force_release.lua`), so every fence issued before is stale
//! and a fenced resource refuses the old holder's later writes. Sans-IO like
//! [`crate::Inspect`]: one command per node, each reply read, the answers
//! combined. With Redlock a majority must answer; the fence is the largest
//! any node issued.

use crate::{Bytes, Command, CommandId, Error, FenceGrace, LockKeys, LockName, Reply, Script};

/// One node's answer, or the combined one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forced {
    /// A holder was removed (on any node).
    pub was_held: bool,
    /// The advanced fence: above every fence issued before.
    pub fence: u64,
}

/// One force-release of one lock over `nodes` nodes.
#[derive(Debug)]
pub struct ForceRelease {
    name: LockName,
    keys: Vec<Bytes>,
    grace: Bytes,
    nodes: usize,
}

impl ForceRelease {
    /// `keys` from the client's `KeySpace`; the fence key outlives the old
    /// holder's remaining TTL by `grace`.
    pub fn new(name: LockName, keys: &LockKeys, grace: FenceGrace, nodes: usize) -> ForceRelease {
        ForceRelease {
            name,
            keys: vec![keys.lock(), keys.fence(), keys.channel()],
            grace: Bytes::decimal(grace.as_millis()),
            nodes: nodes.max(1),
        }
    }

    pub fn name(&self) -> &LockName {
        &self.name
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The command for node `node` (the same on every node).
    pub fn command(&self, node: usize) -> Command {
        Command {
            id: CommandId(node as u64),
            node,
            script: Script::ForceRelease,
            keys: self.keys.clone(),
            args: vec![self.grace.clone()],
            wait_replicas: None,
        }
    }

    /// Read one node's reply.
    pub fn read(&self, reply: Reply) -> Result<Forced, Error> {
        let bad = || {
            Error::redis(
                Some(&self.name),
                "unexpected reply to the force-release script",
            )
        };
        match reply {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Int(held @ (0 | 1)), Reply::Bulk(digits)] => Ok(Forced {
                    was_held: *held == 1,
                    fence: std::str::from_utf8(digits)
                        .ok()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(bad)?,
                }),
                _ => Err(bad()),
            },
            Reply::Error(message) | Reply::Unknown(message) => {
                Err(Error::redis(Some(&self.name), message))
            }
            _ => Err(bad()),
        }
    }

    /// Combine every node's answer: a majority must have answered.
    pub fn combine(&self, answers: Vec<Result<Forced, Error>>) -> Result<Forced, Error> {
        let answered = crate::majority::answers(&self.name, self.nodes, answers)?;
        Ok(Forced {
            was_held: answered.iter().any(|a| a.was_held),
            fence: answered.iter().map(|a| a.fence).max().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeySpace;

    fn force(nodes: usize) -> ForceRelease {
        let name = LockName::new("job").unwrap();
        let keys = KeySpace::default().keys(&name);
        ForceRelease::new(name, &keys, FenceGrace::DEFAULT, nodes)
    }

    fn reply(held: i64, fence: &str) -> Reply {
        Reply::Array(vec![Reply::Int(held), Reply::Bulk(fence.into())])
    }

    #[test]
    fn command_has_the_three_keys_and_the_grace() {
        let c = force(1).command(0);
        assert_eq!(c.script, Script::ForceRelease);
        assert_eq!(
            c.keys,
            vec![
                b"fencelock:{job}".to_vec(),
                b"fencelock:{job}:fence".to_vec(),
                b"fencelock:{job}:released".to_vec()
            ]
        );
        assert_eq!(c.args, vec![b"60000".to_vec()]);
    }

    #[test]
    fn reads_and_combines_the_largest_fence() {
        let f = force(3);
        let answers = vec![
            f.read(reply(0, "10")),
            f.read(reply(1, "12")),
            Err(Error::redis(None, "down")),
        ];
        assert_eq!(
            f.combine(answers).unwrap(),
            Forced {
                was_held: true,
                fence: 12
            }
        );
    }

    #[test]
    fn too_few_answers_or_bad_replies_are_errors() {
        let f = force(3);
        let down = || Err(Error::redis(None, "down"));
        let err = f
            .combine(vec![f.read(reply(1, "5")), down(), down()])
            .unwrap_err();
        assert!(err.to_string().contains("only 1 of 3"), "{err}");
        assert!(f.read(Reply::Int(1)).is_err());
        assert!(f.read(reply(2, "5")).is_err());
        assert!(f.read(reply(1, "x")).is_err());
        let one = force(1);
        let err = one
            .read(Reply::Error("ERR fence counter".into()))
            .unwrap_err();
        assert!(err.to_string().contains("fence counter"), "{err}");
    }
}
