//! Lock names: 1..=1024 arbitrary bytes.

use std::fmt;
use std::sync::Arc;

use crate::Error;

pub const MAX_NAME_BYTES: usize = 1024;

/// A validated lock name. Not a secret: it is shown (lossily, shortened) in
/// messages so operators can find the lock. Shared, not copied: a lease
/// and the client's bookkeeping for it hold the same bytes.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockName(Arc<[u8]>);

impl LockName {
    pub fn new(name: impl AsRef<[u8]>) -> Result<Self, Error> {
        let bytes = name.as_ref();
        if bytes.is_empty() {
            return Err(Error::invalid("lock name must not be empty"));
        }
        if bytes.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(format!(
                "lock name is {} bytes; the limit is {MAX_NAME_BYTES}",
                bytes.len()
            )));
        }
        Ok(LockName(bytes.into()))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Display for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Shown(&self.0).fmt(f)
    }
}

/// Bytes in a message (a lock name, a key, a table): quoted, lossy UTF-8,
/// cut at 80 characters so a 1 KiB name does not drown the message.
pub(crate) struct Shown<'a>(pub &'a [u8]);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = String::from_utf8_lossy(self.0);
        let mut chars = text.chars();
        let shown: String = chars.by_ref().take(80).collect();
        let more = if chars.next().is_some() { "…" } else { "" };
        write!(f, "{:?}", format!("{shown}{more}"))
    }
}

impl fmt::Debug for LockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockName({self})")
    }
}
