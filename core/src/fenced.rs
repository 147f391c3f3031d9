//! Fenced writes to Redis: the protected resource itself refuses a stale
//! lock holder (`fenced_set.lua`), so fencing does not stop at handing the
//! fence out.
//!
//! The protected key is a hash of the user's: one field (`value` for
//! `fenced_set`, any other for `fenced_hset`) and the field `fence`, the
//! last fence the key accepted. A write whose fence is not older than that
//! one (equal: the same holder writing again) is applied and records its
//! fence, in one `HSET`; an older one is refused with
//! [`Error::StaleFence`] and writes nothing. The script touches only the
//! user's key, so it may live in any Redis Cluster slot. Sans-IO like
//! [`crate::Inspect`]: [`FencedWrite`] builds the one command and reads its
//! reply; every front end sends these very bytes.

use std::fmt;
use std::time::Duration;

use crate::{Bytes, Command, CommandId, Error, LockName, Reply, Script};

/// The field `fenced_set` writes its value to.
pub const VALUE_FIELD: &[u8] = b"value";
/// The field holding the last fence a key accepted (reserved).
pub const FENCE_FIELD: &[u8] = b"fence";

/// The lease making a fenced write, as far as the write cares.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    pub name: &'a LockName,
    pub fence: u64,
    /// Zero once the lease is lost or released: nothing is sent then.
    pub valid_for: Duration,
    /// The client's node count: one Redis holds the data, so Redlock
    /// (several independent nodes) cannot make fenced writes.
    pub nodes: usize,
}

/// One fenced write of one field.
pub struct FencedWrite {
    name: LockName,
    key: Vec<u8>,
    field: Vec<u8>,
    value: Vec<u8>,
    fence: u64,
}

impl fmt::Debug for FencedWrite {
    /// The value is the user's data: only its length is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedWrite")
            .field("name", &self.name)
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("field", &String::from_utf8_lossy(&self.field))
            .field("value_bytes", &self.value.len())
            .field("fence", &self.fence)
            .finish()
    }
}

impl FencedWrite {
    /// `field` of the hash `key` := `value`, fenced by `writer`'s fence
    /// (`None`: the field `value`, for `fenced_set`). Refused before anything
    /// is sent: an empty key or field, the reserved field `fence`, a Redlock
    /// client (`InvalidArgument`), a lease no longer valid (`LockLost`).
    pub fn new(
        writer: Writer<'_>,
        key: &[u8],
        field: Option<&[u8]>,
        value: &[u8],
    ) -> Result<FencedWrite, Error> {
        if key.is_empty() {
            return Err(Error::invalid(
                "the key of a fenced write must not be empty",
            ));
        }
        let field = field.unwrap_or(VALUE_FIELD);
        if field.is_empty() {
            return Err(Error::invalid(
                "the hash field of a fenced write must not be empty",
            ));
        }
        if field == FENCE_FIELD {
            return Err(Error::invalid(
                "the hash field \"fence\" holds the key's last accepted fence: write another field",
            ));
        }
        if writer.nodes > 1 {
            return Err(Error::invalid(format!(
                "fenced writes go to the one Redis that holds the data, and this Redlock client \
                 has {} independent nodes: keep the data in a store that checks the fence \
                 (see the README's \"Fenced writes\")",
                writer.nodes
            )));
        }
        if writer.valid_for.is_zero() {
            return Err(Error::LockLost {
                name: writer.name.clone(),
            });
        }
        Ok(FencedWrite {
            name: writer.name.clone(),
            key: key.to_vec(),
            field: field.to_vec(),
            value: value.to_vec(),
            fence: writer.fence,
        })
    }

    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The command (node 0: the one node).
    pub fn command(&self) -> Command {
        Command {
            id: CommandId(0),
            node: 0,
            script: Script::FencedSet,
            keys: vec![self.key.as_slice().into()],
            args: vec![
                FENCE_FIELD.into(),
                Bytes::decimal(self.fence),
                self.field.as_slice().into(),
                self.value.as_slice().into(),
            ],
            wait_replicas: None,
        }
    }

