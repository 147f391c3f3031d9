//! What a lease holds: fencelock's mutex, one permit of a counting
//! semaphore, or the shared (read) or exclusive (write) side of a
//! read-write lock. One [`Lock`](crate::Lock) state machine drives them all
//! (quorum, validity, fencing write-back, renewal, loss, compensation); the
//! kind only selects the scripts it sends and the keys they take
//! (`lock/outputs.rs`). The mutex's scripts, keys and wire commands are
//! those of every earlier release.
//!
//! The semaphore and the read-write lock keep their holders in a sorted set
//! (member = lease token, score = the server-time instant it expires, in
//! ms), pruned by every script, and queue their waiters in a fair line: a
//! sorted set in arrival order (score = server time in µs at the first
//! attempt) beside one of each waiter's expiry. A waiter refreshes its
//! entry on every attempt, so a crashed one leaves the line within
//! [`Kind::line_patience`]; one that gives up leaves at once (its release,
//! the compensation the core sends anyway). The line is kept by the
//! scripts, not by the keys: the fair mutex ([`Kind::FairMutex`]) keeps the
//! mutex's own string key and fence and queues its waiters in such a line
//! beside them (`fair_mutex_acquire.lua`).

use std::time::Duration;

use crate::{Error, RetryPolicy};

/// What a lease holds (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The mutex: one holder (a string key).
    Mutex,
    /// The same mutex (its key, token and fence), its waiters served in
    /// arrival order across every client through a fair line. A plain
    /// [`Kind::Mutex`] acquire of the name still excludes it, and may take
    /// the lock while it is free ahead of the line (it does not look at it).
    FairMutex,
    /// One of `permits` permits of a counting semaphore, handed out in
    /// arrival order across every client.
    Semaphore(Permits),
    /// The shared side of a read-write lock: any number of readers while no
    /// writer holds it or waits for it (writer preference).
    Read,
    /// The exclusive side: one writer, no readers; writers are served in
    /// arrival order and block new readers while they wait.
    Write,
}

impl Kind {
    /// Whether an attempt that is turned away stands in the fair line on
    /// the server (so the core must take it out when the acquire ends
    /// without the lease). Readers do not queue: any waiting writer keeps
    /// them out, and a free lock lets them all in.
    pub const fn queues(self) -> bool {
        matches!(self, Kind::Semaphore(_) | Kind::Write | Kind::FairMutex)
    }

    /// Whether the lease is the mutex's string key (fair or not): the
    /// mutex's extend, reclaim and inspect scripts serve it.
    pub const fn is_mutex(self) -> bool {
        matches!(self, Kind::Mutex | Kind::FairMutex)
    }

    /// The kind an acquire with the `fair` option takes: the fair mutex for
    /// the mutex; every other kind as it is (permits and writers already
    /// wait in arrival order, readers never wait in a line).
    pub const fn fair(self, fair: bool) -> Kind {
        match self {
            Kind::Mutex if fair => Kind::FairMutex,
            kind => kind,
        }
    }

    /// Whether waiters of one client for one name line up behind a single
    /// remote attempt (the driver's local FIFO). Only the plain mutex:
    /// permits and readers are shared, so one client may hold several at
    /// once, and the server's line orders those waiters anyway (a fair
    /// mutex's too: each of its waiters stands in the line itself, so
    /// they are served in arrival order with every other client's).
    pub const fn lines_up_locally(self) -> bool {
        matches!(self, Kind::Mutex)
    }

    /// Whether a release wakes only the first waiter in the line, named by
    /// its [`WakeId`](crate::WakeId) (`fair_mutex_release.lua`), so a
    /// waiter ignores a message naming another. Only the fair mutex: a free
    /// lock is the first waiter's alone. (A permit or a write lock freed may
    /// let several in; their releases still wake every waiter.)
    pub const fn wakes_first_in_line(self) -> bool {
        matches!(self, Kind::FairMutex)
    }

    /// How long a waiter's place in the fair line lasts without a new
    /// attempt: three times the longest a live waiter sleeps between two
    /// (the retry policy's `max_delay`), so only a crashed or partitioned
    /// waiter loses it.
    pub fn line_patience(retry: &RetryPolicy) -> Duration {
        (retry.max_delay() * 3).max(Duration::from_millis(100))
    }

