//! TTL, wait and timeout arguments: every front end converts its native
//! number here, once, so rounding and rejection are identical in Rust,
//! Python and Node, and the driver takes the typed value as it is.

use std::time::Duration;

use crate::Error;

/// The largest TTL: 2^40 ms (about 35 years).
pub const MAX_TTL_MS: u64 = 1 << 40;

/// The smallest TTL: 3 ms, the first that leaves validity after the
/// clock-drift allowance (ttl > ttl/100 + 2 ms). A smaller lease would be
/// invalid the moment it is granted, so it is a bad argument everywhere.
pub const MIN_TTL_MS: u64 = 3;

/// A lock TTL in whole milliseconds, 3 ms ..= 2^40 ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(u64);

impl Ttl {
    pub fn from_millis(ms: u64) -> Result<Self, Error> {
        if ms == 0 {
            return Err(Error::invalid("ttl must be positive"));
        }
        if ms < MIN_TTL_MS {
            return Err(Error::invalid(format!(
                "ttl {ms} ms leaves no validity after the clock-drift allowance \
                 (ttl/100 + 2 ms): use at least {MIN_TTL_MS} ms"
            )));
        }
        if ms > MAX_TTL_MS {
            return Err(Error::invalid(format!(
                "ttl must be at most {MAX_TTL_MS} ms"
            )));
        }
        Ok(Ttl(ms))
    }

    /// Fractions of a millisecond round up.
    pub fn from_duration(ttl: Duration) -> Result<Self, Error> {
        let ms = ttl.as_nanos().div_ceil(1_000_000);
        Self::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// Python's unit: seconds as a float.
    pub fn from_secs_f64(secs: f64) -> Result<Self, Error> {
        Self::from_millis_f64(finite_non_negative("ttl", secs)? * 1000.0)
    }

    /// Node's unit: milliseconds as a float.
    pub fn from_millis_f64(ms: f64) -> Result<Self, Error> {
        let ms = finite_non_negative("ttl", ms)?.ceil();
        if ms > MAX_TTL_MS as f64 {
            return Err(Error::invalid(format!(
                "ttl must be at most {MAX_TTL_MS} ms"
            )));
        }
        Self::from_millis(ms as u64)
    }

    pub const fn as_millis(self) -> u64 {
        self.0
    }

    pub const fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// The clock-drift allowance subtracted from every validity window:
    /// ttl/100 + 2 ms (the Redlock paper's factor plus a fixed margin).
    pub const fn drift(self) -> Duration {
        Duration::from_millis(self.0 / 100 + 2)
    }
}

/// The most time an auto-renewed lease is kept alive in total, counted from
/// the acquire: whole milliseconds, 1 ms ..= 2^40 ms (fractions round up).
/// Renewal stops once it is reached, so the lease then runs out at the end of
/// its last validity window and is lost like one whose renewal failed. A
/// lease that does not auto-renew accepts it and ignores it.
/// Never 0, so an `Option<MaxHold>` (every lease's config has one) takes
/// 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaxHold(std::num::NonZeroU64);

impl MaxHold {
    pub fn from_millis(ms: u64) -> Result<Self, Error> {
        let Some(ms) = std::num::NonZeroU64::new(ms) else {
            return Err(Error::invalid("max hold must be positive"));
        };
        if ms.get() > MAX_TTL_MS {
            return Err(Error::invalid(format!(
                "max hold must be at most {MAX_TTL_MS} ms"
            )));
        }
        Ok(MaxHold(ms))
    }

    /// Fractions of a millisecond round up.
    pub fn from_duration(max_hold: Duration) -> Result<Self, Error> {
        let ms = max_hold.as_nanos().div_ceil(1_000_000);
        Self::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// Python's unit: seconds as a float.
    pub fn from_secs_f64(secs: f64) -> Result<Self, Error> {
        Self::from_millis_f64(finite_non_negative("max hold", secs)? * 1000.0)
    }

    /// Node's unit: milliseconds as a float.
    pub fn from_millis_f64(ms: f64) -> Result<Self, Error> {
        let ms = finite_non_negative("max hold", ms)?.ceil();
        if ms > MAX_TTL_MS as f64 {
            return Err(Error::invalid(format!(
                "max hold must be at most {MAX_TTL_MS} ms"
            )));
        }
        Self::from_millis(ms as u64)
    }

    pub const fn as_millis(self) -> u64 {
        self.0.get()
    }

    pub const fn as_duration(self) -> Duration {
        Duration::from_millis(self.0.get())
    }
}

/// How long a lock's fence key outlives the lock itself (after the last
/// acquire, extend or renewal), 0 ..= 2^40 ms. Within the grace the stored
/// fence still counts; after it the key is gone and the next fence comes
/// from the server clock alone. So a name used once leaves nothing in Redis
/// after ttl + grace, and fences survive server clocks that disagree (or step
/// back) by less than the grace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FenceGrace(u64);

impl Default for FenceGrace {
    fn default() -> Self {
        FenceGrace::DEFAULT
    }
}

impl FenceGrace {
    /// 60 s.
    pub const DEFAULT: FenceGrace = FenceGrace(60_000);