    /// Read the reply: applied, refused (`StaleFence`), or a `Redis` error
    /// (the key is not a hash, its fence field is not a fence, the server
    /// is unreachable; after an unknown outcome the write may have been
    /// applied).
    pub fn read(&self, reply: Reply) -> Result<(), Error> {
        let bad = || {
            Error::redis(
                Some(&self.name),
                "unexpected reply to the fenced-set script",
            )
        };
        match reply {
            Reply::Array(items) => match items.as_slice() {
                [Reply::Int(1), Reply::Bulk(_)] => Ok(()),
                [Reply::Int(0), Reply::Bulk(digits)] => Err(Error::StaleFence {
                    name: Some(self.name.clone()),
                    resource: self.key.clone(),
                    fence: self.fence,
                    accepted: std::str::from_utf8(digits)
                        .ok()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or_else(bad)?,
                }),
                _ => Err(bad()),
            },
            Reply::Error(message) => Err(Error::redis(Some(&self.name), message)),
            Reply::Unknown(message) => Err(Error::redis(
                Some(&self.name),
                format!("{message} (the fenced write may or may not have been applied)"),
            )),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(name: &LockName) -> Writer<'_> {
        Writer {
            name,
            fence: 9_007_199_254_740_993,
            valid_for: Duration::from_secs(1),
            nodes: 1,
        }
    }

    #[test]
    fn command_touches_only_the_users_key() {
        let name = LockName::new("job").unwrap();
        let set = FencedWrite::new(writer(&name), b"acct:1", None, b"120").unwrap();
        let c = set.command();
        assert_eq!(c.script, Script::FencedSet);
        assert_eq!(c.keys, vec![b"acct:1".to_vec()]);
        assert_eq!(
            c.args,
            vec![
                b"fence".to_vec(),
                b"9007199254740993".to_vec(),
                b"value".to_vec(),
                b"120".to_vec()
            ]
        );
        let hset = FencedWrite::new(writer(&name), b"acct:1", Some(b"balance"), b"").unwrap();
        assert_eq!(hset.command().args[2], b"balance");
        assert!(!format!("{hset:?}").contains("120"));
    }

    #[test]
    fn bad_calls_are_refused_before_sending() {
        let name = LockName::new("job").unwrap();
        let w = writer(&name);
        let invalid = |r: Result<FencedWrite, Error>| matches!(r, Err(Error::InvalidArgument(_)));
        assert!(invalid(FencedWrite::new(w, b"", None, b"v")));
        assert!(invalid(FencedWrite::new(w, b"k", Some(b""), b"v")));
        assert!(invalid(FencedWrite::new(w, b"k", Some(b"fence"), b"v")));
        let redlock = Writer { nodes: 3, ..w };
        assert!(invalid(FencedWrite::new(redlock, b"k", None, b"v")));
        let gone = Writer {
            valid_for: Duration::ZERO,
            ..w
        };
        assert!(matches!(
            FencedWrite::new(gone, b"k", None, b"v"),
            Err(Error::LockLost { .. })
        ));
    }

    #[test]
    fn replies() {
        let name = LockName::new("job").unwrap();
        let set = FencedWrite::new(writer(&name), b"acct:1", None, b"v").unwrap();
        let pair = |applied: i64, fence: &str| {
            Reply::Array(vec![Reply::Int(applied), Reply::Bulk(fence.into())])
        };
        assert_eq!(set.read(pair(1, "9007199254740993")), Ok(()));
        assert_eq!(
            set.read(pair(0, "9007199254740994")),
            Err(Error::StaleFence {
                name: Some(name.clone()),
                resource: b"acct:1".to_vec(),
                fence: 9_007_199_254_740_993,
                accepted: 9_007_199_254_740_994
            })
        );
        assert!(matches!(set.read(pair(0, "x")), Err(Error::Redis { .. })));
        assert!(matches!(set.read(Reply::Int(1)), Err(Error::Redis { .. })));
        let wrongtype = set.read(Reply::Error("WRONGTYPE Operation".into()));
        assert!(wrongtype.unwrap_err().to_string().contains("WRONGTYPE"));
        let unknown = set.read(Reply::Unknown("timed out".into())).unwrap_err();
        assert!(unknown.to_string().contains("may or may not"), "{unknown}");
    }
}
