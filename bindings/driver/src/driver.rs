//! The actor that pumps one core [`Lock`]: one tokio task per acquire/lease.
//!
//! It waits for its turn in the local FIFO, drives the core through the
//! acquire (commands out, replies/wake-ups/timeouts in), hands a [`Lease`] to
//! the caller, then keeps driving for auto-renewal, the validity deadline,
//! and the lease's extend/release requests. If the caller drops the acquire
//! future, the actor cancels the core and drives the compensating release to
//! the end.
//!
//! Handoff: a release while a waiter of this client is in line for the name
//! hands it the lock in the same round trip (`Lock::release_to`, see
//! `queue.rs`); that waiter's actor starts from the handoff
//! (`Lock::accept_handoff`) instead of an attempt, or gives it back
//! (`Lock::refuse_handoff`) if its caller left meanwhile.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use fencelock_core::{
    Error, Event, Handoff, Instant, Lock, LockConfig, LockName, Operation, Progress, Wait,
};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::{now, to_tokio};
use crate::connections::{Connections, Owned};
use crate::lease_state::{LeaseParts, Request, Shared};
use crate::metrics;
use crate::notify::Subscription;
use crate::queue::{self, Candidate, Promise, SharedPlace, Turn, Waited};

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
    /// The place's candidate for a handoff (`None`: the turn was free).
    pub candidate: Option<Arc<Candidate>>,
    pub config: LockConfig,
    /// The key is set for this lease already (by `acquire_many`): start
    /// from this handoff, as from a release's.
    pub handoff: Option<Handoff>,
    /// When the caller called acquire (the wait bound runs from here).
    pub started: std::time::Instant,
    pub reply: Caller,
}

fn closed_error(name: &LockName) -> Error {
    Error::closed(name, Operation::Acquire)
}

/// The actor's body.
pub(crate) async fn run(job: Job) {
    let Job {
        conns,
        place,
        candidate,
        config,
        handoff: adopted,
        started,
        mut reply,
    } = job;
    let mut closed = conns.closed.subscribe();
    let waited = if *closed.borrow_and_update() {
        Err(Some(closed_error(&config.name)))
    } else {
        wait_for_turn(&place, &config, started, &mut reply, &mut closed).await
    };
    drop(place);
    let (turn, handoff) = match waited {
        Ok((turn, handoff)) => (turn, handoff.or(adopted)),
        Err(answer) => {
            if let Some(error) = answer {
                metrics::acquire_failed(&config.name, &error);
                let _ = reply.send(Err(error));
            }
            // Leaving without the turn; a release of this client may be
            // handing us the lock all the same: then give it back.
            if let Some(candidate) = candidate {
                if let Some((turn, handoff)) = queue::abandon(&candidate).await {
                    refuse(&conns, config, turn, handoff, &mut closed).await;
                }
            }
            return;
        }
    };
    // Phase 2: the remote protocol. From here until the actor ends, the
    // token is this client's for `Client::inspect`'s `held_by_me`.
    let Prepared {
        mut lock,
        parts,
        owned: _owned,
        acquire_deadline,
    } = prepare(&conns, config, started);
    // Handed the lock by a release: that is our first attempt's outcome.
    let start = match handoff {
        Some(handoff) => lock.accept_handoff(now(), handoff),
        None => lock.acquire(now()),
    };
    if let Err(e) = start {
        let _ = reply.send(Err(e));
        return;
    }
    let call = Call {
        reply,
        parts,
        acquire_deadline,
        started,
    };
    let mut actor = Actor::new(&conns, Some(turn), Some(call), metrics::Seen::default());
    actor.drive(&mut lock, &mut closed).await;
}

/// What an acquire sets up before its first attempt, in an actor or inline
/// (`inline.rs`).
pub(crate) struct Prepared {
    pub lock: Lock,
    pub parts: LeaseParts,
    /// The token is this client's (`Client::inspect`'s `held_by_me`) while
    /// this lives.
    pub owned: Owned,
    /// An acquire that cannot reach its node keeps trying to connect until
    /// the end of its wait (see `Node::run`).
    pub acquire_deadline: Option<tokio::time::Instant>,
}

