//! Release messages: what a release publishes on a lock's channel, and
//! which waiters it wakes.
//!
//! Most releases publish `1`, which wakes every waiter of the name (each
//! looks at the lock again). A fair mutex's release (`fair_mutex_release.lua`)
//! instead names the first live waiter in its line, the only one that may
//! take the freed lock: it publishes that waiter's [`WakeId`], so the others
//! keep sleeping on their retry timers instead of all asking at once (and
//! queueing the first one's attempt behind theirs). The name is the SHA-1 of
//! the waiter's token in hex (`redis.sha1hex`): it tells a waiter it is the
//! one meant without revealing a token to whoever listens on the channel.
//! A missed message is covered as before by the retry timer.

use crate::Token;

/// A waiter's public name in release messages: the lowercase hex SHA-1 of
/// its token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakeId(Box<str>);

impl WakeId {
    /// What `redis.sha1hex(token)` returns.
    pub fn of(token: &Token) -> Self {
        WakeId(
            sha1_smol::Sha1::from(token.0.as_bytes())
                .digest()
                .to_string()
                .into(),
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `message` names another waiter: a wake id that is not ours.
    /// Anything else (`1`, a message from an older release script) wakes
    /// everyone, so it wakes us.
    pub fn names_another(&self, message: &[u8]) -> bool {
        is_wake_id(message) && message != self.0.as_bytes()
    }
}

/// 40 lowercase hex digits, as `redis.sha1hex` writes them.
fn is_wake_id(message: &[u8]) -> bool {
    message.len() == 40
        && message
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_the_hex_sha1_of_the_token() {
        // sha1("abc"), FIPS 180-1's first example.
        let id = WakeId::of(&Token("abc".into()));
        assert_eq!(id.as_str(), "a9993e364706816aba3e25717850c26c9cd0d89d");
    }

    #[test]
    fn only_another_wake_id_is_for_someone_else() {
        let id = WakeId::of(&Token("abc".into()));
        assert!(!id.names_another(id.as_str().as_bytes()));
        let other = WakeId::of(&Token("abd".into()));
        assert!(id.names_another(other.as_str().as_bytes()));
        // Messages that name nobody wake everyone.
        for message in [
            &b"1"[..],
            b"",
            b"A9993E364706816ABA3E25717850C26C9CD0D89D",
            b"abc",
        ] {
            assert!(!id.names_another(message), "{message:?}");
        }
    }
}
