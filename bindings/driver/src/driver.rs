//! The actor that pumps one core [`Lock`]: one tokio task per acquire/lease.
//!
//! It waits for its turn in the local FIFO, drives the core through the
//! acquire (commands out, replies/wake-ups/timeouts in), hands a [`Lease`] to
//! the caller, then keeps driving for auto-renewal, the validity deadline,
//! and the lease's extend/release requests. If the caller drops the acquire
//! future, the actor cancels the core and drives the compensating release to
//! the end.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fencelock_core::{Error, Event, Instant, Lock, LockConfig, State, Wait};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::{now, to_tokio};
use crate::connections::Connections;
use crate::lease::{Granted, Lease, LeaseParts, Request, Shared};
use crate::notify::Subscription;
use crate::queue::{Place, SharedPlace, Turn};

enum Pending {
    Extend(oneshot::Sender<Result<(), Error>>),
    Release(oneshot::Sender<Result<(), Error>>),
}

/// Everything one acquire needs; built (and validated) by the client.
pub(crate) struct Job {
    pub conns: Arc<Connections>,
    /// The place in the name's local line, taken in the acquire call; the
    /// caller takes it back (leaving the line at once) if it cancels before
    /// this task started.
    pub place: SharedPlace,
    pub config: LockConfig,
    /// When the caller called acquire (the wait bound runs from here).
    pub started: std::time::Instant,
    pub reply: oneshot::Sender<Result<Granted, Error>>,
}

fn closed_error(config: &LockConfig) -> Error {
    Error::redis(Some(&config.name), "the client is closed")
}

/// The actor's body.
pub(crate) async fn run(job: Job) {
    let Job {
        conns,
        place,
        mut config,
        started,
        mut reply,
    } = job;
    let mut closed = conns.closed.subscribe();
    if *closed.borrow_and_update() {
        let _ = reply.send(Err(closed_error(&config)));
        return;
    }

    // Phase 1: our turn in the local FIFO for this name. A try-once or a
    // bounded wait gives up at its deadline, except while the turn is held
    // by an acquire of this client whose caller cancelled it: that one only
    // finishes its compensating release (one round trip), and the name is
    // not busy because of it. (Handing the turn on at cancel time instead
    // would be faster, but our next attempt is ordered after that release
    // only while both go down the same healthy connection, not across a
    // reconnect or a retry; then a try-once would meet our own abandoned key
    // and report NotAcquired on a free lock.)
    let Some(place) = place.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return; // cancelled before we started; the caller left the line
    };
    let turn = match place {
        Place::Turn(turn) => turn,
        Place::Waiting(waiting) => {
            let deadline = match config.wait {
                // A bound too large for the clock is no bound.
                Wait::Bounded(d) => started.checked_add(d).map(tokio::time::Instant::from_std),
                Wait::Forever => None,
            };
            tokio::select! {
                biased;
                // A cancelled acquire leaves even if the turn just came.
                () = reply.closed() => return,
                turn = waiting.take_until(deadline) => match turn {
                    Some(turn) => turn,
                    None => {
                        let _ = reply.send(Err(Error::not_acquired(&config.name)));
                        return;
                    }
                },
                _ = closed.changed() => {
                    let _ = reply.send(Err(closed_error(&config)));
                    return;
                }
            }
        }
    };
    if let Wait::Bounded(d) = config.wait {
        config.wait = Wait::Bounded(d.saturating_sub(started.elapsed()));
    }
    // An acquire that cannot reach its node keeps trying to connect until
    // the end of its wait (see `Node::run`).
    let acquire_deadline = match config.wait {
        Wait::Bounded(d) => tokio::time::Instant::now().checked_add(d),
        Wait::Forever => None,
    };

    // Phase 2: the remote protocol.
    let parts = LeaseParts {
        name: config.name.clone(),
        token: config.token.0.clone(),
        ttl: config.ttl.as_duration(),
        auto_renew: config.auto_renew,
    };
    let mut lock = Lock::new(config);
    let (replicas, replica_timeout) = conns.replicas;
    lock.require_replicas(replicas, replica_timeout);
    if let Err(e) = lock.acquire(now()) {
        let _ = reply.send(Err(e));
        return;
    }
    let mut actor = Actor {
        conns: &conns,
        reply: Some(reply),
        turn: Some(turn),
        subscription: None,
        pending: None,
        shared: Arc::new(Shared::new()),
        requests: None,
        abandoned: false,
        lease_parts: Some(parts),
        acquire_deadline,
        give_up: watch::Sender::new(false),
    };
    actor.drive(&mut lock, &mut closed).await;
}

