//! The inline fast path: an acquire that finds its name's local line free
//! and will not renew (a plain mutex, no `auto_renew`; one node or
//! Redlock's several) runs its first attempt in the caller's future, and
//! its lease's extend and release drive the core there too: no task and no
//! channel per lease. A Redlock round's commands go out at once and its
//! fence write-back, if any, runs here as well.
//!
//! The core's `Lock` decides everything, exactly as in an actor; this file
//! only moves its commands out and replies in (`in_flight.rs`). An acquire
//! that has to wait (held or unreachable: pub/sub, timers, handoff) goes on
//! in an actor from where it stands (`driver::resume`). Nothing is lost to a
//! dropped future: an acquire dropped after its attempt may have reached
//! Redis cancels the core and drives its compensating release in a task
//! (`driver::finish`); a release or an extend dropped mid-flight tells the
//! core `Reply::Unknown` for what it sent and finishes in a task.
//!
//! The local line sees an inline lease as any other: it holds the turn
//! until released, lost or dropped, and its release hands the lock to the
//! first local waiter (`Lock::release_to`). The won lease's cell, and how
//! its extend and release run, are `held.rs`.

use std::sync::Arc;

use fencelock_core::{Error, Event, Lock, LockConfig, Operation, Progress, State};
use tokio::runtime::Handle;

use crate::clock::now;
use crate::connections::{Connections, Owned};
use crate::driver::{self, Answer, Prepared};
use crate::held;
use crate::in_flight::{run_queued, InFlight};
use crate::lease::{Backend, Granted, Lease};
use crate::lease_state::{LeaseParts, Shared};
use crate::metrics;
use crate::queue::{Cancelled, Turn};

/// What an inline acquire starts from; the turn was free.
pub(crate) struct Start {
    pub conns: Arc<Connections>,
    pub config: LockConfig,
    pub turn: Turn,
    pub cancelled: Cancelled,
    pub started: std::time::Instant,
    pub runtime: Handle,
}

/// Whether an acquire may take the fast path: one that never needs a timer
/// while held.
pub(crate) fn fits(config: &LockConfig) -> bool {
    config.kind == fencelock_core::Kind::Mutex && !config.auto_renew
}

/// The attempt in flight: dropped before it is done (the caller's future
/// dropped, or the client closed), the core cancels it and the
/// compensating release it decides on runs in a task.
struct Attempt {
    lock: Option<Lock>,
    turn: Option<Turn>,
    owned: Option<Owned>,
    conns: Arc<Connections>,
    cancelled: Cancelled,
    runtime: Handle,
    /// Commands sent whose replies the core has not had.
    in_flight: InFlight,
    /// The core's stats already recorded as metrics.
    seen: metrics::Seen,
}

impl Attempt {
    fn lock(&mut self) -> &mut Lock {
        self.lock.as_mut().expect("until taken")
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let Some(mut lock) = self.lock.take() else {
            return;
        };
        // The turn is only held for the compensating release now: a
        // try-once of this client waits for it instead of failing.
        self.cancelled
            .store(true, std::sync::atomic::Ordering::Release);
        metrics::acquire_cancelled(lock.name());
        let at = now();
        // What was sent may have run: the core assumes the worst.
        self.in_flight
            .abandon(&mut lock, at, "the acquire was cancelled");
        lock.cancel(at);
        if lock.progress() == Progress::Finished && lock.poll_command().is_none() {
            return;
        }
        tracing::debug!(lock = %lock.name(), "acquire cancelled by the caller; releasing");
        let conns = Arc::clone(&self.conns);
        let (turn, owned) = (self.turn.take(), self.owned.take());
        let seen = std::mem::take(&mut self.seen);
        let finish = driver::finish(Arc::clone(&conns), lock, turn, owned, seen);
        conns.actors.spawn_on(finish, &self.runtime);
    }
}

