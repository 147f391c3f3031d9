//! What a lease shares with whoever drives its core `Lock` (its actor in
//! `driver.rs`, or its inline cell in `held.rs`): the state its getters
//! read ([`Shared`]), the requests it sends an actor ([`Request`]), and the
//! parts known before the lock is won ([`LeaseParts`]). Below both drivers
//! and the `Lease` handle, so each of them builds on it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use fencelock_core::{Error, Kind, Lock, LockName, Token, Ttl};
use tokio::sync::{oneshot, watch};

use crate::clock;
use crate::connections::Connections;

/// How a lease ended, as far as its holder can learn: the one loss watcher
/// (`Lease::on_lost`, `Lease::lost_signal`) waits on this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    Held,
    /// Renewal, extend or release found it gone, or its validity ran out.
    Lost,
    /// Released (or the release failed) before it was lost: it never will be.
    Released,
}

/// What the lease's getters read without asking its driver; written by the
/// driver (the actor, or the inline cell).
#[derive(Debug)]
pub(crate) struct Shared {
    /// Validity deadline as nanoseconds since the epoch; 0 = none/released.
    valid_until_ns: AtomicU64,
    lost: AtomicBool,
    /// Released (or the release failed): nothing is valid any more.
    over: AtomicBool,
    /// The acquire caller took the lease (see `Granted`). A lease dropped
    /// before that is released at once instead of being left to expire.
    claimed: AtomicBool,
    /// An inline lease's validity timer runs (see `held::watch`).
    watched: AtomicBool,
    /// Made by the first loss watcher: most leases never get one, and a
    /// watch channel costs a few hundred bytes per lease.
    fate: Mutex<Option<watch::Sender<Fate>>>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Shared {
            valid_until_ns: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            over: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            fate: Mutex::new(None),
        }
    }

    pub(crate) fn valid_for(&self) -> Duration {
        if self.is_lost() || self.over.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let until = self.valid_until_ns.load(Ordering::Acquire);
        let now = clock::epoch().elapsed().as_nanos() as u64;
        Duration::from_nanos(until.saturating_sub(now))
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    pub(crate) fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// The acquire caller took the lease.
    pub(crate) fn claim(&self) {
        self.claimed.store(true, Ordering::Release);
    }

    /// Follow the lease's fate (the loss watchers).
    pub(crate) fn fate(&self) -> watch::Receiver<Fate> {
        let mut fate = self.fate.lock().unwrap_or_else(|e| e.into_inner());
        // Under the lock: a mark made before it is read here, one made
        // after it is sent to this channel.
        let current = if self.is_lost() {
            Fate::Lost
        } else if self.over.load(Ordering::Acquire) {
            Fate::Released
        } else {
            Fate::Held
        };
        fate.get_or_insert_with(|| watch::Sender::new(current))
            .subscribe()
    }

    /// Tell the loss watchers, if any.
    fn tell(&self, change: impl FnOnce(&watch::Sender<Fate>)) {
        let fate = self.fate.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(fate) = fate.as_ref() {
            change(fate);
        }
    }

    /// `true` the first time only: whoever gets it starts the timer.
    pub(crate) fn start_watching(&self) -> bool {
        !self.watched.swap(true, Ordering::AcqRel)
    }

    /// Copy what the getters show from the core.
    pub(crate) fn publish(&self, lock: &Lock) {
        let until = lock.valid_until().map(clock::nanos).unwrap_or(0);
        self.valid_until_ns.store(until, Ordering::Release);
        // The core owns the lost flag; the lease's getters read this copy.
        if lock.is_lost() && !self.is_lost() {
            self.mark_lost();
        }
    }

    /// Lost: marked before anything reports it, so whatever reports the
    /// loss (a log handler, a callback) finds the lease already lost.
    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.tell(|fate| {
            fate.send_replace(Fate::Lost);
        });
    }

    /// Released (whatever the outcome); a lost lease stays lost.
    pub(crate) fn mark_over(&self) {
        self.over.store(true, Ordering::Release);
        self.tell(|fate| {
            fate.send_if_modified(|fate| {
                let held = *fate == Fate::Held;
                if held {
                    *fate = Fate::Released;
                }
                held
            });
        });
    }
}

/// What a lease asks its actor to do.
pub(crate) enum Request {
    Extend(Option<Ttl>, oneshot::Sender<Result<(), Error>>),
    Release(oneshot::Sender<Result<(), Error>>),
    /// No answer: the core decides what is left to stop.
    StopRenewing,
}

/// The parts of a lease known before the lock is won.
pub(crate) struct LeaseParts {
    pub name: LockName,
    pub kind: Kind,
    /// Weak: a lease does not keep a closed client's connections open.
    pub conns: Weak<Connections>,
    pub token: Token,
    pub ttl: Duration,
    pub auto_renew: bool,
}
