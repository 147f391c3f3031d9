//! [`Lease`]: a held lock. Getters are synchronous reads of the state its
//! driver publishes (`Shared`); `extend`/`release` go to that driver: a
//! `Request` to its actor, or the inline cell driven in the caller's future
//! (`held.rs`). [`Granted`]: a lease on its way to its caller, released if
//! it never arrives.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use fencelock_core::{Error, FencedWrite, Inspect, Kind, LockName, Operation, Token, Ttl, Writer};
use tokio::sync::{mpsc, oneshot};

use crate::connections::Connections;
use crate::driver::Won;
use crate::held::{self, HeldCell};
use crate::lease_state::{Fate, LeaseParts, Request, Shared};

/// A held lock. Dropping it without [`Lease::release`] stops any
/// auto-renewal and leaves the key to expire by its TTL.
///
/// `Debug` never shows the token.
pub struct Lease {
    name: LockName,
    kind: Kind,
    conns: Weak<Connections>,
    token: Token,
    fence: u64,
    ttl: Duration,
    auto_renew: bool,
    shared: Arc<Shared>,
    backend: Backend,
    /// The client's runtime: loss watchers run there.
    runtime: tokio::runtime::Handle,
}

/// Who drives the lease's core `Lock`.
pub(crate) enum Backend {
    /// Its actor task (a lease that renews, or one that had to wait):
    /// extend and release are requests to it.
    Actor(mpsc::UnboundedSender<Request>),
    /// Nobody until asked (the fast path, see `inline.rs`): extend and
    /// release drive the core in the caller's future.
    Inline(HeldCell),
}

impl Lease {
    pub(crate) fn new(
        parts: LeaseParts,
        fence: u64,
        shared: Arc<Shared>,
        backend: Backend,
        runtime: tokio::runtime::Handle,
    ) -> Lease {
        let LeaseParts {
            name,
            kind,
            conns,
            token,
            ttl,
            auto_renew,
        } = parts;
        Lease {
            name,
            kind,
            conns,
            token,
            fence,
            ttl,
            auto_renew,
            shared,
            backend,
            runtime,
        }
    }

    /// The lock's name, as given to `acquire`.
    pub fn name(&self) -> &[u8] {
        self.name.as_bytes()
    }

    /// The name as the core's validated type (for messages).
    pub fn lock_name(&self) -> &LockName {
        &self.name
    }

    /// What this lease holds: the mutex, a semaphore permit, a read or a
    /// write lock.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The token stored in Redis; never printed by `Debug`.
    pub fn token(&self) -> &str {
        &self.token.0
    }

    /// The fencing token: strictly increasing across every successful
    /// acquire of this name. Pass it to the resource you protect.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The TTL the lock was taken with (auto-renewal and `extend(None)` use it).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether the lease renews itself every ttl/3.
    pub fn auto_renew(&self) -> bool {
        self.auto_renew
    }

    /// Time left before the lease must be assumed lost (clock drift already
    /// taken off); zero once lost or released.
    pub fn valid_for(&self) -> Duration {
        self.shared.valid_for()
    }

    /// Whether the lease is known lost (renewal failed or validity ran out).
    pub fn lost(&self) -> bool {
        if let Backend::Inline(cell) = &self.backend {
            // No timer runs for it: the core looks at its validity now.
            held::look(cell);
        }
        self.shared.is_lost()
    }

    /// An inline lease has no timer until someone watches for its loss.
    fn watched(&self) {
        if let Backend::Inline(cell) = &self.backend {
            held::watch(cell, &self.shared, &self.runtime);
        }
    }