pub(crate) fn prepare(
    conns: &Arc<Connections>,
    mut config: LockConfig,
    started: std::time::Instant,
) -> Prepared {
    // The wait runs from the call, not from the turn.
    if let Wait::Bounded(d) = config.wait {
        config.wait = Wait::Bounded(d.saturating_sub(started.elapsed()));
    }
    let acquire_deadline = match config.wait {
        Wait::Bounded(d) => tokio::time::Instant::now().checked_add(d),
        Wait::Forever => None,
    };
    let owned = conns.own(&config.name, &config.token);
    let parts = LeaseParts {
        name: config.name.clone(),
        kind: config.kind,
        conns: Arc::downgrade(conns),
        token: config.token.clone(),
        ttl: config.ttl.as_duration(),
        auto_renew: config.auto_renew,
    };
    let lock = new_lock(conns, config);
    Prepared {
        lock,
        parts,
        owned,
        acquire_deadline,
    }
}

/// The core's lock for `config`, held to this client's `replicas=N`.
fn new_lock(conns: &Connections, config: LockConfig) -> Lock {
    let mut lock = Lock::new(config);
    let (replicas, replica_timeout) = conns.replicas;
    lock.require_replicas(replicas, replica_timeout);
    lock
}

/// An acquire started in the caller's future (`inline.rs`) that has to
/// wait, or to do more than one round: this actor takes the core's `Lock`
/// where that future left it (its events not drained yet) and goes on as
/// `run` would after its first attempt.
pub(crate) async fn resume(
    conns: Arc<Connections>,
    mut lock: Lock,
    turn: Turn,
    owned: Owned,
    call: Call,
    seen: metrics::Seen,
) {
    let _owned = owned;
    let mut closed = conns.closed.subscribe();
    // What the inline attempt recorded already is not counted twice.
    let mut actor = Actor::new(&conns, Some(turn), Some(call), seen);
    if *closed.borrow_and_update() {
        actor.on_closed(&mut lock);
    }
    actor.drive(&mut lock, &mut closed).await;
}

/// What an inline lock left under way when nobody waits for it any more
/// (a dropped acquire's compensating release, an unclaimed grant's
/// release): driven to the end here, holding the turn until then.
pub(crate) async fn finish(
    conns: Arc<Connections>,
    mut lock: Lock,
    turn: Option<Turn>,
    owned: Option<Owned>,
    seen: metrics::Seen,
) {
    let _owned = owned;
    let mut closed = conns.closed.subscribe();
    let mut actor = Actor::new(&conns, turn, None, seen);
    actor.drive(&mut lock, &mut closed).await;
}

/// Redis refused a release's PUBLISH: said once per client.
pub(crate) fn not_published(conns: &Connections, name: &LockName) {
    if !conns.not_published_logged.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            lock = %name,
            "Redis refused to PUBLISH the release notification (an ACL user \
             without channel rights?): releases still work, but waiters in \
             other clients only notice them by their timer"
        );
    }
}

/// Phase 1: our turn in the local FIFO for this name, or a release of this
/// client handing us the lock with it. A try-once or a bounded wait gives
/// up at its deadline, except while the turn is held by an acquire of this
/// client whose caller cancelled it: that one only finishes its
/// compensating release (one round trip), and the name is not busy because
/// of it. (Handing the turn on at cancel time instead would be faster, but
/// our next attempt is ordered after that release only while both go down
/// the same healthy connection, not across a reconnect or a retry; then a
/// try-once would meet our own abandoned key and report NotAcquired on a
/// free lock.) `Err`: no turn, with the caller's answer (`None`: it left).
async fn wait_for_turn(
    place: &SharedPlace,
    config: &LockConfig,
    started: std::time::Instant,
    reply: &mut Caller,
    closed: &mut watch::Receiver<bool>,
) -> Result<(Turn, Option<Handoff>), Option<Error>> {
    let deadline = match config.wait {
        // A bound too large for the clock is no bound.
        Wait::Bounded(d) => started.checked_add(d).map(tokio::time::Instant::from_std),
        Wait::Forever => None,
    };
    // The place stays in its cell while we wait: a caller that cancels
    // takes it back and leaves the line at once, even while this task is
    // not running (see `queue::take_until`).
    tokio::select! {
        biased;
        // A cancelled acquire leaves even if the turn just came.
        () = reply.closed() => Err(None),
        waited = queue::take_until(place, deadline) => match waited {
            Waited::Turn(turn) => Ok((turn, None)),
            Waited::HandedOver(turn, handoff) => Ok((turn, Some(handoff))),
            // Cancelled; the caller left the line.
            Waited::Left => Err(None),
            Waited::GaveUp => Err(Some(Error::not_acquired(&config.name))),
        },
        _ = closed.changed() => Err(Some(closed_error(&config.name))),
    }
}

