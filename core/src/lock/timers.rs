//! The lock's timers, one slot per kind, so `poll_timeout` and
//! `handle_timeout` read the same table instead of loose fields.

use std::time::Duration;

use crate::{Instant, Ttl};

/// Every instant a lock may need to be woken at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timer {
    /// The acquire's wait runs out (`Wait::Bounded`): fail with `NotAcquired`.
    Deadline = 0,
    /// Ask again after a contended or unreachable attempt.
    Retry = 1,
    /// The lease's validity ends (drift already taken off): it is lost.
    /// Also what `Lock::valid_until` reports.
    Expiry = 2,
    /// Auto-renewal: send the next extend.
    Renew = 3,
}

impl Timer {
    /// In the order `handle_timeout` fires them: a wait that ran out beats a
    /// retry due at the same time, expiry beats a renewal.
    pub(super) const VALUES: [Timer; 4] =
        [Timer::Deadline, Timer::Retry, Timer::Expiry, Timer::Renew];
}

/// Unset timers hold [`Instant::NEVER`] (half the size of `Option`s; a
/// timer set that far out would never fire either).
#[derive(Clone, Copy, Debug)]
pub(super) struct TimerTable {
    at: [Instant; Timer::VALUES.len()],
}

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            at: [Instant::NEVER; Timer::VALUES.len()],
        }
    }
}

impl TimerTable {
    pub(super) fn set(&mut self, timer: Timer, at: Instant) {
        self.at[timer as usize] = at;
    }

    pub(super) fn get(&self, timer: Timer) -> Option<Instant> {
        Some(self.at[timer as usize]).filter(|&at| at != Instant::NEVER)
    }

    pub(super) fn stop(&mut self, timer: Timer) {
        self.at[timer as usize] = Instant::NEVER;
    }

    /// The earliest instant among the timers `armed` says count now.
    pub(super) fn next_timeout(&self, armed: impl Fn(Timer) -> bool) -> Option<Instant> {
        Timer::VALUES
            .into_iter()
            .filter(|&t| armed(t))
            .filter_map(|t| self.get(t))
            .min()
    }

    pub(super) fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|at| now >= at)
    }
}

/// Auto-renewal runs every ttl/3: two renewals can fail before expiry.
pub(super) fn renew_interval(ttl: Ttl) -> Duration {
    Duration::from_millis((ttl.as_millis() / 3).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_epoch(Duration::from_millis(n))
    }

    #[test]
    fn next_timeout_is_the_earliest_armed_timer() {
        let mut t = TimerTable::default();
        assert_eq!(t.next_timeout(|_| true), None);
        t.set(Timer::Expiry, ms(30));
        t.set(Timer::Renew, ms(10));
        assert_eq!(t.next_timeout(|_| true), Some(ms(10)));
        assert_eq!(t.next_timeout(|x| x != Timer::Renew), Some(ms(30)));
        t.stop(Timer::Renew);
        assert_eq!(t.get(Timer::Renew), None);
        assert!(!t.is_expired(Timer::Expiry, ms(29)));
        assert!(t.is_expired(Timer::Expiry, ms(30)));
        assert!(!t.is_expired(Timer::Retry, ms(1000)));
    }
}
