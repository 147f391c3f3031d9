//! [`Client`]: the connections to one Redis or N Redlock nodes, shared by
//! every clone and every lease, and the entry points `acquire` /
//! `try_acquire`.

use std::fmt;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use fencelock_core::{
    Error, FenceGrace, ForceRelease, Handoff, Inspect, KeySpace, Kind, LockConfig, LockInfo,
    LockName, Operation, RetryPolicy, Successor, Token, Wait,
};
use tokio::sync::{oneshot, watch};

use crate::connection::{Connected, Node};
use crate::connections::Connections;
use crate::driver::{self, Answer, Job};
use crate::lease::{Granted, Lease};
use crate::notify::Notifier;
use crate::queue::{NameQueues, Place};
use crate::{ClientConfig, ClientOptions, IntoUrls, LockOptions};

/// A connection to one Redis or to N Redlock nodes. Cheap to clone; all
/// clones and all leases share one multiplexed connection (plus one pub/sub
/// connection, opened on the first wait) per node.
///
/// With several URLs (Redlock), `connect` succeeds when a majority of the
/// nodes is reachable (the others are reconnected to in the background), and
/// every acquire and extend then needs a majority. A wrong password or a bad
/// database index on any node is an error at once.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    conns: RwLock<Option<Arc<Connections>>>,
    /// The same layout `Connections` has (one value, shared): this handle
    /// outlives `close`, for [`Client::keyspace`].
    keyspace: Arc<KeySpace>,
    fence_grace: FenceGrace,
    queues: Arc<NameQueues>,
    handle: tokio::runtime::Handle,
    labels: Vec<String>,
    /// A Redis Cluster: `acquire_many` takes one group per slot.
    cluster: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("nodes", &self.inner.labels)
            .field(
                "prefix",
                &String::from_utf8_lossy(self.inner.keyspace.prefix()),
            )
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Client {
    /// Connect with the default [`ClientOptions`].
    pub async fn connect(urls: impl IntoUrls) -> Result<Client, Error> {
        Self::connect_with(urls, ClientOptions::default()).await
    }

    /// Connect to one URL (a single Redis) or several independent nodes
    /// (Redlock). Fails fast: within `connect_timeout` when a server is down.
    /// Must be called inside a tokio runtime; the client keeps that
    /// runtime's handle and runs its background work there (auto-renewal,
    /// validity deadlines, compensating releases), so later calls may come
    /// from any thread or runtime (`block_on` included). Use a multi-thread
    /// runtime, or keep a current-thread one running: its background work
    /// only progresses while that runtime is driven.
    pub async fn connect_with(
        urls: impl IntoUrls,
        options: ClientOptions,
    ) -> Result<Client, Error> {
        Self::connect_config(ClientConfig::new(urls, options)?).await
    }

    /// [`Client::connect_with`] for a [`ClientConfig`] checked earlier:
    /// nothing is validated again.
    pub async fn connect_config(config: ClientConfig) -> Result<Client, Error> {
        let (parsed, tls) = (&config.urls, &config.tls);
        tls.warn_if_unverified();
        if parsed.iter().any(|u| u.tls) {
            ensure_crypto_provider();
        }
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::invalid("Client::connect must be called inside a tokio runtime"))?;
        // Make sure the clock's epoch predates every lock.
        let _ = crate::clock::epoch();
        if config.topology != crate::Topology::Standalone {
            let (node, notifier) =
                crate::deployment::connect(parsed, &config, tls, &handle).await?;
            let labels = vec![node.label().to_owned()];
            return Ok(Self::assemble(
                vec![node],
                notifier,
                handle,
                labels,
                &config,
            ));
        }

        let clients = parsed
            .iter()
            .map(|url| crate::connection::open(url, false, tls))
            .collect::<Result<Vec<_>, _>>()?;
        let attempts = parsed.iter().zip(clients).map(|(url, client)| {
            Node::connect(url, client, config.connect_timeout, config.response_timeout)
        });
        let results = futures_util::future::join_all(attempts).await;
        let total = results.len();
        let quorum = total / 2 + 1;
        let mut nodes = Vec::with_capacity(total);
        let mut down = Vec::new();
        for result in results {
            match result? {
                Connected::Up(node) => nodes.push(node),
                Connected::Down(node, error) => {
                    tracing::warn!(node = %node.label(), %error, "Redis node unreachable at connect");
                    down.push(error);
                    nodes.push(node);
                }
            }
        }
        if total - down.len() < quorum {
            let reasons: Vec<String> = down.iter().map(redis_message).collect();
            return Err(if total == 1 {
                down.pop().expect("one node, down")
            } else {
                Error::redis(
                    None,
                    format!(
                        "only {} of {total} Redis nodes reachable, {quorum} needed: {}",
                        total - down.len(),
                        reasons.join("; ")
                    ),
                )
            });
        }
        let notifier = Arc::new(Notifier::new(
            parsed,
            config.connect_timeout,
            config.response_timeout,
            tls,
            &handle,
        )?);
        let labels: Vec<String> = parsed.iter().map(|u| u.redacted.clone()).collect();
        Ok(Self::assemble(nodes, notifier, handle, labels, &config))
    }

    fn assemble(
        nodes: Vec<Node>,
        notifier: Arc<Notifier>,
        handle: tokio::runtime::Handle,
        labels: Vec<String>,
        config: &ClientConfig,
    ) -> Client {
        tracing::debug!(nodes = ?labels, "fencelock client connected");
        let keyspace = Arc::new(config.keyspace.clone());
        Client {
            inner: Arc::new(Inner {
                conns: RwLock::new(Some(Arc::new(Connections {
                    nodes,
                    notifier,
                    closed: watch::Sender::new(false),
                    replicas: (config.replicas, config.response_timeout / 2),
                    not_published_logged: AtomicBool::new(false),
                    actors: tokio_util::task::TaskTracker::new(),
                    owned: Default::default(),
                    keyspace: keyspace.clone(),
                    runtime: handle.clone(),
                }))),
                keyspace,
                fence_grace: config.fence_grace,
                queues: Arc::new(NameQueues::default()),
                handle,
                labels,
                cluster: config.topology == crate::Topology::Cluster,
            }),
        }
    }

    /// How many Redis nodes this client talks to (1, or N for Redlock).
    pub fn node_count(&self) -> usize {
        self.inner.labels.len()
    }

    /// The node URLs, passwords redacted.
    pub fn nodes(&self) -> &[String] {
        &self.inner.labels
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.inner
            .conns
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Acquire `name`, waiting as `options` allow: `NotAcquired` when the wait
    /// runs out. Dropping the future leaves no lock behind.
    ///
    /// The call itself (before the future is awaited) validates the
    /// arguments and takes the acquire's place in this client's local line
    /// for the name, so waiters are served in the order `acquire` was called.
    pub fn acquire(&self, name: impl AsRef<[u8]>, options: &LockOptions) -> Acquire {
        Acquire {
            state: self
                .start(LockName::new(name), options, options.wait)
                .map_err(Some),
        }
    }

    /// [`Client::acquire`] for a name validated already (the bindings').
    pub fn acquire_named(&self, name: LockName, options: &LockOptions) -> Acquire {
        Acquire {
            state: self.start(Ok(name), options, options.wait).map_err(Some),
        }
    }

    /// One attempt: `Ok(None)` if someone else holds the lock.
    pub fn try_acquire(&self, name: impl AsRef<[u8]>, options: &LockOptions) -> TryAcquire {
        TryAcquire(Acquire {
            state: self
                .start(LockName::new(name), options, Wait::TRY_ONCE)
                .map_err(Some),
        })
    }

    /// [`Client::try_acquire`] for a name validated already (the bindings').
    pub fn try_acquire_named(&self, name: LockName, options: &LockOptions) -> TryAcquire {
        TryAcquire(Acquire {
            state: self.start(Ok(name), options, Wait::TRY_ONCE).map_err(Some),
        })
    }

    /// [`Client::acquire_named`] or, if `try_once`, [`Client::try_acquire_named`],
    /// as one future type: for the bindings, whose callers choose at run time.
    pub fn acquire_granted(
        &self,
        name: LockName,
        options: &LockOptions,
        try_once: bool,
    ) -> MaybeGranting {
        let wait = if try_once {
            Wait::TRY_ONCE
        } else {
            options.wait
        };
        MaybeGranting {
            acquire: Acquire {
                state: self.start(Ok(name), options, wait).map_err(Some),
            },
            try_once,
        }
    }

    /// [`Client::acquire_granted`] for a lease of `kind`: a semaphore
    /// permit, a read or a write lock (the bindings' entry; Rust callers
    /// use [`Client::semaphore`] and [`Client::rw_lock`]).
    pub fn acquire_as(
        &self,
        kind: Kind,
        name: LockName,
        options: &LockOptions,
        try_once: bool,
    ) -> MaybeGranting {
        MaybeGranting {
            acquire: self.acquire_kind(kind, Ok(name), options, try_once),
            try_once,
        }
    }

    /// An acquire of a lease of `kind`, waiting as `options` say unless
    /// `try_once`.
    pub(crate) fn acquire_kind(
        &self,
        kind: Kind,
        name: Result<LockName, Error>,
        options: &LockOptions,
        try_once: bool,
    ) -> Acquire {
        let wait = if try_once {
            Wait::TRY_ONCE
        } else {
            options.wait
        };
        Acquire {
            state: self.start_as(kind, name, options, wait).map_err(Some),
        }
    }

    /// This client's connections; `Closed` (for `operation` on `name`) once
    /// it is closed.
    pub(crate) fn connections(
        &self,
        name: &LockName,
        operation: Operation,
    ) -> Result<Arc<Connections>, Error> {
        let conns = self.inner.conns.read().unwrap_or_else(|e| e.into_inner());
        conns.clone().ok_or_else(|| Error::closed(name, operation))
    }

    /// Take the validated arguments (a refused name or ttl is the error),
    /// then hand the work to a new lease actor; the returned future only
    /// waits for its answer (and, when dropped, tells the actor to cancel).
    fn start(
        &self,
        name: Result<LockName, Error>,
        options: &LockOptions,
        wait: Wait,
    ) -> Result<Acquiring, Error> {
        self.start_as(Kind::Mutex, name, options, wait)
    }

    /// [`Client::start`] for a lease of `kind` (a semaphore permit, a read
    /// or a write lock: see `primitives.rs`).
    fn start_as(
        &self,
        kind: Kind,
        name: Result<LockName, Error>,
        options: &LockOptions,
        wait: Wait,
    ) -> Result<Acquiring, Error> {
        let started = std::time::Instant::now();
        let name = name?;
        let kind = kind.fair(options.is_fair());
        let conns = self.connections(&name, Operation::Acquire)?;
        let config = self.lock_config(kind, name, options, wait, &conns)?;
        Ok(self.spawn(conns, config, None, started))
    }

    /// The lease config an acquire of `name` as `kind` runs with: the
    /// validated options and a fresh token (a uuid v4, also the jitter's
    /// seed).
    pub(crate) fn lock_config(
        &self,
        kind: Kind,
        name: LockName,
        options: &LockOptions,
        wait: Wait,
        conns: &Connections,
    ) -> Result<LockConfig, Error> {
        let ttl = options.ttl()?;
        let max_hold = options.max_hold_value()?;
        let keys = self.inner.keyspace.keys_for(&name, kind);
        let uuid = uuid::Uuid::new_v4();
        let seed = u64::from_le_bytes(uuid.as_bytes()[..8].try_into().expect("16 bytes"));
        // Written on the stack, then shared: one allocation, not two.
        let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
        let token = Token((&*uuid.hyphenated().encode_lower(&mut text)).into());
        Ok(LockConfig {
            name,
            kind,
            keys,
            token,
            ttl,
            wait,
            nodes: conns.nodes.len(),
            auto_renew: options.auto_renew,
            max_hold,
            retry: RetryPolicy::default(),
            fence_grace: self.inner.fence_grace,
            seed,
        })
    }

    /// Whether this client talks to a Redis Cluster (keys of different
    /// slots live on different shards).
    pub(crate) fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    /// The runtime the client's background work runs on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.handle
    }

    /// A mutex lease whose key another script set already (`acquire_many`):
    /// its actor starts from `handoff` (`Lock::accept_handoff`) instead of an
    /// attempt; it skips the local line, as a fair mutex's waiters do.
    pub(crate) fn adopt(
        &self,
        conns: Arc<Connections>,
        config: LockConfig,
        handoff: Handoff,
    ) -> impl Future<Output = Result<Granted, Error>> + Send + 'static {
        self.spawn(conns, config, Some(handoff), std::time::Instant::now())
    }

    /// Hand the work to a new lease actor; the returned future only waits
    /// for its answer (and, when dropped, tells the actor to cancel).
    fn spawn(
        &self,
        conns: Arc<Connections>,
        config: LockConfig,
        handoff: Option<Handoff>,
        started: std::time::Instant,
    ) -> Acquiring {
        let kind = config.kind;
        let cancelled = Arc::new(AtomicBool::new(false));
        // In line now, in call order, before anything is spawned or awaited;
        // a release of this client may hand us the lock (`successor`).
        let place = if kind.lines_up_locally() && handoff.is_none() {
            let slot = self.inner.queues.slot(&config.name);
            slot.line_up(&cancelled, || Successor::new(&config))
        } else {
            // Permits and readers are shared, and a fair mutex's waiters
            // each stand in the server's line: it orders them (and nobody is
            // handed one in a release). A lease set by acquire_many holds
            // already.
            self.inner.queues.alone(&cancelled)
        };
        let candidate = place.candidate();
        if matches!(place, Place::Waiting(_)) {
            // Local contention, visible in the logs; emitted after the place
            // is taken, so a reader of this line knows the order is fixed.
            tracing::debug!(lock = %config.name, "in line behind an earlier acquire of this client");
        }
        let place = match place {
            Place::Turn(turn) if handoff.is_none() && crate::inline::fits(&config) => {
                // The line is free and nothing needs a timer: the attempt
                // runs in the caller's future (see `inline.rs`).
                let runtime = self.inner.handle.clone();
                let start = Box::new(crate::inline::Start {
                    conns,
                    config,
                    turn,
                    cancelled,
                    started,
                    runtime: runtime.clone(),
                });
                // Only `start` is moved into the box: the attempt's state
                // (large: the command's future) is built there when first
                // polled, not built here and copied in.
                return Acquiring::Inline(Box::pin(crate::held::entered(
                    runtime,
                    crate::inline::acquire(start),
                )));
            }
            place => place,
        };
        let place = Arc::new(std::sync::Mutex::new(Some(place)));
        let (reply, rx) = oneshot::channel();
        let actors = conns.actors.clone();
        actors.spawn_on(
            driver::run(Job {
                conns,
                place: Arc::clone(&place),
                candidate,
                config,
                handoff,
                started,
                reply,
            }),
            &self.inner.handle,
        );
        Acquiring::Actor(Answer::new(rx, cancelled, place))
    }

    /// What Redis says about `name` now, in one round trip per node (read
    /// only): whether it is held, the holder's remaining TTL, the last fence
    /// issued (while the fence key remains: a free lock may still show its
    /// last holder's fence), and whether the holder is a live lease of this
    /// client. With Redlock the majority's view (see [`LockInfo`]). A bad
    /// name is the same `InvalidArgument` as `acquire`'s; nothing is written.
    pub async fn inspect(&self, name: impl AsRef<[u8]>) -> Result<LockInfo, Error> {
        self.inspect_named(LockName::new(name)?).await
    }

    /// [`Client::inspect`] for a name validated already (the bindings').
    pub async fn inspect_named(&self, name: LockName) -> Result<LockInfo, Error> {
        self.inspect_as(Kind::Mutex, name).await
    }

    /// [`Client::inspect_named`] for `kind`'s keys (a semaphore's holders).
    pub async fn inspect_as(&self, kind: Kind, name: LockName) -> Result<LockInfo, Error> {
        let conns = self.connections(&name, Operation::Inspect)?;
        let keys = self.inner.keyspace.keys_for(&name, kind);
        let tokens = conns.tokens(&name);
        let inspect = Inspect::of_kind(name, kind, &keys, &tokens, conns.nodes.len());
        conns.inspect(&inspect).await
    }

    /// An operator's force-release: remove the lock whoever holds it, wake
    /// its waiters, and advance its fence past every fence issued so far,
    /// so a fenced resource refuses the old holder's later writes (its lease
    /// is lost at its next renewal or extend). Returns that fence: record it
    /// in a fenced resource to refuse the old holder at once. Logged at
    /// WARN with this process's pid and host, for the audit trail. With
    /// Redlock a majority of the nodes must answer.
    pub async fn force_release(&self, name: impl AsRef<[u8]>) -> Result<u64, Error> {
        self.force_release_named(LockName::new(name)?).await
    }

    /// [`Client::force_release`] for a name validated already (the bindings').
    pub async fn force_release_named(&self, name: LockName) -> Result<u64, Error> {
        let conns = self.connections(&name, Operation::ForceRelease)?;
        let keys = self.inner.keyspace.keys(&name);
        let force = ForceRelease::new(name, &keys, self.inner.fence_grace, conns.nodes.len());
        let answers = conns
            .on_every_node(
                force.name(),
                Operation::ForceRelease,
                |i| force.command(i),
                |r| force.read(r),
            )
            .await?;
        let forced = force.combine(answers)?;
        tracing::warn!(
            lock = %force.name(),
            fence = forced.fence,
            was_held = forced.was_held,
            pid = std::process::id(),
            host = %hostname(),
            "lock force-released"
        );
        Ok(forced.fence)
    }

    /// The key space this client's locks live in.
    pub fn keyspace(&self) -> &KeySpace {
        &self.inner.keyspace
    }

    /// Close the connections. Auto-renewal stops and leases still held
    /// expire by their TTL; pending acquires fail with `Closed`.
    /// Returns once every compensating release (of a failed, cancelled or
    /// pending acquire) is answered or timed out, so nothing the client may
    /// hold is left behind unless Redis is unreachable. Idempotent.
    pub async fn close(&self) {
        let conns = self
            .inner
            .conns
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(conns) = conns {
            conns.closed.send_replace(true);
            conns.actors.close();
            conns.actors.wait().await;
            tracing::debug!("fencelock client closed");
        }
    }
}

