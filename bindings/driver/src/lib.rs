//! fencelock: Redis distributed locks with fencing tokens, Redlock and
//! auto-renewal — the Rust API, and the one IO driver behind fencelock's
//! Python and Node packages.
//!
//! The README's quick start (kept identical; compiled as a doctest):
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{Client, Error, LockOptions};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Error> {
//!     // One URL = one Redis; a Vec of URLs = Redlock over independent nodes.
//!     let client = Client::connect("redis://127.0.0.1:6379/0").await?;
//!
//!     let options = LockOptions::new(Duration::from_secs(10)) // TTL
//!         .wait(Duration::from_secs(5)) // default: wait forever; ZERO = try once
//!         .auto_renew(true); // extend every ttl/3 until released or lost
//!     let lease = client.acquire("invoice:42", &options).await?; // Err(NotAcquired) after 5 s
//!
//!     // Hand the fencing token to the resource you protect; it rejects stale ones.
//!     println!("fence {} valid for {:?}", lease.fence(), lease.valid_for());
//!     tokio::select! {
//!         _ = lease.lost_signal() => eprintln!("lease lost: stop working"),
//!         _ = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
//!     }
//!     lease.extend(Some(Duration::from_secs(30))).await?; // Err(LockLost) if gone
//!     lease.release().await?; // Err(LockLost) if it was lost; twice is a no-op
//!
//!     if let Some(lease) = client.try_acquire("invoice:42", &LockOptions::new(Duration::from_secs(10))).await? {
//!         lease.release().await?;
//!     }
//!     client.close().await;
//!     Ok(())
//! }
//! ```
//!
//! # Renewal controls
//!
//! The README's Rust renewal example (kept identical; compiled as a doctest):
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{Client, Error, LockOptions};
//!
//! async fn renewal(client: &Client) -> Result<(), Error> {
//!     // Renewed every ttl/3, for at most max_hold in total: then the lease
//!     // runs out at its validity end and is lost (about max_hold + ttl).
//!     let options = LockOptions::new(Duration::from_secs(10))
//!         .auto_renew(true)
//!         .max_hold(Duration::from_secs(60));
//!     let lease = client.acquire("report:daily", &options).await?;
//!     lease.on_lost(|| eprintln!("held for max_hold: stop working"));
//!
//!     // Stop renewing at once (no command is sent); an explicit extend still
//!     // extends it once. Lost when its validity ends, unless released first.
//!     lease.stop_renewing();
//!     lease.extend(Some(Duration::from_secs(5))).await?;
//!     lease.release().await?;
//!     Ok(())
//! }
//! ```
//!
//! # Fenced writes
//!
//! The README's Rust fenced-write example (kept identical; compiled as a
//! doctest, run against Redis in `tests/fenced.rs`):
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{Client, Error, LockOptions};
//!
//! async fn settle(client: &Client) -> Result<(), Error> {
//!     let lease = client.acquire("invoice:42", &LockOptions::new(Duration::from_secs(10))).await?;
//!     // HSET invoice:42:total value 120 fence <lease.fence()>, unless the key
//!     // has accepted a newer fence: then StaleFence, and nothing is written.
//!     match lease.fenced_set("invoice:42:total", "120").await {
//!         Err(Error::StaleFence { accepted, .. }) => eprintln!("fence {accepted} wrote since: stop"),
//!         other => other?,
//!     }
//!     lease.fenced_hset("invoice:42:total", "paid_by", "me").await?;
//!     lease.release().await
//! }
//! ```
//!
//! # Semaphore and read-write lock
//!
//! The README's Rust example (kept identical; compiled as a doctest, run
//! against Redis in `tests/semaphore.rs` and `tests/rw_lock.rs`):
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{Client, Error, LockOptions};
//!
//! async fn primitives(client: &Client) -> Result<(), Error> {
//!     let options = LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5));
//!     // Up to 3 leases at once; every client of it passes the same count.
//!     let pool = client.semaphore("db-pool", 3)?;
//!     let permit = pool.acquire(&options).await?; // its own fence, renewal, loss
//!     println!("permit fence {}", permit.fence());
//!     permit.release().await?;
//!
//!     // Many readers or one writer; a waiting writer keeps new readers out.
//!     let doc = client.rw_lock("doc:7")?;
//!     let reader = doc.read(&options).await?;
//!     assert!(doc.try_write(&options).await?.is_none());
//!     reader.release().await?;
//!     let writer = doc.write(&options).await?;
//!     writer.release().await?;
//!     Ok(())
//! }
//! ```
//!
//! # Operations: listing, watching, metrics
//!
//! The README's Rust operations example (kept identical; compiled as a
//! doctest; run against Redis in `tests/list_watch.rs` and `tests/metrics.rs`):
//!
//! ```no_run
//! use fencelock::{Client, Error};
//!
//! async fn operations(client: &Client) -> Result<(), Error> {
//!     // The held locks matching a pattern, in name order (SCAN, never KEYS).
//!     let mut locks = client.list("invoice:*")?;
//!     while let Some(lock) = locks.next().await? {
//!         println!("{} fence {:?} ttl {:?}", lock.name, lock.info.fence, lock.info.ttl);
//!     }
//!     // The lock now, then each change of holder or fence.
//!     let mut changes = client.watch("invoice:42")?;
//!     let now = changes.next().await?;
//!     println!("held {} fence {:?}", now.held, now.fence);
//!
//!     // TRACE events on target `fencelock::metrics` reach any `tracing`
//!     // subscriber; the aggregate is for exporters.
//!     fencelock::metrics::enable();
//!     for family in fencelock::metrics::snapshot() {
//!         println!("{} {:?}", family.name, family.values);
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Several locks at once
//!
//! The README's Rust multi-resource example (kept identical; compiled as a
//! doctest; run against Redis in `tests/many.rs`):
//!
//! ```no_run
//! use std::time::Duration;
//! use fencelock::{Client, Error, LockOptions};
//!
//! async fn transfer(client: &Client) -> Result<(), Error> {
//!     let options = LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5));
//!     // Both accounts or neither; one round trip on a single Redis.
//!     let group = client.acquire_many(["account:1", "account:2"], &options).await?;
//!     for lease in group.leases() {
//!         println!("{:?} fence {}", lease.lock_name(), lease.fence()); // ordinary leases
//!     }
//!     group.release().await?; // every lease; LockLost if one was lost
//!     assert!(client.try_acquire_many(["account:1"], &options).await?.is_some());
//!     Ok(())
//! }
//! ```
//!
//! # How it works
//!
//! All lock logic lives in the sans-IO core (`fencelock-core`); this crate
//! only moves its commands to Redis and the replies back:
//!
//! - one multiplexed, self-reconnecting connection per node, shared by every
//!   clone of a [`Client`] and every [`Lease`]; concurrent commands are
//!   pipelined on it. Scripts run with `EVALSHA`, reloaded transparently
//!   after `NOSCRIPT` (`SCRIPT FLUSH`, restart, failover). It speaks RESP3
//!   (unless the URL sets `?protocol=`), so a connection the server closes
//!   (`CLIENT KILL`, restart) is known dead as soon as it is noticed. A
//!   command that provably was not sent (no connection could be made, or
//!   the last one is known dead) goes out on a fresh connection, retried
//!   with a short backoff within the call's bounds; one caught on a dying
//!   connection may have run, so it is never resent (the core compensates);
//! - one pub/sub connection per node (RESP3 push), opened on the first wait
//!   and shared through refcounted per-channel subscriptions: a release wakes
//!   the waiters at once; a timer at the holder's remaining TTL covers the
//!   rest;
//! - one small task per acquire/lease drives the core: waiting, auto-renewal
//!   every ttl/3, the validity deadline, and the compensating release when
//!   an acquire future is dropped after its request may have reached Redis;
//! - waiters of one client for one name queue locally in FIFO order behind a
//!   single remote attempt.
//!
//! An uncontended acquire is one round trip (one script), a release one.
//!
//! # Redlock
//!
//! `Client::connect([url1, url2, url3, url4, url5])` talks to independent
//! nodes: `connect` succeeds when a majority is reachable, each acquire needs
//! a majority with positive validity and otherwise releases everywhere
//! (`NotAcquired` when the wait is over, also when a majority of nodes is
//! unreachable: the node errors go to the `tracing` log), and extend needs a
//! majority too.
//!
//! # Errors
//!
//! [`Error`] (from the core): `InvalidArgument` (a bad value or a wrong-state
//! call, raised before any Redis call), `Closed` (a call on a closed client,
//! or an acquire the close cut short; [`Operation`] says which),
//! `NotAcquired`, `LockLost`, `Redis`. Messages name the lock and the cause,
//! never a token or a password.

mod client;
mod clock;
mod cluster;
mod config;
mod connection;
mod connections;
mod deployment;
mod driver;
mod held;
mod in_flight;
mod inline;
mod lease;
mod lease_state;
mod link;
mod list;
mod many;
pub mod metrics;
mod notify;
mod primitives;
mod queue;
mod replicas;
mod scan;
mod sentinel;
mod submissions;
mod tls;
mod topology;
mod url;
mod watch;

use std::time::Duration;

pub use client::{Acquire, Client, Granting, MaybeGranting, TryAcquire, TryGranting};
pub use config::{ClientConfig, ClientSettings};
/// The core's validated values and errors: everything a front end needs, so
/// the bindings depend on this crate alone.
pub use fencelock_core::{
    replica_count, replica_count_int, Error, FenceGrace, FencedUpdate, KeySpace, Kind, LockInfo,
    LockName, MaxHold, NamePattern, NotAcquiredReason, Operation, Permits, Placeholders, Timeout,
    Ttl, Wait, FENCE_FIELD, MAX_NAME_BYTES, MAX_TTL_MS, MIN_TTL_MS, VALUE_FIELD,
};
pub use lease::{Granted, Lease};
pub use list::{ListedLock, LockList};
pub use many::{GrantedGroup, LockGroup};
pub use primitives::{RwLock, Semaphore};
pub use submissions::{Submissions, Submitted};
pub use tls::{Pem, TlsOptions};
pub use topology::Topology;
pub use watch::{LockWatch, DEFAULT_WATCH_INTERVAL};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A current-thread tokio runtime on a thread of its own, named `name`:
/// its handle. For a front end whose calls all come from one event-loop
/// thread (Node's JS thread, an asyncio loop): each call crosses to this
/// thread and back, and a multi-thread runtime's second worker only adds
/// wake-ups ([`Submissions`] hands it calls in batches). The thread runs for
/// the life of the process and never keeps it alive.
pub fn runtime_thread(name: &str) -> tokio::runtime::Handle {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("fencelock: cannot start the tokio runtime");
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .expect("fencelock: cannot start the runtime thread");
    handle
}

/// Check a client's URLs without connecting, as [`ClientConfig::new`]
/// does: `InvalidArgument` (passwords redacted) if there are none, one is
/// malformed, or a node is listed twice.
pub fn check_urls(urls: impl IntoUrls) -> Result<()> {
    url::parse_all(&urls.into_urls()).map(|_| ())
}

/// Connection settings; `Default` is what most users want.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Key prefix (default `fencelock:`); must not contain braces.
    pub prefix: String,
    /// Bound on establishing a connection (TCP, TLS, AUTH, SELECT).
    pub connect_timeout: Duration,
    /// Bound on each command's reply; a timeout counts as an unknown outcome.
    pub response_timeout: Duration,
    /// What the URLs are: one node / Redlock nodes (default), cluster
    /// seeds, or Sentinels (see the README's "Topologies").
    pub topology: Topology,
    /// Replicas that must acknowledge (`WAIT`) every acquire, extend and
    /// renewal before it counts; 0 (default) waits for none. Too few: the
    /// lock is released and the call fails (`NotAcquired` with reason
    /// "replicas"; `LockLost` for an extend or renewal). `WAIT` waits at
    /// most half the response timeout.
    pub replicas: u32,
    /// How long a lock's fence key outlives the lock (default 60 s): after
    /// the last acquire/extend/renewal plus this grace, a name leaves nothing
    /// in Redis. Fences stay increasing across server clocks that disagree
    /// (or step back) by less than the grace. Fractions of a ms round up.
    pub fence_grace: Duration,
    /// TLS for `rediss://` URLs (default: verify against the system store).
    pub tls: TlsOptions,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            prefix: fencelock_core::keys::DEFAULT_PREFIX.to_owned(),
            connect_timeout: fencelock_core::Timeout::DEFAULT.as_duration(),
            response_timeout: fencelock_core::Timeout::DEFAULT.as_duration(),
            topology: Topology::Standalone,
            replicas: 0,
            fence_grace: fencelock_core::FenceGrace::DEFAULT.as_duration(),
            tls: TlsOptions::default(),
        }
    }
}