    pub fn from_millis(ms: u64) -> Result<Self, Error> {
        if ms > MAX_TTL_MS {
            return Err(Error::invalid(format!(
                "fence grace must be at most {MAX_TTL_MS} ms"
            )));
        }
        Ok(FenceGrace(ms))
    }

    /// Fractions of a millisecond round up.
    pub fn from_duration(grace: Duration) -> Result<Self, Error> {
        let ms = grace.as_nanos().div_ceil(1_000_000);
        Self::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// Python's unit: seconds as a float.
    pub fn from_secs_f64(secs: f64) -> Result<Self, Error> {
        Self::from_millis_f64(finite_non_negative("fence grace", secs)? * 1000.0)
    }

    /// Node's unit: milliseconds as a float.
    pub fn from_millis_f64(ms: f64) -> Result<Self, Error> {
        let ms = finite_non_negative("fence grace", ms)?.ceil();
        if ms > MAX_TTL_MS as f64 {
            return Err(Error::invalid(format!(
                "fence grace must be at most {MAX_TTL_MS} ms"
            )));
        }
        Self::from_millis(ms as u64)
    }

    pub const fn as_millis(self) -> u64 {
        self.0
    }

    pub const fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// The fence key's TTL for a lock held for `ttl`.
    pub const fn fence_ttl(self, ttl: Ttl) -> u64 {
        ttl.0 + self.0
    }
}

/// How long an acquire may wait for a held lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Wait {
    /// Wait until acquired.
    #[default]
    Forever,
    /// Wait at most this long; zero means a single attempt.
    Bounded(Duration),
}

impl Wait {
    pub const TRY_ONCE: Wait = Wait::Bounded(Duration::ZERO);

    /// Python's unit: `None` waits forever, otherwise seconds.
    pub fn from_secs_f64(secs: Option<f64>) -> Result<Self, Error> {
        match secs {
            None => Ok(Wait::Forever),
            Some(secs) => Self::from_millis_f64(Some(finite_non_negative("wait", secs)? * 1000.0)),
        }
    }

    /// Node's unit: `undefined` waits forever, otherwise milliseconds.
    pub fn from_millis_f64(ms: Option<f64>) -> Result<Self, Error> {
        match ms {
            None => Ok(Wait::Forever),
            Some(ms) => {
                let ms = finite_non_negative("wait", ms)?;
                Duration::try_from_secs_f64(ms / 1000.0)
                    .map(Wait::Bounded)
                    .map_err(|_| Error::invalid("wait is too large"))
            }
        }
    }
}

/// A connect or response timeout: positive and finite. The one owner of
/// that rule: the driver's options, Python's seconds and Node's
/// milliseconds all become a `Timeout` through one constructor each.
/// `what` names the option in the message (`connect_timeout`,
/// `options.responseTimeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timeout(Duration);

impl Default for Timeout {
    fn default() -> Self {
        Timeout::DEFAULT
    }
}

impl Timeout {
    /// 2 s: the default connect and response timeout.
    pub const DEFAULT: Timeout = Timeout(Duration::from_secs(2));

    pub fn from_duration(what: &str, timeout: Duration) -> Result<Self, Error> {
        if timeout.is_zero() {
            return Err(Error::invalid(format!("{what} must be positive")));
        }
        Ok(Timeout(timeout))
    }

    /// Python's unit: seconds as a float.
    pub fn from_secs_f64(what: &str, secs: f64) -> Result<Self, Error> {
        match Duration::try_from_secs_f64(secs) {
            Ok(timeout) if !timeout.is_zero() => Ok(Timeout(timeout)),
            _ => Err(Error::invalid(format!(
                "{what} must be a positive, finite number of seconds"
            ))),
        }
    }

    /// Node's unit: milliseconds as a float.
    pub fn from_millis_f64(what: &str, ms: f64) -> Result<Self, Error> {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(Error::invalid(format!(
                "{what} must be a positive, finite number of milliseconds"
            )));
        }
        let timeout = Duration::try_from_secs_f64(ms / 1000.0)
            .map_err(|_| Error::invalid(format!("{what} is too large")))?;
        Self::from_duration(what, timeout)
    }

