//! Randomness and client clocks.

use std::time::Duration;

use fencelock_core::Instant;

use super::Micros;

// ---------------------------------------------------------------------------
// Randomness: SplitMix64, tiny and good enough for scheduling decisions.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi` (returns `lo` if the range is empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

// ---------------------------------------------------------------------------
// Client clocks.

/// `local = offset + global * rate_ppm / 1e6`. A rate below 1e6 is a slow
/// clock (the dangerous direction for validity), above is a fast one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    pub offset: Micros,
    pub rate_ppm: u64,
}

impl Clock {
    pub const PERFECT: Clock = Clock {
        offset: 0,
        rate_ppm: 1_000_000,
    };

    /// What this clock reads at global time `global` (nanosecond precision).
    pub fn local(&self, global: Micros) -> Instant {
        let ns = self.offset as u128 * 1000 + global as u128 * self.rate_ppm as u128 / 1000;
        Instant::from_epoch(Duration::from_nanos(ns.min(u64::MAX as u128) as u64))
    }

    /// The first global time (whole µs) at which this clock reads at least
    /// `local`.
    pub fn global(&self, local: Instant) -> Micros {
        let l = local.since_epoch().as_nanos();
        let off = self.offset as u128 * 1000;
        if l <= off {
            return 0;
        }
        ((l - off) * 1000)
            .div_ceil(self.rate_ppm as u128)
            .min(u64::MAX as u128) as u64
    }
}
