//! [`Semaphore`] and [`RwLock`]: named handles on a client whose acquires
//! are leases of another [`Kind`] — a semaphore permit, a read lock, a
//! write lock. Each is a [`Lease`] like the mutex's (fence, extend, release,
//! auto-renewal, loss, the compensating release of a cancelled acquire),
//! driven by the same core state machine and actor; only the scripts and
//! keys differ, and they skip the client's local line (several leases of
//! one client may hold at once; the server's fair line orders waiters).

use std::fmt;

use fencelock_core::{Error, Kind, LockInfo, LockName, Permits};

use crate::client::{Acquire, Client, TryAcquire};
use crate::LockOptions;

#[cfg(doc)]
use crate::Lease;

impl Client {
    /// A counting semaphore of `permits` permits named `name` (its keys
    /// live beside a mutex of the same name, never shared with it). Every
    /// client of one semaphore should pass the same `permits`.
    /// `InvalidArgument` for a bad name or a count outside 1 to 1,000,000.
    pub fn semaphore(&self, name: impl AsRef<[u8]>, permits: u32) -> Result<Semaphore, Error> {
        Ok(self.semaphore_named(LockName::new(name)?, Permits::new(permits.into())?))
    }

    /// [`Client::semaphore`] for validated values (the bindings').
    pub fn semaphore_named(&self, name: LockName, permits: Permits) -> Semaphore {
        Semaphore {
            client: self.clone(),
            name,
            kind: Kind::Semaphore(permits),
        }
    }

    /// A read-write lock named `name`: many readers or one writer, writers
    /// preferred. `InvalidArgument` for a bad name.
    pub fn rw_lock(&self, name: impl AsRef<[u8]>) -> Result<RwLock, Error> {
        Ok(self.rw_lock_named(LockName::new(name)?))
    }

    /// [`Client::rw_lock`] for a validated name (the bindings').
    pub fn rw_lock_named(&self, name: LockName) -> RwLock {
        RwLock {
            client: self.clone(),
            name,
        }
    }
}

/// A counting semaphore: up to `permits` leases at once, handed out in
/// arrival order across every client (a fair line on the server whose
/// entries expire with their waiter). Each permit is a [`Lease`] with its
/// own fence. Cheap to clone.
///
/// With Redlock a permit needs more than `nodes × permits / (permits + 1)`
/// nodes (all three of three for two or more permits): a bare majority
/// would let `permits + 1` holders fit.
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    name: LockName,
    kind: Kind,
}

impl Semaphore {
    pub fn name(&self) -> &LockName {
        &self.name
    }

    pub fn permits(&self) -> u32 {
        match self.kind {
            Kind::Semaphore(permits) => permits.get(),
            _ => unreachable!("a semaphore's kind"),
        }
    }

    /// Take a permit, waiting as `options` allow (`NotAcquired` when the
    /// wait runs out). Dropping the future leaves no permit behind and
    /// takes its place out of the line.
    pub fn acquire(&self, options: &LockOptions) -> Acquire {
        self.client
            .acquire_kind(self.kind, Ok(self.name.clone()), options, false)
    }

    /// One attempt: `Ok(None)` if no permit is free for it now (it does
    /// not wait in line, nor jump it).
    pub fn try_acquire(&self, options: &LockOptions) -> TryAcquire {
        TryAcquire(
            self.client
                .acquire_kind(self.kind, Ok(self.name.clone()), options, true),
        )
    }

    /// What Redis says now (read only): `held` while any permit is taken,
    /// `ttl` until the last one expires, the last fence issued, and whether
    /// one of this client's leases holds a permit.
    pub async fn inspect(&self) -> Result<LockInfo, Error> {
        self.client.inspect_as(self.kind, self.name.clone()).await
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .field("permits", &self.permits())
            .finish()
    }
}

/// A read-write lock: any number of read leases while no writer holds or
/// waits, or one write lease. Writers are served in arrival order and a
/// waiting writer holds new readers off, so writers never starve. Every
/// read and write lease has its own fence (one counter for both). Cheap to
/// clone.
#[derive(Clone)]
pub struct RwLock {
    client: Client,
    name: LockName,
}

impl RwLock {
    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// A read lease, waiting as `options` allow.
    pub fn read(&self, options: &LockOptions) -> Acquire {
        self.client
            .acquire_kind(Kind::Read, Ok(self.name.clone()), options, false)
    }

    /// One attempt at a read lease: `Ok(None)` if a writer holds or waits.
    pub fn try_read(&self, options: &LockOptions) -> TryAcquire {
        TryAcquire(
            self.client
                .acquire_kind(Kind::Read, Ok(self.name.clone()), options, true),
        )
    }

    /// The write lease, waiting as `options` allow (in line with the
    /// other writers, for the readers to leave).
    pub fn write(&self, options: &LockOptions) -> Acquire {
        self.client
            .acquire_kind(Kind::Write, Ok(self.name.clone()), options, false)
    }

    /// One attempt at the write lease: `Ok(None)` if anyone holds it or a
    /// writer waits.
    pub fn try_write(&self, options: &LockOptions) -> TryAcquire {
        TryAcquire(
            self.client
                .acquire_kind(Kind::Write, Ok(self.name.clone()), options, true),
        )
    }
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock").field("name", &self.name).finish()
    }
}