    /// Resolves when the lease is lost (renewal failed or validity ran out);
    /// never resolves if it is released first.
    pub async fn lost_signal(&self) {
        self.watched();
        let mut fate = self.shared.fate();
        if fate.wait_for(|fate| *fate == Fate::Lost).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Call `callback` once, as soon as the lease is known lost (at once if
    /// it already is). Never after a release, nor once the lease is dropped
    /// (its key then expires unwatched). The callback runs on the client
    /// runtime's blocking pool, so it may block, take the GIL or call back
    /// into fencelock without stalling the runtime. Every front end's
    /// lost-lease notification (Python `on_lost`, Node `lease.signal`) is
    /// this one watcher.
    pub fn on_lost(&self, callback: impl FnOnce() + Send + 'static) {
        // Only a receiver: the watcher does not keep the lease's state alive,
        // so it ends when the lease and its actor are gone.
        self.watched();
        let mut fate = self.shared.fate();
        let runtime = self.runtime.clone();
        self.runtime.spawn(async move {
            let lost = matches!(
                fate.wait_for(|fate| *fate != Fate::Held).await.as_deref(),
                Ok(Fate::Lost)
            );
            if lost {
                let _ = runtime.spawn_blocking(callback).await;
            }
        });
    }

    /// Extend to `ttl` (default: the lease's ttl) from now; `LockLost` if gone.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<(), Error> {
        self.extend_ttl(ttl.map(Ttl::from_duration).transpose()?)
            .await
    }

    /// [`Lease::extend`] for a ttl already validated (the bindings').
    pub async fn extend_ttl(&self, ttl: Option<Ttl>) -> Result<(), Error> {
        if let Backend::Inline(cell) = &self.backend {
            let op = Operation::Extend;
            return held::request(cell, &self.runtime, op, |held| held.extend(ttl))
                .await
                .unwrap_or_else(|| Err(self.gone(op)));
        }
        let (tx, rx) = oneshot::channel();
        self.ask(Operation::Extend, Request::Extend(ttl, tx), rx)
            .await
    }

    /// Stop auto-renewal: the lease stays valid until its validity ends and
    /// is then lost (reported by [`Lease::on_lost`] and
    /// [`Lease::lost_signal`], as a failed renewal is), unless it is released
    /// first; an explicit [`Lease::extend`] still extends it, once each time.
    /// Sends no command and returns at once. Idempotent; does nothing for a
    /// lease that does not auto-renew.
    pub fn stop_renewing(&self) {
        // An inline lease never renews.
        if let (true, Backend::Actor(requests)) = (self.auto_renew, &self.backend) {
            // The actor is gone only once the client is closed: then
            // nothing renews anyway.
            let _ = requests.send(Request::StopRenewing);
        }
    }

    /// Release; `LockLost` if the lease was lost; a second call is a no-op.
    pub async fn release(&self) -> Result<(), Error> {
        if let Backend::Inline(cell) = &self.backend {
            let op = Operation::Release;
            return held::request(cell, &self.runtime, op, |held| held.release())
                .await
                .unwrap_or_else(|| Err(self.gone(op)));
        }
        let (tx, rx) = oneshot::channel();
        self.ask(Operation::Release, Request::Release(tx), rx).await
    }

    /// Ask Redis whether this lease still holds the lock (a majority of the
    /// nodes, with Redlock): one read-only round trip. `false` once
    /// released, expired or taken over; `Closed` after the client was closed.
    pub async fn held(&self) -> Result<bool, Error> {
        let conns = self
            .conns
            .upgrade()
            .ok_or_else(|| Error::closed(&self.name, Operation::Inspect))?;
        let (name, nodes) = (self.name.clone(), conns.nodes.len());
        let keys = conns.keyspace.keys_for(&name, self.kind);
        let inspect = Inspect::of_kind(name, self.kind, &keys, [&self.token], nodes);
        Ok(conns.inspect(&inspect).await?.held_by_me)
    }

    /// A fenced write: set `key` (a hash: `value` := `value`, `fence` :=
    /// this lease's fence) only if `key` has not accepted a newer fence than
    /// this lease's, so a stale holder (its lock expired or force-released,
    /// and a newer holder wrote) is refused with `StaleFence` and writes
    /// nothing. The same holder may write again (equal fences pass). Read
    /// the value back with `HGET key value`. Writes through this client's
    /// connection (one Redis, a cluster, a Sentinel primary: `key` may be in
    /// any slot); a Redlock client refuses (`InvalidArgument`): its nodes
    /// are not where data lives. `LockLost` before anything is sent if the
    /// lease is known lost or released; an empty key is `InvalidArgument`.
    pub async fn fenced_set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), Error> {
        self.fenced_write(key.as_ref(), None, value.as_ref()).await
    }

