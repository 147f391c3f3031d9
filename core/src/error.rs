//! The one error taxonomy, shared by every front end (see docs/architecture.md).

use std::fmt;

use crate::name::LockName;

/// Everything that can go wrong with a lock operation.
///
/// `InvalidArgument` is caller misuse and is raised before any Redis call; the
/// other three are outcomes of talking to Redis. Messages name the lock and the
/// cause, never a token or a password.
#[derive(Clone, PartialEq, Eq)]
pub enum Error {
    /// A bad argument (name, TTL, wait, URL, prefix), or an operation the
    /// lease's state does not allow. Nothing was sent to Redis.
    InvalidArgument(String),
    /// The lock was not acquired within the allowed wait.
    NotAcquired { name: LockName },
    /// The lease is no longer held (expired, taken over, or renewal failed).
    LockLost { name: LockName },
    /// Redis was unreachable or answered with an error.
    Redis {
        name: Option<LockName>,
        message: String,
    },
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

    /// A stable machine-readable code, used as Node's `error.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "INVALID_ARGUMENT",
            Error::NotAcquired { .. } => "NOT_ACQUIRED",
            Error::LockLost { .. } => "LOCK_LOST",
            Error::Redis { .. } => "REDIS",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(message) => f.write_str(message),
            Error::NotAcquired { name } => {
                write!(f, "lock {name} was not acquired within the allowed wait")
            }
            Error::LockLost { name } => write!(f, "lock {name} is no longer held by this lease"),
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
            }
        )
    }
}

impl std::error::Error for Error {}
