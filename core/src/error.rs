//! The one error taxonomy, shared by every front end (see docs/architecture.md).

use std::fmt;

use crate::name::{LockName, Shown};

/// Everything that can go wrong with a lock operation.
///
/// `InvalidArgument` (a bad value, or a call the lease's state does not
/// allow) is a caller error raised before any Redis call; `Closed` says the
/// client was closed; the other three are outcomes of talking to Redis.
/// Messages name the lock and the cause, never a token or a password.
#[derive(Clone, PartialEq, Eq)]
pub enum Error {
    /// A bad argument (name, TTL, wait, URL, prefix), or an operation the
    /// lease's state does not allow (programming errors with one remedy:
    /// fix the call). Nothing was sent to Redis.
    InvalidArgument(String),
    /// The client was closed: before the call (`operation` refused, nothing
    /// sent), or while an acquire waited (the driver still sends its
    /// compensating release). Front ends show it as a kind of `Redis` error
    /// (Python `ClientClosed`, Node `ClientClosedError`), what these calls
    /// raised before, so code that caught those still does.
    Closed {
        name: LockName,
        operation: Operation,
    },
    /// The lock was not acquired within the allowed wait; `reason` says why.
    NotAcquired {
        name: LockName,
        reason: NotAcquiredReason,
    },
    /// The lease is no longer held (expired, taken over, or renewal failed).
    LockLost { name: LockName },
    /// A fenced write was refused: the resource already accepted a newer
    /// fence than this one, so a newer holder of the lock wrote (or an
    /// operator force-released it). A kind of `LockLost`: the front ends'
    /// classes derive from theirs. `resource`: the Redis key or SQL table;
    /// `name`: the lock, when the fence came from a lease.
    StaleFence {
        name: Option<LockName>,
        resource: Vec<u8>,
        fence: u64,
        accepted: u64,
    },
    /// Redis was unreachable or answered with an error.
    Redis {
        name: Option<LockName>,
        message: String,
    },
}

/// Why an acquire ended in [`Error::NotAcquired`]. Front ends expose
/// [`NotAcquiredReason::as_str`] (`reason` in Python and Node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotAcquiredReason {
    /// Someone else held the lock until the wait ran out.
    Held,
    /// Too few nodes answered for a majority (`unreachable` of `nodes` were
    /// unreachable or answered with an error) until the wait ran out.
    Unreachable { unreachable: usize, nodes: usize },
    /// Too few replicas acknowledged the write (`replicas=N`): the best
    /// granting node had `acked` of the `wanted`.
    Replicas { acked: u32, wanted: u32 },
}

/// What a caller attempted, named by [`Error::Closed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    Acquire,
    Extend,
    Release,
    Inspect,
    ForceRelease,
    FencedWrite,
    /// Listing the locks matching a pattern (`Closed` then names the
    /// pattern where a lock name would be).
    List,
    Watch,
}

impl Operation {
    /// `"acquire"`, `"extend"`, `"release"`, `"inspect"`, `"force release"`,
    /// `"write fenced by"`, `"list"` or `"watch"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Acquire => "acquire",
            Operation::Extend => "extend",
            Operation::Release => "release",
            Operation::Inspect => "inspect",
            Operation::ForceRelease => "force release",
            Operation::FencedWrite => "write fenced by",
            Operation::List => "list",
            Operation::Watch => "watch",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl NotAcquiredReason {
    /// `"held"`, `"unreachable"` or `"replicas"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            NotAcquiredReason::Held => "held",
            NotAcquiredReason::Unreachable { .. } => "unreachable",
            NotAcquiredReason::Replicas { .. } => "replicas",
        }
    }
}