    pub const fn as_duration(self) -> Duration {
        self.0
    }
}

fn finite_non_negative(what: &str, value: f64) -> Result<f64, Error> {
    if value.is_nan() {
        return Err(Error::invalid(format!("{what} must be a number, not NaN")));
    }
    if value.is_infinite() {
        return Err(Error::invalid(format!("{what} must be finite")));
    }
    if value < 0.0 {
        return Err(Error::invalid(format!("{what} must not be negative")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_fractions_up_and_rejects_bad_values() {
        assert_eq!(Ttl::from_secs_f64(0.0021).unwrap().as_millis(), 3);
        assert_eq!(Ttl::from_millis_f64(2.2).unwrap().as_millis(), 3);
        assert_eq!(
            Ttl::from_duration(Duration::from_micros(3500))
                .unwrap()
                .as_millis(),
            4
        );
        assert_eq!(
            Ttl::from_millis(MAX_TTL_MS).unwrap().as_millis(),
            MAX_TTL_MS
        );
        for bad in [
            0.0,
            0.001,
            1.0,
            2.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            (MAX_TTL_MS + 1) as f64,
            1e300,
        ] {
            assert!(
                matches!(Ttl::from_millis_f64(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
        assert!(Ttl::from_duration(Duration::ZERO).is_err());
        assert!(Ttl::from_duration(Duration::MAX).is_err());
    }

    #[test]
    fn the_ttl_floor_is_the_first_ttl_with_validity_after_the_drift() {
        for ms in 1..MIN_TTL_MS {
            assert!(Ttl::from_millis(ms).is_err(), "{ms}");
        }
        for ms in (MIN_TTL_MS..1000).chain([MAX_TTL_MS]) {
            let ttl = Ttl::from_millis(ms).unwrap();
            assert!(ttl.drift() < ttl.as_duration(), "{ms}");
        }
    }

    #[test]
    fn max_hold_is_positive_whole_ms_and_rejects_bad_values() {
        assert_eq!(MaxHold::from_secs_f64(2.5).unwrap().as_millis(), 2_500);
        assert_eq!(MaxHold::from_secs_f64(0.0001).unwrap().as_millis(), 1);
        assert_eq!(MaxHold::from_millis_f64(1.2).unwrap().as_millis(), 2);
        assert_eq!(
            MaxHold::from_duration(Duration::from_micros(1500))
                .unwrap()
                .as_millis(),
            2
        );
        assert_eq!(
            MaxHold::from_millis(MAX_TTL_MS).unwrap().as_duration(),
            Duration::from_millis(MAX_TTL_MS)
        );
        for bad in [
            0.0,
            -0.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            (MAX_TTL_MS + 1) as f64,
            1e300,
        ] {
            assert!(
                matches!(
                    MaxHold::from_millis_f64(bad),
                    Err(Error::InvalidArgument(_))
                ),
                "{bad}"
            );
            assert!(MaxHold::from_secs_f64(bad / 1000.0).is_err(), "{bad}");
        }
        assert!(MaxHold::from_duration(Duration::ZERO).is_err());
        assert!(MaxHold::from_duration(Duration::MAX).is_err());
    }

    #[test]
    fn fence_grace_allows_zero_and_rejects_bad_values() {
        assert_eq!(FenceGrace::from_secs_f64(0.0).unwrap().as_millis(), 0);
        assert_eq!(FenceGrace::from_millis_f64(1.5).unwrap().as_millis(), 2);
        assert_eq!(FenceGrace::default().as_millis(), 60_000);
        assert_eq!(
            FenceGrace::from_millis(5)
                .unwrap()
                .fence_ttl(Ttl::from_millis(10).unwrap()),
            15
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            assert!(FenceGrace::from_millis_f64(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timeout_is_positive_and_finite_in_every_unit() {
        assert_eq!(
            Timeout::from_secs_f64("t", 0.5).unwrap().as_duration(),
            Duration::from_millis(500)
        );
        assert_eq!(
            Timeout::from_millis_f64("t", 1.5).unwrap().as_duration(),
            Duration::from_micros(1500)
        );
        assert_eq!(Timeout::DEFAULT.as_duration(), Duration::from_secs(2));
        assert!(Timeout::from_duration("t", Duration::ZERO).is_err());
        for bad in [0.0, -1.0, 1e-12, f64::NAN, f64::INFINITY, 1e300] {
            assert!(Timeout::from_secs_f64("t", bad).is_err(), "{bad}");
            assert!(Timeout::from_millis_f64("t", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wait_accepts_zero_and_none_and_rejects_bad_values() {
        assert_eq!(Wait::from_secs_f64(None).unwrap(), Wait::Forever);
        assert_eq!(Wait::from_secs_f64(Some(0.0)).unwrap(), Wait::TRY_ONCE);
        assert_eq!(
            Wait::from_millis_f64(Some(1.5)).unwrap(),
            Wait::Bounded(Duration::from_micros(1500))
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            assert!(Wait::from_millis_f64(Some(bad)).is_err(), "{bad}");
        }
    }
}