    /// How many of `nodes` independent nodes (Redlock) must grant, extend
    /// or release a lease of this kind. A majority for the exclusive kinds
    /// and readers: two holders' majorities share a node, which cannot hold
    /// both (a writer and a reader exclude each other on every node). A
    /// semaphore of N permits needs more than nodes x N / (N + 1): each
    /// node holds at most N, so N + 1 holders on a bare majority each could
    /// fit (three holders of two permits over three nodes, two nodes each).
    /// All three of three nodes for N >= 2; four of five for N = 2 or 3.
    pub const fn quorum(self, nodes: usize) -> usize {
        match self {
            Kind::Semaphore(permits) => {
                let n = permits.get() as usize;
                nodes * n / (n + 1) + 1
            }
            Kind::Mutex | Kind::FairMutex | Kind::Read | Kind::Write => nodes / 2 + 1,
        }
    }

    /// The name messages and logs use: "lock", "semaphore", "read lock",
    /// "write lock".
    pub const fn noun(self) -> &'static str {
        match self {
            Kind::Mutex | Kind::FairMutex => "lock",
            Kind::Semaphore(_) => "semaphore",
            Kind::Read => "read lock",
            Kind::Write => "write lock",
        }
    }
}

/// A semaphore's number of permits: a whole number from 1 to
/// [`Permits::MAX`]. Every client of one semaphore should pass the same
/// number (each attempt is judged by its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permits(u32);

impl Permits {
    pub const MAX: u32 = 1_000_000;

    pub fn new(n: u64) -> Result<Self, Error> {
        match u32::try_from(n) {
            Ok(n) if (1..=Self::MAX).contains(&n) => Ok(Permits(n)),
            _ => Err(out_of_range(n)),
        }
    }

    /// Node's and wasm's `number`.
    pub fn from_f64(n: f64) -> Result<Self, Error> {
        if n.fract() == 0.0 && (1.0..=f64::from(Self::MAX)).contains(&n) {
            Ok(Permits(n as u32))
        } else {
            Err(out_of_range(n))
        }
    }

    /// Python's arbitrary-size `int`.
    pub fn from_int(n: i128) -> Result<Self, Error> {
        u64::try_from(n)
            .map_err(|_| out_of_range(n))
            .and_then(Self::new)
    }

    pub const fn get(self) -> u32 {
        self.0
    }
}

fn out_of_range(n: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "permits must be a whole number from 1 to {}, not {n}",
        Permits::MAX
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_whole_numbers_in_range() {
        assert_eq!(Permits::new(1).unwrap().get(), 1);
        assert_eq!(Permits::from_f64(3.0).unwrap().get(), 3);
        assert_eq!(Permits::from_int(1_000_000).unwrap().get(), 1_000_000);
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY, 1e6 + 1.0] {
            assert!(matches!(
                Permits::from_f64(bad),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(Permits::new(0).is_err());
        assert!(Permits::from_int(-3).is_err());
        assert!(Permits::from_int(1 << 40).is_err());
    }

    #[test]
    fn only_the_mutex_lines_up_locally_and_readers_never_queue() {
        assert!(Kind::Mutex.lines_up_locally());
        let three = Kind::Semaphore(Permits::new(3).unwrap());
        for kind in [three, Kind::Read, Kind::Write] {
            assert!(!kind.lines_up_locally());
        }
        assert!(three.queues() && Kind::Write.queues());
        assert!(!Kind::Mutex.queues() && !Kind::Read.queues());
        assert!(Kind::FairMutex.queues() && !Kind::FairMutex.lines_up_locally());
        assert_eq!(Kind::Mutex.fair(true), Kind::FairMutex);
        assert_eq!(Kind::Mutex.fair(false), Kind::Mutex);
        assert_eq!(three.fair(true), three);
        assert_eq!(Kind::Read.fair(true), Kind::Read);
        assert!(Kind::FairMutex.is_mutex() && !three.is_mutex());
        let sem = |n| Kind::Semaphore(Permits::new(n).unwrap());
        for (kind, nodes, quorum) in [
            (Kind::Mutex, 1, 1),
            (Kind::Mutex, 3, 2),
            (Kind::FairMutex, 5, 3),
            (Kind::Write, 5, 3),
            (Kind::Read, 5, 3),
            (sem(1), 3, 2),
            (sem(2), 3, 3),
            (sem(2), 5, 4),
            (sem(3), 5, 4),
            (sem(4), 5, 5),
            (sem(100), 1, 1),
        ] {
            assert_eq!(kind.quorum(nodes), quorum, "{kind:?} over {nodes}");
        }
        assert_eq!(
            Kind::line_patience(&RetryPolicy::default()),
            Duration::from_secs(3)
        );
    }
}