impl fmt::Display for NotAcquiredReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAcquiredReason::Held => f.write_str("held by another client"),
            NotAcquiredReason::Unreachable { unreachable, nodes } => {
                write!(f, "{unreachable} of {nodes} nodes unreachable")
            }
            NotAcquiredReason::Replicas { acked, wanted } => {
                write!(f, "only {acked} of {wanted} replicas acknowledged")
            }
        }
    }
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    pub fn redis(name: Option<&LockName>, message: impl Into<String>) -> Self {
        Error::Redis {
            name: name.cloned(),
            message: message.into(),
        }
    }

    /// `operation` on lock `name` refused (or cut short): the client is
    /// closed. The one place that says so; every front end maps the kind.
    pub fn closed(name: &LockName, operation: Operation) -> Self {
        Error::Closed {
            name: name.clone(),
            operation,
        }
    }

    /// `NotAcquired` because someone else holds the lock.
    pub fn not_acquired(name: &LockName) -> Self {
        Error::NotAcquired {
            name: name.clone(),
            reason: NotAcquiredReason::Held,
        }
    }

    /// The lock this error is about (every error but `InvalidArgument`, and
    /// a `Redis` error of the client as a whole, names one).
    pub fn lock_name(&self) -> Option<&LockName> {
        match self {
            Error::InvalidArgument(_) => None,
            Error::NotAcquired { name, .. }
            | Error::LockLost { name }
            | Error::Closed { name, .. } => Some(name),
            Error::Redis { name, .. } | Error::StaleFence { name, .. } => name.as_ref(),
        }
    }

    /// The machine-readable detail beside [`Error::code`], if any: a
    /// `NotAcquired`'s reason (`"held"`, ...), a `StaleFence`'s accepted
    /// fence (decimal). The JS front ends carry it in their error tags.
    pub fn detail(&self) -> Option<String> {
        match self {
            Error::NotAcquired { reason, .. } => Some(reason.as_str().to_owned()),
            Error::StaleFence { accepted, .. } => Some(accepted.to_string()),
            _ => None,
        }
    }

    /// The reason of a `NotAcquired`.
    pub fn reason(&self) -> Option<NotAcquiredReason> {
        match self {
            Error::NotAcquired { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// A stable machine-readable code, used as Node's `error.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::NotAcquired { .. } => "NOT_ACQUIRED",
            Error::LockLost { .. } => "LOCK_LOST",
            Error::Redis { .. } => "REDIS",
            Error::Closed { .. } => "CLIENT_CLOSED",
            Error::StaleFence { .. } => "STALE_FENCE",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(message) => f.write_str(message),
            Error::NotAcquired { name, reason } => {
                write!(
                    f,
                    "lock {name} was not acquired within the allowed wait: {reason}"
                )
            }
            Error::LockLost { name } => write!(f, "lock {name} is no longer held by this lease"),
            Error::StaleFence {
                name,
                resource,
                fence,
                accepted,
            } => {
                write!(f, "fenced write to {} refused", Shown(resource))?;
                if let Some(name) = name {
                    write!(f, " (lock {name})")?;
                }
                write!(
                    f,
                    ": fence {fence} is older than {accepted}, the last one it accepted"
                )
            }
            Error::Closed {
                name,
                operation: Operation::List,
            } => write!(f, "cannot list locks matching {name}: the client is closed"),
            Error::Closed { name, operation } => {
                write!(f, "cannot {operation} lock {name}: the client is closed")
            }
            Error::Redis {
                name: Some(name),
                message,
            } => write!(f, "Redis error on lock {name}: {message}"),
            Error::Redis {
                name: None,
                message,
            } => write!(f, "Redis error: {message}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}({self})",
            match self {
                Error::InvalidArgument(_) => "InvalidArgument",
                Error::NotAcquired { .. } => "NotAcquired",
                Error::LockLost { .. } => "LockLost",
                Error::Redis { .. } => "Redis",
                Error::Closed { .. } => "Closed",
                Error::StaleFence { .. } => "StaleFence",
            }
        )
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_names_the_lock_and_what_was_attempted() {
        let name = LockName::new(b"jobs").unwrap();
        let e = Error::closed(&name, Operation::Release);
        assert_eq!(
            e.to_string(),
            r#"cannot release lock "jobs": the client is closed"#
        );
        assert_eq!(e.code(), "CLIENT_CLOSED");
        assert_eq!(e.lock_name(), Some(&name));
        assert_eq!(
            format!("{e:?}"),
            r#"Closed(cannot release lock "jobs": the client is closed)"#
        );
        let pattern = LockName::new(b"job:*").unwrap();
        assert_eq!(
            Error::closed(&pattern, Operation::List).to_string(),
            r#"cannot list locks matching "job:*": the client is closed"#
        );
    }

    #[test]
    fn stale_fence_names_the_resource_the_lock_and_both_fences() {
        let name = LockName::new(b"jobs").unwrap();
        let e = Error::StaleFence {
            name: Some(name.clone()),
            resource: b"acct:1".to_vec(),
            fence: 5,
            accepted: 7,
        };
        assert_eq!(
            e.to_string(),
            r#"fenced write to "acct:1" refused (lock "jobs"): fence 5 is older than 7, the last one it accepted"#
        );
        assert_eq!((e.code(), e.detail()), ("STALE_FENCE", Some("7".into())));
        assert_eq!(e.lock_name(), Some(&name));
        let bare = Error::StaleFence {
            name: None,
            resource: b"accounts".to_vec(),
            fence: 1,
            accepted: 2,
        };
        assert!(bare
            .to_string()
            .starts_with(r#"fenced write to "accounts" refused: "#));
        assert_eq!(bare.lock_name(), None);
    }
}
