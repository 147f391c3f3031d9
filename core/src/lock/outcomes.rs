//! Reply interpretation: what one node's reply to one script means. The
//! only place that knows the scripts' reply shapes, so the driver can hand
//! replies in uninterpreted.

use crate::replicas;
use crate::scripts::Role;
use crate::{Reply, WaitReplicas};

/// What one node said to one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Acquire: granted with this counter value. RaiseFence: counter now.
    /// Extend: 1. Release: 1, or 2 if the wake-up was not published.
    /// Handoff: released without handing over (1, or 2: not published).
    Yes(u64),
    /// Handoff: released and handed to the successor with this fence.
    HandedOver(u64),
    /// Acquire: held by someone else, with this PTTL. Extend/Release: 0.
    No(i64),
    /// The server refused (the script did not write anything).
    Failed(String),
    /// May or may not have run.
    Unknown(String),
    /// Acquire/Extend: the script said yes, but fewer replicas than required
    /// acknowledged it (`replicas=N`); our key may be there. Handoff: handed
    /// over, but not acknowledged by enough replicas.
    Unreplicated { acked: u32 },
}

impl Outcome {
    /// With `replicas=N`, acquire and extend replies carry the `WAIT` count
    /// too; a yes with too few acknowledgements is `Unreplicated`.
    pub(super) fn read(role: Role, reply: Reply, replicas: Option<WaitReplicas>) -> Outcome {
        match replicas {
            Some(wanted) if matches!(role, Role::Acquire | Role::Extend | Role::Handoff) => {
                let (reply, acked) = replicas::split(reply);
                match Outcome::parse(role, reply) {
                    // A handoff's plain release never needed them; its grant does.
                    Outcome::Yes(_) if acked < wanted.replicas && role != Role::Handoff => {
                        Outcome::Unreplicated { acked }
                    }
                    Outcome::HandedOver(_) if acked < wanted.replicas => {
                        Outcome::Unreplicated { acked }
                    }
                    outcome => outcome,
                }
            }
            _ => Outcome::parse(role, reply),
        }
    }

    /// The mutex's scripts and their counterparts for the other kinds
    /// answer in the same shapes: one reading per role.
    fn parse(role: Role, reply: Reply) -> Outcome {
        match (role, reply) {
            (_, Reply::Error(message)) => Outcome::Failed(message),
            (_, Reply::Unknown(message)) => Outcome::Unknown(message),
            (Role::Acquire, Reply::Array(items)) => match items.as_slice() {
                [Reply::Int(1), fence] => match granted_fence(fence) {
                    Some(fence) => Outcome::Yes(fence),
                    None => Outcome::Unknown("unexpected reply to the acquire script".to_owned()),
                },
                [Reply::Int(0), Reply::Int(pttl)] => Outcome::No(*pttl),
                // A reply we cannot read may still mean the script ran.
                _ => Outcome::Unknown("unexpected reply to the acquire script".to_owned()),
            },
            (Role::Handoff, Reply::Array(items)) => match items.as_slice() {
                [Reply::Int(1), fence] => match granted_fence(fence) {
                    Some(fence) => Outcome::HandedOver(fence),
                    None => Outcome::Unknown("unexpected reply to the handoff script".to_owned()),
                },
                [Reply::Int(2), Reply::Int(1)] => Outcome::Yes(1),
                [Reply::Int(2), Reply::Int(0)] => Outcome::Yes(2),
                [Reply::Int(0), Reply::Int(pttl)] => Outcome::No(*pttl),
                // It may have run: our key, or the successor's, may be set.
                _ => Outcome::Unknown("unexpected reply to the handoff script".to_owned()),
            },
            (Role::Handoff, _) => {
                Outcome::Unknown("unexpected reply to the handoff script".to_owned())
            }
            (Role::RaiseFence, counter) => match fence_value(&counter) {
                Some(fence) => Outcome::Yes(fence),
                None => Outcome::Failed("unexpected reply from Redis".to_owned()),
            },
            (Role::Release, Reply::Int(2)) => Outcome::Yes(2),
            (Role::Extend | Role::Release, Reply::Int(1)) => Outcome::Yes(1),
            (Role::Extend | Role::Release, Reply::Int(0)) => Outcome::No(0),
            (Role::Acquire, _) => {
                Outcome::Unknown("unexpected reply to the acquire script".to_owned())
            }
            _ => Outcome::Failed("unexpected reply from Redis".to_owned()),
        }
    }
}

impl Outcome {
    /// A handoff's outcome for the releaser: whether our key is gone from
    /// the node (released, handed over or not).
    pub(super) fn released(&self) -> bool {
        matches!(
            self,
            Outcome::Yes(_) | Outcome::HandedOver(_) | Outcome::Unreplicated { .. }
        )
    }

    /// A handoff's outcome for the successor, read as an acquire's: granted
    /// with the fence, not set (released and free: `No(-2)`, or someone
    /// else's: `No(pttl)`), or unknown (its key may be set).
    pub(super) fn for_successor(&self) -> Outcome {
        match self {
            Outcome::HandedOver(fence) => Outcome::Yes(*fence),
            Outcome::Yes(_) => Outcome::No(-2),
            other => other.clone(),
        }
    }
}

/// Whether a compensating release's reply says the release notification was
/// not published (the release script's 2; a reclaim answers 0 or 1). Nothing
/// else in a cleanup reply changes anything.
pub(super) fn not_published(reply: &Reply) -> bool {
    *reply == Reply::Int(2)
}

/// A fence as the scripts return it: a decimal string (exact u64), or an
/// integer reply from a server that converted it.
fn fence_value(reply: &Reply) -> Option<u64> {
    match reply {
        Reply::Bulk(digits) => decimal(digits),
        Reply::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A grant's fence: issued fences start at 1.
fn granted_fence(reply: &Reply) -> Option<u64> {
    fence_value(reply).filter(|&fence| fence > 0)
}

/// ASCII digits only (no sign, no spaces), within u64: read on every
/// grant, so without `str` validation and `FromStr`'s generality.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &byte| {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::decimal;

    #[test]
    fn decimal_reads_every_u64_and_nothing_else() {
        for n in [0, 1, 9, 10, 1 << 53, (1 << 53) + 1, u64::MAX - 1, u64::MAX] {
            assert_eq!(decimal(n.to_string().as_bytes()), Some(n));
        }
        assert_eq!(decimal(b"0007"), Some(7));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"+5",
            b"-5",
            b" 5",
            b"5 ",
            b"1e3",
            b"12a",
            b"/",
            b":",
        ] {
            assert_eq!(decimal(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
