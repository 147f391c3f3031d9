//! The core's clock for this process: [`Instant`]s count from one process-wide
//! epoch, so the lease getters and the lease actors agree on "now".

use std::sync::OnceLock;
use std::time::Duration;

use fencelock_core::Instant;

static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();

/// The process-wide origin of the core's clock.
pub(crate) fn epoch() -> std::time::Instant {
    *EPOCH.get_or_init(std::time::Instant::now)
}

pub(crate) fn now() -> Instant {
    Instant::from_epoch(epoch().elapsed())
}

/// Nanoseconds since the epoch (for lock-free getters), saturating.
pub(crate) fn nanos(at: Instant) -> u64 {
    u64::try_from(at.since_epoch().as_nanos()).unwrap_or(u64::MAX)
}

/// The tokio deadline for a core instant (a far-off one for an instant the
/// platform clock cannot represent).
pub(crate) fn to_tokio(at: Instant) -> tokio::time::Instant {
    let epoch = epoch();
    let at = epoch
        .checked_add(at.since_epoch())
        .unwrap_or_else(|| epoch + Duration::from_secs(86_400 * 365 * 30));
    tokio::time::Instant::from_std(at)
}