/// A handoff made for an acquire whose caller left: give back at once
/// wherever it may have set our key (the core's compensating release),
/// holding the turn until that is answered.
async fn refuse(
    conns: &Arc<Connections>,
    config: LockConfig,
    turn: Turn,
    handoff: Handoff,
    closed: &mut watch::Receiver<bool>,
) {
    turn.only_compensating();
    let name = config.name.clone();
    let mut lock = new_lock(conns, config);
    if let Err(e) = lock.refuse_handoff(now(), handoff) {
        tracing::warn!(lock = %name, error = %e, "handoff refused by the core");
        return;
    }
    tracing::debug!(lock = %name, "handed the lock after the caller left; releasing");
    let mut actor = Actor::new(conns, Some(turn), None, metrics::Seen::default());
    actor.drive(&mut lock, closed).await;
}

/// An acquire's caller and what its grant needs.
pub(crate) struct Call {
    pub reply: Caller,
    pub parts: LeaseParts,
    /// When an acquire that cannot reach its node stops trying.
    pub acquire_deadline: Option<tokio::time::Instant>,
    /// When the caller called acquire (its wait time runs from here).
    pub started: std::time::Instant,
}

/// Where the acquire's answer goes.
pub(crate) type Caller = oneshot::Sender<Result<Won, Error>>;

/// What an actor hands its caller when the lock is won: the lease's parts
/// and the channel its requests come down (`Granted::from_actor` makes the
/// lease). Dropped undelivered, the channel closes and the actor releases.
pub(crate) struct Won {
    pub parts: LeaseParts,
    pub fence: u64,
    pub shared: Arc<Shared>,
    pub requests: mpsc::UnboundedSender<Request>,
    pub runtime: tokio::runtime::Handle,
}

/// The caller's side of an actor: waits for its answer.
pub(crate) struct Answer {
    rx: oneshot::Receiver<Result<Won, Error>>,
    /// Shared with the actor and, through its turn, with the local queue.
    cancelled: Arc<AtomicBool>,
    /// Our place in line until the actor takes it.
    place: SharedPlace,
    answered: bool,
}

impl Answer {
    pub(crate) fn new(
        rx: oneshot::Receiver<Result<Won, Error>>,
        cancelled: Arc<AtomicBool>,
        place: SharedPlace,
    ) -> Self {
        Answer {
            rx,
            cancelled,
            place,
            answered: false,
        }
    }

    /// The answer of an actor that took over an inline attempt (its place
    /// in line is the actor's already).
    pub(crate) fn taken_over(
        rx: oneshot::Receiver<Result<Won, Error>>,
        cancelled: Arc<AtomicBool>,
    ) -> Self {
        Answer::new(rx, cancelled, Arc::new(std::sync::Mutex::new(None)))
    }
}

impl Drop for Answer {
    /// Dropped before the answer was taken: the actor is (or is about to be)
    /// cancelling. Said here, synchronously, so the caller's very next
    /// acquire of the same name already knows that the turn this one holds
    /// is only held for its compensating release (see `queue.rs`).
    fn drop(&mut self) {
        if !self.answered {
            self.cancelled.store(true, Ordering::Release);
            // Not started yet: leave the line now, not when the task runs.
            drop(self.place.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }
}

impl Future for Answer {
    type Output = Result<Won, Error>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx).map(|r| {
            self.answered = true;
            r.unwrap_or_else(|_| Err(Error::redis(None, "the lock driver stopped unexpectedly")))
        })
    }
}