    /// [`Lease::fenced_set`] of one field of the hash `key`: `field` :=
    /// `value` if `key` has not accepted a newer fence. The fence is the
    /// key's (one resource, one lock), kept in its field `fence`, which
    /// cannot be written this way (`InvalidArgument`).
    pub async fn fenced_hset(
        &self,
        key: impl AsRef<[u8]>,
        field: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<(), Error> {
        self.fenced_write(key.as_ref(), Some(field.as_ref()), value.as_ref())
            .await
    }

    async fn fenced_write(
        &self,
        key: &[u8],
        field: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), Error> {
        let conns = self.conns.upgrade();
        let writer = Writer {
            name: &self.name,
            fence: self.fence,
            valid_for: self.valid_for(),
            nodes: conns.as_ref().map_or(1, |c| c.nodes.len()),
        };
        let write = FencedWrite::new(writer, key, field, value)?;
        let conns = conns.ok_or_else(|| Error::closed(&self.name, Operation::FencedWrite))?;
        let (name, op) = (write.name(), Operation::FencedWrite);
        let answers = conns
            .on_every_node(name, op, |_| write.command(), |r| write.read(r))
            .await?;
        // One node (FencedWrite refuses more), so one answer.
        let missing = || {
            Err(Error::redis(
                Some(&self.name),
                "no answer to the fenced write",
            ))
        };
        answers.into_iter().next().unwrap_or_else(missing)
    }

    async fn ask(
        &self,
        operation: Operation,
        request: Request,
        rx: oneshot::Receiver<Result<(), Error>>,
    ) -> Result<(), Error> {
        let Backend::Actor(requests) = &self.backend else {
            unreachable!("only an actor's lease asks")
        };
        if requests.send(request).is_err() {
            return Err(self.gone(operation));
        }
        rx.await.unwrap_or_else(|_| Err(self.gone(operation)))
    }

    /// The actor is gone (the client was closed; an inline lease: its
    /// client was closed).
    fn gone(&self, operation: Operation) -> Error {
        if self.lost() {
            Error::LockLost {
                name: self.name.clone(),
            }
        } else {
            Error::closed(&self.name, operation)
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("token", &"<redacted>")
            .field("fence", &self.fence)
            .field("ttl", &self.ttl)
            .field("valid_for", &self.valid_for())
            .field("lost", &self.lost())
            .field("auto_renew", &self.auto_renew)
            .finish()
    }
}

/// A lease won for a caller that has not taken it yet (see
/// `Acquire::granted`). Dropping it releases the lock in the background:
/// the caller went away (a cancelled task or future, an aborted signal, a
/// value a front end could not hand over), so nothing is left held until
/// its TTL. [`Granted::claim`] hands the lease over; from then on dropping
/// the [`Lease`] leaves the key to expire, as documented there.
///
/// This is fencelock's one abandon path: an acquire future dropped before
/// the grant, a grant nobody received, and a `Granted` dropped all end in
/// the lease actor's compensating release.
#[derive(Debug)]
#[must_use = "a Granted dropped unclaimed releases the lock"]
pub struct Granted(Lease);

impl Granted {
    pub(crate) fn new(lease: Lease) -> Self {
        Granted(lease)
    }

    /// The lease an actor won (see `driver::Won`).
    pub(crate) fn from_actor(won: Won) -> Self {
        let Won {
            parts,
            fence,
            shared,
            requests,
            runtime,
        } = won;
        Granted(Lease::new(
            parts,
            fence,
            shared,
            Backend::Actor(requests),
            runtime,
        ))
    }

    /// The lease, to read before deciding to keep it.
    pub fn lease(&self) -> &Lease {
        &self.0
    }

    /// Take the lease: the caller has it now.
    pub fn claim(self) -> Lease {
        self.0.shared.claim();
        self.0
    }
}