/// The inline acquire: one attempt here; a grant is a lease with no task,
/// a refusal of a try-once an error, anything else goes on in an actor.
pub(crate) async fn acquire(start: Box<Start>) -> Result<Granted, Error> {
    let Start {
        conns,
        config,
        turn,
        cancelled,
        started,
        runtime,
    } = *start;
    let Prepared {
        lock,
        parts,
        owned,
        acquire_deadline,
    } = driver::prepare(&conns, config, started);
    let mut attempt = Attempt {
        lock: Some(lock),
        turn: Some(turn),
        owned: Some(owned),
        conns: Arc::clone(&conns),
        cancelled,
        runtime,
        in_flight: InFlight::Idle,
        seen: metrics::Seen::default(),
    };
    // Called here, not on the `Prepared` lock: a local that was borrowed
    // keeps its own room (a whole `Lock`) in this future across the awaits
    // below.
    if let Err(e) = attempt.lock().acquire(now()) {
        attempt.lock = None; // nothing was sent: nothing to compensate
        return Err(e);
    }
    // The attempt's round runs here, and a Redlock fence write-back after
    // it; once no round is under way, the acquire is decided (a grant, or
    // a failure whose compensation an actor finishes) or waits (an actor).
    loop {
        let lock = attempt.lock.as_mut().expect("until taken");
        if !run_queued(&conns, lock, &mut attempt.in_flight, acquire_deadline).await {
            break;
        }
        attempt.seen.record(lock.name(), lock.stats());
        if !lock.round_in_flight() {
            break;
        }
    }
    if *conns.closed.borrow() {
        // Closed meanwhile: `close` fails pending acquires; the attempt's
        // compensation is the drop's (and `close` waits for it).
        let error = Error::closed(attempt.lock().name(), Operation::Acquire);
        metrics::acquire_failed(attempt.lock().name(), &error);
        return Err(error);
    }
    let lock = attempt.lock();
    match (lock.state(), lock.progress()) {
        (State::Held, Progress::Holding) => Ok(grant(attempt, parts, started)),
        (State::Done, Progress::Finished) => {
            let mut lock = attempt.lock.take().expect("until taken");
            let mut failure = None;
            while let Some(event) = lock.poll_event() {
                if let Event::AcquireFailed(e) = event {
                    failure = Some(e);
                }
            }
            let error = failure.unwrap_or_else(|| Error::not_acquired(lock.name()));
            metrics::acquire_failed(lock.name(), &error);
            Err(error)
        }
        // Held by someone else (wait), or more rounds to go: an actor goes
        // on from here, and this future only waits for its answer.
        _ => {
            let lock = attempt.lock.take().expect("until taken");
            let turn = attempt.turn.take().expect("until taken");
            let owned = attempt.owned.take().expect("until taken");
            let (reply, rx) = tokio::sync::oneshot::channel();
            let call = driver::Call {
                reply,
                parts,
                acquire_deadline,
                started,
            };
            let seen = std::mem::take(&mut attempt.seen);
            let actor = driver::resume(Arc::clone(&conns), lock, turn, owned, call, seen);
            conns.actors.spawn_on(actor, &attempt.runtime);
            let cancelled = Arc::clone(&attempt.cancelled);
            drop(attempt);
            Answer::taken_over(rx, cancelled)
                .await
                .map(Granted::from_actor)
        }
    }
}

/// The attempt won: the lease, its core kept in a `held::hold` cell.
fn grant(mut attempt: Attempt, parts: LeaseParts, started: std::time::Instant) -> Granted {
    let mut lock = attempt.lock.take().expect("until taken");
    let shared = Arc::new(Shared::new());
    shared.publish(&lock);
    let mut fence = lock.fence().unwrap_or_default();
    let mut others = Vec::new();
    while let Some(event) = lock.poll_event() {
        match event {
            Event::Acquired { fence: f, .. } => fence = f,
            other => others.push(other),
        }
    }
    metrics::acquired(lock.name(), started, lock.stats().granted_attempt_sent);
    let runtime = attempt.runtime.clone();
    let cell = held::hold(
        lock,
        attempt.turn.take(),
        attempt.owned.take(),
        &attempt.conns,
        Arc::clone(&shared),
        std::mem::take(&mut attempt.seen),
        others,
    );
    let lease = Lease::new(parts, fence, shared, Backend::Inline(cell), runtime);
    Granted::new(lease)
}