struct Actor<'a> {
    conns: &'a Arc<Connections>,
    /// The acquire caller, until the lease is handed over.
    reply: Option<oneshot::Sender<Result<Granted, Error>>>,
    turn: Option<Turn>,
    subscription: Option<Subscription>,
    pending: Option<Pending>,
    shared: Arc<Shared>,
    requests: Option<mpsc::UnboundedReceiver<Request>>,
    /// The caller went away after the lock was acquired: release it.
    abandoned: bool,
    lease_parts: Option<LeaseParts>,
    /// When an acquire that cannot reach its node stops trying.
    acquire_deadline: Option<tokio::time::Instant>,
    /// Set when the caller cancels or the client closes: commands still
    /// waiting for a connection stop waiting (they were never sent).
    give_up: watch::Sender<bool>,
}

impl Actor<'_> {
    async fn drive(&mut self, lock: &mut Lock, closed: &mut watch::Receiver<bool>) {
        let mut inflight = FuturesUnordered::new();
        let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
        tokio::pin!(sleep);
        let mut armed: Option<Instant> = None;
        let mut closing = false;
        let mut lease_dropped = false;
        loop {
            // Drain until quiet: an event handler may call back into the
            // lock (the release of an abandoned lease) and produce more.
            loop {
                let mut progressed = false;
                while let Some(command) = lock.poll_command() {
                    progressed = true;
                    let node = self.conns.nodes[command.node].clone();
                    let retry_until =
                        node.retry_bound(&command, self.acquire_deadline, self.conns.nodes.len());
                    let give_up = self.give_up.subscribe();
                    inflight.push(async move {
                        let reply = node.run(&command, retry_until, give_up).await;
                        (command.id, reply)
                    });
                }
                while let Some(event) = lock.poll_event() {
                    progressed = true;
                    self.on_event(lock, event);
                }
                if !progressed {
                    break;
                }
            }
            // A failed acquire is reported within its own bounds: the
            // compensating releases go on in this task (and `close` waits
            // for them), the caller need not wait out their timeouts too.
            if let Some(error) = lock.acquire_failure() {
                if let Some(reply) = self.reply.take() {
                    let _ = reply.send(Err(error.clone()));
                    if let Some(turn) = &self.turn {
                        turn.only_compensating();
                    }
                }
            }
            self.shared.publish(lock);

            let state = lock.state();
            if self.reply.is_none() && inflight.is_empty() {
                let delivered = self.requests.is_some();
                if state == State::Done && (!delivered || self.abandoned || closing) {
                    break;
                }
                if lease_dropped
                    && !self.abandoned
                    && self.pending.is_none()
                    && state != State::Releasing
                {
                    // Dropped without release: stop renewing, let the key expire.
                    break;
                }
            }
            if closing && state == State::Held && self.pending.is_none() {
                break;
            }

            let timeout = lock.poll_timeout();
            if timeout != armed {
                if let Some(at) = timeout {
                    sleep.as_mut().reset(to_tokio(at));
                }
                armed = timeout;
            }
            let take_requests = self.pending.is_none() && !lease_dropped && self.requests.is_some();
            let waiter = self.subscription.as_ref().map(|s| s.waiter());
            let requests = self.requests.as_mut().filter(|_| take_requests);
            let reply = self.reply.as_mut();
            let (has_waiter, has_requests, acquiring) =
                (waiter.is_some(), requests.is_some(), reply.is_some());

            tokio::select! {
                biased;
                Some((id, reply)) = inflight.next(), if !inflight.is_empty() => {
                    lock.handle_reply(now(), id, reply);
                }
                () = async { waiter.expect("guarded").notify.notified().await }, if has_waiter => {
                    lock.handle_wakeup(now());
                }
                () = &mut sleep, if armed.is_some() => {
                    armed = None;
                    lock.handle_timeout(now());
                }
                request = async { requests.expect("guarded").recv().await }, if has_requests => {
                    match request {
                        Some(request) => self.on_request(lock, request),
                        None => {
                            lease_dropped = true;
                            if !self.shared.is_claimed() && lock.state() == State::Held {
                                // Won, but the caller was gone before taking
                                // the lease: release, do not leave it held.
                                tracing::debug!(lock = %lock.name(), "lease never claimed; releasing");
                                self.abandoned = true;
                                let _ = lock.release(now());
                            }
                        }
                    }
                }
                () = async { reply.expect("guarded").closed().await }, if acquiring => {
                    tracing::debug!(lock = %lock.name(), "acquire cancelled by the caller");
                    self.reply = None;
                    self.give_up.send_replace(true);
                    lock.cancel(now());
                }
                changed = closed.changed(), if !closing => {
                    if changed.is_ok() && *closed.borrow() {
                        closing = true;
                        self.give_up.send_replace(true);
                        if let Some(reply) = self.reply.take() {
                            let _ = reply.send(Err(Error::redis(Some(lock.name()), "the client is closed")));
                            lock.cancel(now());
                        }
                    } else if changed.is_err() {
                        closing = true;
                    }
                }
            }
        }
        tracing::trace!(lock = %lock.name(), "lease actor finished");
    }

    fn on_request(&mut self, lock: &mut Lock, request: Request) {
        match request {
            Request::Extend(ttl, tx) => match lock.extend(now(), ttl) {
                Ok(()) => self.pending = Some(Pending::Extend(tx)),
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            },
            Request::Release(tx) => match lock.release(now()) {
                Ok(()) => self.pending = Some(Pending::Release(tx)),
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            },
        }
    }

    fn on_event(&mut self, lock: &mut Lock, event: Event) {
        match event {
            Event::Subscribe => {
                self.subscription = Some(self.conns.notifier.subscribe(&lock.keys().channel));
            }
            Event::Unsubscribe => self.subscription = None,
            Event::Acquired { fence, .. } => {
                self.subscription = None;
                self.shared.publish(lock);
                let (tx, rx) = mpsc::unbounded_channel();
                self.requests = Some(rx);
                let parts = self.lease_parts.take().expect("acquired once");
                let lease = Lease::new(
                    parts,
                    fence,
                    Arc::clone(&self.shared),
                    tx,
                    tokio::runtime::Handle::current(),
                );
                let delivered = match self.reply.take() {
                    Some(reply) => reply.send(Ok(Granted::new(lease))).is_ok(),
                    None => false,
                };
                if !delivered {
                    // The caller gave up just as we won: do not leave it held.
                    tracing::debug!(lock = %lock.name(), "acquired after the caller left; releasing");
                    self.abandoned = true;
                    if let Err(e) = lock.release(now()) {
                        tracing::warn!(lock = %lock.name(), error = %e, "compensating release refused");
                    }
                }
            }
            Event::AcquireFailed(e) => {
                self.subscription = None;
                self.turn = None;
                if let Some(reply) = self.reply.take() {
                    let _ = reply.send(Err(e));
                }
            }
            Event::Extended { .. } => {
                // The caller reads valid_for right after extend returns.
                self.shared.publish(lock);
                if let Some(Pending::Extend(tx)) = self.pending.take() {
                    let _ = tx.send(Ok(()));
                }
            }
            Event::ExtendFailed(e) => {
                if let Some(Pending::Extend(tx)) = self.pending.take() {
                    let _ = tx.send(Err(e));
                }
            }
            Event::Released(result) => {
                self.turn = None;
                self.subscription = None;
                self.shared.mark_over();
                if let Some(Pending::Release(tx)) = self.pending.take() {
                    let _ = tx.send(result);
                } else if let Err(e) = result {
                    tracing::debug!(lock = %lock.name(), error = %e, "release finished with an error");
                }
            }
            Event::NotPublished => {
                if !self
                    .conns
                    .not_published_logged
                    .swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(
                        lock = %lock.name(),
                        "Redis refused to PUBLISH the release notification (an ACL user \
                         without channel rights?): releases still work, but waiters in \
                         other clients only notice them by their timer"
                    );
                }
            }
            Event::Lost => {
                // Mark first: whatever reports the loss (a log handler, a
                // callback) must find the lease already lost.
                self.shared.mark_lost();
                tracing::warn!(lock = %lock.name(), "lease lost");
                // The next local waiter may try now.
                self.turn = None;
            }
        }
    }
}