/// How to take one lock. The ttl is converted to the core's [`Ttl`] once,
/// here; a bad one is refused by the acquire that uses these options.
#[derive(Clone, Debug)]
pub struct LockOptions {
    ttl: Result<Ttl, Error>,
    wait: Wait,
    auto_renew: bool,
    max_hold: Result<Option<MaxHold>, Error>,
    fair: bool,
}

impl LockOptions {
    /// `ttl`: how long the lock lives without renewal (fractions of a ms
    /// round up). Waits forever by default.
    pub fn new(ttl: Duration) -> Self {
        Self::with_ttl_result(Ttl::from_duration(ttl))
    }
    /// [`LockOptions::new`] for a ttl already validated (the bindings').
    pub fn with_ttl(ttl: Ttl) -> Self {
        Self::with_ttl_result(Ok(ttl))
    }
    fn with_ttl_result(ttl: Result<Ttl, Error>) -> Self {
        LockOptions {
            ttl,
            wait: Wait::Forever,
            auto_renew: false,
            max_hold: Ok(None),
            fair: false,
        }
    }
    /// Wait at most `wait`; `Duration::ZERO` tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Wait::Bounded(wait);
        self
    }
    pub fn wait_policy(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }
    /// Extend every ttl/3 in the background until released or lost.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }
    /// With auto-renewal: stop renewing once the lease has been held for
    /// `max_hold` in total (from the acquire); it then runs out at the end
    /// of its validity and is lost, as if a renewal had failed (so about
    /// `max_hold + ttl` after the acquire). Without auto-renewal it changes
    /// nothing. Fractions of a ms round up; zero or more than 2^40 ms is
    /// refused by the acquire that uses these options.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = MaxHold::from_duration(max_hold).map(Some);
        self
    }
    /// [`LockOptions::max_hold`] for a value already validated (the bindings').
    pub fn with_max_hold(mut self, max_hold: Option<MaxHold>) -> Self {
        self.max_hold = Ok(max_hold);
        self
    }
    /// Fair across processes: the mutex's waiters are served in arrival
    /// order, with every other client's fair waiters, through a line in
    /// Redis whose places expire a few seconds after their waiter's last
    /// attempt (a crashed waiter holds nobody up for long). Still one round
    /// trip when the lock is free and nobody waits. The same lock as
    /// without it (its key, token and fence): a plain acquire of the name
    /// still excludes a fair holder, but does not stand in the line and
    /// may take the lock while it is free ahead of the fair waiters. A fair
    /// try-once never jumps the line. Semaphores and write locks always
    /// serve their waiters in arrival order; for them this changes nothing.
    pub fn fair(mut self, fair: bool) -> Self {
        self.fair = fair;
        self
    }
    pub fn is_fair(&self) -> bool {
        self.fair
    }
    /// The max hold (`None`: renew until released or lost), or why it was refused.
    pub fn max_hold_value(&self) -> Result<Option<MaxHold>, Error> {
        self.max_hold.clone()
    }
    /// The ttl, or why it was refused.
    pub fn ttl(&self) -> Result<Ttl, Error> {
        self.ttl.clone()
    }
    pub fn wait_value(&self) -> Wait {
        self.wait
    }
    pub fn is_auto_renew(&self) -> bool {
        self.auto_renew
    }
}

/// URLs accepted by [`Client::connect`]: one (a single Redis) or several
/// independent nodes (Redlock).
pub trait IntoUrls {
    fn into_urls(self) -> Vec<String>;
}
impl IntoUrls for &str {
    fn into_urls(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}
impl IntoUrls for String {
    fn into_urls(self) -> Vec<String> {
        vec![self]
    }
}
impl IntoUrls for &String {
    fn into_urls(self) -> Vec<String> {
        vec![self.clone()]
    }
}
impl<S: Into<String>> IntoUrls for Vec<S> {
    fn into_urls(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}
impl<S: Into<String> + Clone> IntoUrls for &[S] {
    fn into_urls(self) -> Vec<String> {
        self.iter().cloned().map(Into::into).collect()
    }
}
impl<S: Into<String> + Clone, const N: usize> IntoUrls for [S; N] {
    fn into_urls(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}

#[cfg(test)]
mod tests {
    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::Client>();
        assert_send_sync::<super::Lease>();
        assert_send_sync::<super::LockOptions>();
        assert_send_sync::<super::Error>();
    }
}