/// rustls needs a process-wide crypto provider; install ring's unless the
/// application already installed one.
fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// This machine's name for the audit line (Linux; else the environment's).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_else(|_| "?".to_owned())
}

fn redis_message(e: &Error) -> String {
    match e {
        Error::Redis { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// An acquire in progress (see [`Client::acquire`]): resolves to the lease.
/// Dropping it cancels; the driver then leaves no lock behind.
#[must_use = "an acquire is cancelled when dropped"]
pub struct Acquire {
    /// `Err` if the arguments were refused (taken when polled).
    state: Result<Acquiring, Option<Error>>,
}

impl Acquire {
    /// Resolve to a [`Granted`] lease instead, claimed by the caller when it
    /// has really taken it: for front ends whose hand-over can still fail
    /// after this future is done (a cancelled asyncio task, an aborted JS
    /// signal). A `Granted` dropped unclaimed is released by the driver.
    pub fn granted(self) -> Granting {
        Granting(self)
    }

    fn poll_granted(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Granted, Error>> {
        match &mut self.state {
            Ok(acquiring) => std::pin::Pin::new(acquiring).poll(cx),
            Err(e) => std::task::Poll::Ready(Err(e
                .take()
                .unwrap_or_else(|| Error::invalid("acquire polled after it finished")))),
        }
    }
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Acquire")
    }
}

impl Future for Acquire {
    type Output = Result<Lease, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.poll_granted(cx).map(|r| r.map(Granted::claim))
    }
}

/// [`Acquire::granted`]: resolves to a lease still to be claimed.
#[must_use = "an acquire is cancelled when dropped"]
#[derive(Debug)]
pub struct Granting(Acquire);

impl Future for Granting {
    type Output = Result<Granted, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.poll_granted(cx)
    }
}

/// A [`Client::try_acquire`] in progress: `None` if someone else holds the lock.
#[must_use = "an acquire is cancelled when dropped"]
pub struct TryAcquire(pub(crate) Acquire);

impl TryAcquire {
    /// [`Acquire::granted`] for one attempt.
    pub fn granted(self) -> TryGranting {
        TryGranting(self.0)
    }
}

impl fmt::Debug for TryAcquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TryAcquire")
    }
}

