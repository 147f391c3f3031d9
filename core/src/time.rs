//! Time as the core sees it: a monotonic instant handed in by the caller.
//! The core never reads a clock, so the simulator can drive it with a virtual
//! one and WebAssembly hosts with `performance.now()`.

use std::ops::Add;
use std::time::Duration;

/// A point on the caller's monotonic clock, as the time since an epoch the
/// caller chose (process start, say). Only differences are meaningful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(Duration);

impl Instant {
    pub const fn from_epoch(since_epoch: Duration) -> Self {
        Instant(since_epoch)
    }

    pub const fn since_epoch(self) -> Duration {
        self.0
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs))
    }
}