/// Where the actor is with the outside world: who may still ask something
/// of this lock. What the lock itself has left to do is the core's answer
/// ([`Lock::progress`]); the two together decide when the actor stops.
enum Phase {
    /// The acquire caller waits for the grant.
    Acquiring(Caller),
    /// The lease was handed over: its extend and release requests come here,
    /// answered even after it is released, until every handle is dropped.
    Serving(mpsc::UnboundedReceiver<Request>),
    /// Nobody will ask anything more (the acquire failed or was cancelled,
    /// the grant never arrived, the lease was dropped): finish what the core
    /// has under way and stop once the last replies are in; a held lease is
    /// left to expire.
    Finishing,
    /// The client is closing: finish what a caller waits for, leave a held
    /// lease to expire at once. The lease's requests (if it was handed over
    /// and is not dropped) are served until then.
    Closing(Option<mpsc::UnboundedReceiver<Request>>),
}

impl Phase {
    /// Whether the actor may stop now, after draining (`quiet`: no reply
    /// still in flight).
    fn may_stop(&self, progress: Progress, quiet: bool) -> bool {
        match (self, progress) {
            (Phase::Acquiring(_) | Phase::Serving(_), _) | (_, Progress::Underway) => false,
            (Phase::Finishing, Progress::Holding | Progress::Finished) => quiet,
            (Phase::Closing(_), Progress::Holding) => true,
            (Phase::Closing(_), Progress::Finished) => quiet,
        }
    }

    /// What to wait on: the acquire caller going away, or the lease's next
    /// request (one at a time: `ready` when none is pending).
    fn inputs(
        &mut self,
        ready: bool,
    ) -> (
        Option<&mut Caller>,
        Option<&mut mpsc::UnboundedReceiver<Request>>,
    ) {
        match self {
            Phase::Acquiring(caller) => (Some(caller), None),
            Phase::Serving(requests) | Phase::Closing(Some(requests)) if ready => {
                (None, Some(requests))
            }
            _ => (None, None),
        }
    }
}

/// The tokio sleep that stands for the core's `poll_timeout`.
struct Alarm {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The instant the sleep is set to, until it fires.
    at: Option<Instant>,
}

impl Alarm {
    fn new() -> Self {
        Alarm {
            sleep: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            at: None,
        }
    }

    /// Follow the core's next timeout (read after draining).
    fn set(&mut self, at: Option<Instant>) {
        if at != self.at {
            if let Some(at) = at {
                self.sleep.as_mut().reset(to_tokio(at));
            }
            self.at = at;
        }
    }

    fn is_set(&self) -> bool {
        self.at.is_some()
    }

    async fn fired(&mut self) {
        self.sleep.as_mut().await;
        self.at = None;
    }
}

struct Actor<'a> {
    conns: &'a Arc<Connections>,
    phase: Phase,
    turn: Option<Turn>,
    subscription: Option<Subscription>,
    pending: Option<Pending>,
    shared: Arc<Shared>,
    lease_parts: Option<LeaseParts>,
    /// When an acquire that cannot reach its node stops trying.
    acquire_deadline: Option<tokio::time::Instant>,
    /// Set when the caller cancels or the client closes: commands still
    /// waiting for a connection stop waiting (they were never sent).
    give_up: watch::Sender<bool>,
    /// The waiter our release in flight hands the lock to (with `turn`).
    promise: Option<Promise>,
    /// When the caller called acquire (its wait time runs from here).
    started: std::time::Instant,
    /// The core's stats already recorded as metrics.
    seen: metrics::Seen,
}

impl<'a> Actor<'a> {
    /// `call`: the acquire caller waiting for the grant; `None`: nobody
    /// waits, the actor finishes what the core has under way.
    fn new(
        conns: &'a Arc<Connections>,
        turn: Option<Turn>,
        call: Option<Call>,
        seen: metrics::Seen,
    ) -> Self {
        let (phase, lease_parts, acquire_deadline, started) = match call {
            Some(call) => (
                Phase::Acquiring(call.reply),
                Some(call.parts),
                call.acquire_deadline,
                call.started,
            ),
            None => (Phase::Finishing, None, None, std::time::Instant::now()),
        };
        Actor {
            conns,
            phase,
            turn,
            subscription: None,
            pending: None,
            shared: Arc::new(Shared::new()),
            lease_parts,
            acquire_deadline,
            give_up: watch::Sender::new(false),
            promise: None,
            started,
            seen,
        }
    }

