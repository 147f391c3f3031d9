//! Time as the core sees it: a monotonic instant handed in by the caller.
//! The core never reads a clock, so the simulator can drive it with a virtual
//! one and WebAssembly hosts with `performance.now()`.

use std::ops::Add;
use std::time::Duration;

/// A point on the caller's monotonic clock, as the time since an epoch the
/// caller chose (process start, say). Only differences are meaningful.
/// Whole nanoseconds in a `u64` (8 bytes: a lock keeps several), saturating
/// 584 years after the epoch, which stands for "never".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

/// `d` in whole nanoseconds, saturating.
const fn nanos(d: Duration) -> u64 {
    let n = d.as_nanos();
    if n > u64::MAX as u128 {
        u64::MAX
    } else {
        n as u64
    }
}

impl Instant {
    /// The last instant: what a time further out saturates to.
    pub(crate) const NEVER: Instant = Instant(u64::MAX);

    pub const fn from_epoch(since_epoch: Duration) -> Self {
        Instant(nanos(since_epoch))
    }

    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(nanos(rhs)))
    }
}

/// `d` in whole milliseconds (rounded down), at most `u32::MAX`: what the
/// core keeps per lease where a `Duration`'s 16 bytes would be spare.
pub(crate) fn millis_u32(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}