/// "Someone else holds it" is `None` for a try-once acquire.
fn held_is_none<T>(result: Result<T, Error>) -> Result<Option<T>, Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(Error::NotAcquired { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Future for TryAcquire {
    type Output = Result<Option<Lease>, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0
            .poll_granted(cx)
            .map(|r| held_is_none(r.map(Granted::claim)))
    }
}

/// [`TryAcquire::granted`]: `None` if someone else holds the lock.
#[must_use = "an acquire is cancelled when dropped"]
#[derive(Debug)]
pub struct TryGranting(Acquire);

impl Future for TryGranting {
    type Output = Result<Option<Granted>, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.poll_granted(cx).map(held_is_none)
    }
}

/// [`Client::acquire_granted`]: a [`Granting`] or a [`TryGranting`], chosen
/// at run time; `Some` unless a try-once found the lock held.
#[must_use = "an acquire is cancelled when dropped"]
#[derive(Debug)]
pub struct MaybeGranting {
    acquire: Acquire,
    try_once: bool,
}

impl Future for MaybeGranting {
    type Output = Result<Option<Granted>, Error>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let try_once = self.try_once;
        self.acquire.poll_granted(cx).map(|r| match try_once {
            true => held_is_none(r),
            false => r.map(Some),
        })
    }
}

/// The caller's side of an acquire: its actor's answer, or the inline
/// attempt itself.
enum Acquiring {
    Actor(Answer),
    Inline(std::pin::Pin<Box<dyn Future<Output = Result<Granted, Error>> + Send>>),
}

impl Future for Acquiring {
    type Output = Result<Granted, Error>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Acquiring::Actor(answer) => std::pin::Pin::new(answer)
                .poll(cx)
                .map(|r| r.map(Granted::from_actor)),
            Acquiring::Inline(attempt) => attempt.as_mut().poll(cx),
        }
    }
}
