//! Replica acknowledgement (`replicas=N`): a grant or an extension counts
//! only once `WAIT N timeout` confirms that N replicas have it, so a failover
//! to one of them cannot lose it. The driver runs the WAIT right after the
//! script on the same connection (pipelined: still one round trip) and hands
//! back both replies; this module reads them, `lock/` decides.

use crate::{Error, LockName, NotAcquiredReason, Reply};

/// "Also run `WAIT replicas timeout` after the script, on the same
/// connection, and reply `Array([script reply, WAIT reply])`."
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitReplicas {
    pub replicas: u32,
    /// `WAIT`'s own unit (a command carries this; so does every lease's
    /// queued command, hence not a 16-byte `Duration`).
    pub timeout_ms: u32,
}

/// The one range rule for `replicas=N`: a whole number from 0 to 2^32 - 1.
/// Python hands its `int` over as it is; Node and wasm their `number`.
pub fn replica_count(n: f64) -> Result<u32, Error> {
    if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
        Ok(n as u32)
    } else {
        Err(out_of_range(n))
    }
}

/// [`replica_count`] for an integer (Python's arbitrary-size `int`).
pub fn replica_count_int(n: i128) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| out_of_range(n))
}

fn out_of_range(n: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "replicas must be a whole number from 0 to {}, not {n}",
        u32::MAX
    ))
}

/// Split the driver's `Array([script reply, WAIT reply])` into the script's
/// reply and the number of replicas that acknowledged (0 when WAIT failed or
/// its reply is unreadable). A reply that is not such a pair (the whole
/// pipeline failed or timed out) is the script's own, with 0 acks.
pub(crate) fn split(reply: Reply) -> (Reply, u32) {
    match reply {
        Reply::Array(mut items) if items.len() == 2 => {
            let acks = match items.pop() {
                Some(Reply::Int(n)) if n >= 0 => u32::try_from(n).unwrap_or(u32::MAX),
                _ => 0,
            };
            (items.pop().expect("two items"), acks)
        }
        other => (other, 0),
    }
}

/// The acquire failure when too few replicas acknowledged a grant.
pub(crate) fn too_few(name: &LockName, acked: u32, wanted: u32) -> Error {
    Error::NotAcquired {
        name: name.clone(),
        reason: NotAcquiredReason::Replicas { acked, wanted },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_script_and_wait_replies() {
        let granted = Reply::Array(vec![Reply::Int(1), Reply::Int(7)]);
        assert_eq!(
            split(Reply::Array(vec![granted.clone(), Reply::Int(2)])),
            (granted.clone(), 2)
        );
        assert_eq!(
            split(Reply::Array(vec![
                granted.clone(),
                Reply::Error("ERR WAIT".into())
            ])),
            (granted, 0)
        );
        assert_eq!(
            split(Reply::Unknown("timed out".into())),
            (Reply::Unknown("timed out".into()), 0)
        );
    }
}