    async fn drive(&mut self, lock: &mut Lock, closed: &mut watch::Receiver<bool>) {
        let mut inflight = FuturesUnordered::new();
        let mut alarm = Alarm::new();
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
                if let Some(caller) = self.take_caller() {
                    metrics::acquire_failed(lock.name(), error);
                    let _ = caller.send(Err(error.clone()));
                    if let Some(turn) = &self.turn {
                        turn.only_compensating();
                    }
                }
            }
            self.shared.publish(lock);
            if self.phase.may_stop(lock.progress(), inflight.is_empty()) {
                break;
            }

            alarm.set(lock.poll_timeout());
            let alarm_set = alarm.is_set();
            let closing = matches!(self.phase, Phase::Closing(_));
            let waiter = self.subscription.as_ref().map(|s| s.waiter());
            let (caller, requests) = self.phase.inputs(self.pending.is_none());
            let (has_waiter, has_requests, acquiring) =
                (waiter.is_some(), requests.is_some(), caller.is_some());

            tokio::select! {
                biased;
                Some((id, reply)) = inflight.next(), if !inflight.is_empty() => {
                    lock.handle_reply(now(), id, reply);
                    self.seen.record(lock.name(), lock.stats());
                }
                () = async { waiter.expect("guarded").notify.notified().await }, if has_waiter => {
                    let woke = waiter.expect("guarded").take();
                    let at = now();
                    if woke.everyone {
                        lock.handle_wakeup(at);
                    } else {
                        // The core reads each: a fair mutex's names the one waiter it wakes.
                        for message in &woke.messages {
                            lock.handle_message(at, message);
                        }
                    }
                }
                () = alarm.fired(), if alarm_set => lock.handle_timeout(now()),
                request = async { requests.expect("guarded").recv().await }, if has_requests => {
                    match request {
                        Some(request) => self.on_request(lock, request),
                        None => self.on_lease_dropped(lock),
                    }
                }
                () = async { caller.expect("guarded").closed().await }, if acquiring => {
                    self.on_cancelled(lock);
                }
                // `Err` (the sender gone) cannot happen while this actor
                // holds `conns`; it would mean the same.
                changed = closed.changed(), if !closing => {
                    if changed.is_err() || *closed.borrow() {
                        self.on_closed(lock);
                    }
                }
            }
        }
        tracing::trace!(lock = %lock.name(), "lease actor finished");
    }

    /// The acquire caller, if it still waits; from then on nobody does.
    fn take_caller(&mut self) -> Option<Caller> {
        match std::mem::replace(&mut self.phase, Phase::Finishing) {
            Phase::Acquiring(caller) => Some(caller),
            other => {
                self.phase = other;
                None
            }
        }
    }

    fn on_cancelled(&mut self, lock: &mut Lock) {
        tracing::debug!(lock = %lock.name(), "acquire cancelled by the caller");
        metrics::acquire_cancelled(lock.name());
        self.phase = Phase::Finishing;
        self.give_up.send_replace(true);
        lock.cancel(now());
    }

    fn on_closed(&mut self, lock: &mut Lock) {
        self.give_up.send_replace(true);
        self.phase = match std::mem::replace(&mut self.phase, Phase::Finishing) {
            Phase::Acquiring(caller) => {
                let error = closed_error(lock.name());
                metrics::acquire_failed(lock.name(), &error);
                let _ = caller.send(Err(error));
                lock.cancel(now());
                Phase::Closing(None)
            }
            Phase::Serving(requests) => Phase::Closing(Some(requests)),
            Phase::Closing(requests) => Phase::Closing(requests),
            Phase::Finishing => Phase::Closing(None),
        };
    }

    /// Every handle of the lease is gone: nobody will ask anything more.
    fn on_lease_dropped(&mut self, lock: &mut Lock) {
        if let Phase::Closing(requests) = &mut self.phase {
            *requests = None;
        } else {
            self.phase = Phase::Finishing;
        }
        if !self.shared.is_claimed() && lock.progress() == Progress::Holding {
            // Won, but the caller was gone before taking the lease: release,
            // do not leave it held. (Claimed and dropped: stop renewing and
            // let the key expire.)
            tracing::debug!(lock = %lock.name(), "lease never claimed; releasing");
            let _ = lock.release(now());
        }
    }

    fn on_request(&mut self, lock: &mut Lock, request: Request) {
        match request {
            Request::Extend(ttl, tx) => match lock.extend(now(), ttl) {
                Ok(()) => self.pending = Some(Pending::Extend(tx)),
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            },
            Request::StopRenewing => lock.stop_renewing(now()),
            Request::Release(tx) => {
                // A waiter of ours in line gets the lock in the same round
                // trip (see queue.rs).
                let promise = self.turn.as_ref().and_then(Turn::promise_next);
                let released = match &promise {
                    Some(promise) => lock.release_to(now(), promise.successor().clone()),
                    None => lock.release(now()),
                };
                match released {
                    Ok(()) => {
                        self.pending = Some(Pending::Release(tx));
                        self.promise = promise;
                    }
                    // Refused: the promise, dropped, puts the waiter back.
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            }
        }
    }

    fn on_event(&mut self, lock: &mut Lock, event: Event) {
        match event {
            Event::Subscribe => {
                self.subscription = Some(self.conns.notifier.subscribe(&lock.keys().channel()));
            }
            Event::Unsubscribe => self.subscription = None,
            Event::Acquired { fence, .. } => {
                self.subscription = None;
                self.shared.publish(lock);
                let (requests, rx) = mpsc::unbounded_channel();
                let won = Won {
                    parts: self.lease_parts.take().expect("acquired once"),
                    fence,
                    shared: Arc::clone(&self.shared),
                    requests,
                    runtime: tokio::runtime::Handle::current(),
                };
                let delivered = match self.take_caller() {
                    Some(caller) => caller.send(Ok(won)).is_ok(),
                    None => false,
                };
                if delivered {
                    let sent = lock.stats().granted_attempt_sent;
                    metrics::acquired(lock.name(), self.started, sent);
                    self.phase = Phase::Serving(rx);
                } else {
                    metrics::acquire_cancelled(lock.name());
                    // The caller gave up just as we won: do not leave it held.
                    tracing::debug!(lock = %lock.name(), "acquired after the caller left; releasing");
                    if let Err(e) = lock.release(now()) {
                        tracing::warn!(lock = %lock.name(), error = %e, "compensating release refused");
                    }
                }
            }
            Event::AcquireFailed(e) => {
                self.subscription = None;
                self.turn = None;
                if let Some(caller) = self.take_caller() {
                    metrics::acquire_failed(lock.name(), &e);
                    let _ = caller.send(Err(e));
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
                    metrics::released(lock.name(), &result);
                    let _ = tx.send(result);
                } else if let Err(e) = result {
                    tracing::debug!(lock = %lock.name(), error = %e, "release finished with an error");
                }
            }
            Event::Handoff(handoff) => match (self.turn.take(), self.promise.take()) {
                // The turn goes with it, straight to the promised waiter.
                (Some(turn), Some(promise)) => turn.hand_over(promise, handoff),
                _ => unreachable!("a handoff comes only for a release_to made holding the turn"),
            },
            Event::NotPublished => not_published(self.conns, lock.name()),
            Event::Lost => {
                // Mark first: whatever reports the loss (a log handler, a
                // callback) must find the lease already lost.
                self.shared.mark_lost();
                tracing::warn!(lock = %lock.name(), "lease lost");
                metrics::lost(lock.name());
                // The next local waiter may try now (unless our release is
                // handing it the lock: the turn goes with the handoff).
                if self.promise.is_none() {
                    self.turn = None;
                }
            }
        }
    }
}
