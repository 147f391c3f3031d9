//! Randomised worlds for the property tests.

use std::time::Duration;

use fencelock_core::{Kind, Permits, Ttl, Wait};

use super::{AppAction, Clock, LeaseOpts, Net, Rng, Sim, MS};

// ---------------------------------------------------------------------------
// Randomised scenarios for the property tests.

/// What the leases of a scenario hold (all of the world's one name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    Mutex,
    /// Semaphore permits of this many.
    Semaphore(u32),
    /// Read or write locks, drawn per lease.
    ReadWrite,
    /// The mutex's name, each lease fair or plain (drawn per lease).
    FairMutex,
}

/// The knobs a property test varies; everything else is drawn from `seed`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub primitive: Primitive,
    pub seed: u64,
    pub nodes: usize,
    pub clients: usize,
    pub leases_per_client: usize,
    pub ttl_ms: u64,
    /// `None`: every lease waits forever; otherwise bounded waits up to this.
    pub max_wait_ms: Option<u64>,
    /// Client and server clock rates lie in `1e6 ± max_drift_ppm` (the core
    /// allows 1% + 2 ms in all, so up to 5,000 ppm on each side).
    pub max_drift_ppm: u64,
    pub pauses: bool,
    /// How many distinct nodes crash once each (delayed restart).
    pub crashes: usize,
    /// Crashed nodes come back with their data (persistence, e.g.
    /// `appendfsync always`) instead of empty.
    pub crashes_keep_data: bool,
    pub lossy: bool,
    /// Nodes start with different fence counters (up to the clock skew
    /// ahead of their clocks, as a Redlock write-back from a node with a
    /// faster clock leaves them).
    pub divergent_counters: bool,
    pub auto_renew: bool,
    pub extends: bool,
    pub cancels: bool,
    /// Spurious wake-ups of waiters at random instants.
    pub noise: bool,
    /// Nodes become unreachable (data kept) at random, any number at once.
    pub partitions: bool,
    /// Each client has the driver's local line: its leases start at random
    /// instants, line up behind the one holding the turn, and releases
    /// hand the lock to the first in line (`Lock::release_to`).
    pub handoffs: bool,
}

impl Scenario {
    pub fn build(&self) -> Sim {
        let mut rng = Rng::new(self.seed);
        let ttl = self.ttl_ms * MS;
        let net = if self.lossy {
            Net {
                delay: (100, 3 * MS),
                slow: 0.02,
                slow_delay: 60 * MS,
                drop_request: 0.05,
                drop_reply: 0.05,
                drop_wakeup: 0.2,
                timeout: 20 * MS,
            }
        } else {
            Net {
                // Sometimes a fast LAN, where a too-thin drift margin shows.
                delay: (100, [300, 3 * MS][rng.range(0, 1) as usize]),
                slow: 0.0,
                slow_delay: 0,
                drop_request: 0.0,
                drop_reply: 0.0,
                drop_wakeup: 0.0,
                timeout: 20 * MS,
            }
        };
        let mut sim = Sim::new(rng.next_u64(), self.nodes, net);
        // Clock rates within the bound, the extremes (where bugs live) often.
        let max = self.max_drift_ppm;
        let rate = |rng: &mut Rng| match rng.range(0, 3) {
            0 => 1_000_000 - max,
            1 => 1_000_000 + max,
            _ => 1_000_000 - max + rng.range(0, 2 * max),
        };
        // Server wall clocks (TIME, which fences come from) disagree by up
        // to ttl/2, less than a crashed node stays down (1.5 ttl): the
        // assumption under which fences survive data loss.
        let skew = ttl / 2;
        for n in 0..self.nodes {
            sim.nodes[n].rate_ppm = rate(&mut rng);
            sim.nodes[n].time_offset = rng.range(0, skew) as i64;
        }
        if self.divergent_counters {
            for n in 0..self.nodes {
                let c = (rng.range(0, skew) / MS * 1024 + rng.range(0, 20)) as i64;
                sim.set_counter(n, c);
            }
        }
        let horizon = ttl * 3 * (self.clients * self.leases_per_client) as u64;
        for _ in 0..self.clients {
            let clock = Clock {
                offset: rng.range(0, 1_000_000_000),
                rate_ppm: rate(&mut rng),
            };
            let c = sim.add_client(clock);
            if self.handoffs {
                sim.local_line(c);
            }
            if self.pauses {
                for _ in 0..rng.range(0, 2) {
                    let from = rng.range(0, horizon);
                    let len = rng.range(MS, 2 * ttl);
                    sim.clients[c].pauses.push((from, from + len));
                }
            }
            let mut prev: Option<usize> = None;
            for _ in 0..self.leases_per_client {
                let wait = match self.max_wait_ms {
                    None => Wait::Forever,
                    Some(w) => Wait::Bounded(Duration::from_millis(rng.range(0, w))),
                };
                let mut opts = LeaseOpts::new(self.ttl_ms, wait);
                opts.kind = match self.primitive {
                    Primitive::Mutex => Kind::Mutex,
                    Primitive::Semaphore(n) => Kind::Semaphore(Permits::new(n.into()).unwrap()),
                    Primitive::ReadWrite if rng.chance(0.5) => Kind::Read,
                    Primitive::ReadWrite => Kind::Write,
                    Primitive::FairMutex => Kind::Mutex.fair(rng.chance(0.7)),
                };
                opts.auto_renew = self.auto_renew && rng.chance(0.5);
                opts.plan.hold = Some(rng.range(0, 2 * ttl));
                if self.extends && rng.chance(0.5) {
                    opts.plan.extend_after = Some(rng.range(0, ttl));
                    if rng.chance(0.5) {
                        // Shorter or longer than the lease's own (at most
                        // 1.5x: the delayed restart below covers that).
                        let ms = rng.range(self.ttl_ms / 2, self.ttl_ms * 3 / 2).max(1);
                        opts.plan.extend_ttl = Some(Ttl::from_millis(ms).unwrap());
                    }
                }
                let l = sim.add_lease(c, opts);
                match prev {
                    None => sim.at(rng.range(0, ttl), l, AppAction::Acquire),
                    // In line together: they overlap, and hand over.
                    Some(_) if self.handoffs => sim.at(rng.range(0, ttl), l, AppAction::Acquire),
                    Some(p) => sim.leases[p].plan.then = Some((l, rng.range(0, ttl / 2))),
                }
                prev = Some(l);
            }
        }
        if self.cancels {
            // Cancels at random instants; a cancel of a lease not yet started
            // or already done must be harmless (it is ignored by `app`).
            for l in 0..sim.leases.len() {
                if rng.chance(0.3) {
                    let at = rng.range(0, horizon);
                    sim.at(at, l, AppAction::Cancel);
                }
            }
        }
        let crashable = self.crashes.min(self.nodes);
        for node in 0..crashable {
            let at = rng.range(0, horizon);
            // Delayed restart: down for at least the longest TTL any key has.
            let down = ttl * 3 / 2 + rng.range(MS, ttl);
            if self.crashes_keep_data {
                sim.partition_at(at, node, down);
            } else {
                sim.crash_at(at, node, down);
            }
        }
        if self.partitions {
            for node in 0..self.nodes {
                for _ in 0..rng.range(0, 2) {
                    let at = rng.range(0, horizon);
                    sim.partition_at(at, node, rng.range(MS, 2 * ttl));
                }
            }
        }
        if self.noise {
            sim.noise(rng.range(ttl / 50, ttl / 10).max(200), 2 * horizon);
        }
        sim
    }
}
