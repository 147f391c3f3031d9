//! An inline lease's core (the fast path, see `inline.rs`): no task and no
//! channel; its extend and release drive the core's `Lock` in the caller's
//! future. A request dropped mid-flight tells the core `Reply::Unknown` for
//! what it sent and finishes in a task (`driver::finish`), as does the
//! release of a lease nobody claimed. With no timer of its own, the lease
//! asks the core about its validity when read (`look`), and arms a timer
//! (`watch`) once someone waits for its loss or lines up behind it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use fencelock_core::{Error, Event, Lock, Operation, Progress, Ttl};
use tokio::runtime::Handle;

use crate::clock::{now, to_tokio};
use crate::connections::{Connections, Owned};
use crate::driver;
use crate::in_flight::{run_queued, InFlight};
use crate::lease_state::Shared;
use crate::metrics;
use crate::queue::{Promise, Turn};

/// An inline lease's state, shared by its `Lease` and, while they run,
/// a request dropped mid-flight and the validity timer (weakly).
pub(crate) type HeldCell = Arc<tokio::sync::Mutex<Held>>;

pin_project_lite::pin_project! {
    /// `future`, polled inside the client's runtime: its IO and timers
    /// belong to that runtime, whatever executor polls the caller's future.
    /// A struct, not an async fn: that would hold the future twice (the
    /// argument and its pinned copy), and an inline acquire's is 1.4 KB.
    pub(crate) struct Entered<F> {
        runtime: Handle,
        #[pin]
        future: F,
    }
}

pub(crate) fn entered<F: Future>(runtime: Handle, future: F) -> Entered<F> {
    Entered { runtime, future }
}

impl<F: Future> Future for Entered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.runtime.enter();
        this.future.poll(cx)
    }
}

/// A won inline lock becomes its lease's cell; `events` are what the core
/// said while winning, besides the grant.
pub(crate) fn hold(
    lock: Lock,
    turn: Option<Turn>,
    owned: Option<Owned>,
    conns: &Arc<Connections>,
    shared: Arc<Shared>,
    seen: metrics::Seen,
    events: Vec<Event>,
) -> HeldCell {
    let cell: HeldCell = Arc::new(tokio::sync::Mutex::new(Held {
        lock: Some(lock),
        turn,
        promise: None,
        owns: owned.map(Owned::keep).is_some(),
        conns: Arc::downgrade(conns),
        shared: Arc::clone(&shared),
        seen,
        in_flight: InFlight::Idle,
        asked: None,
        answer: None,
    }));
    {
        let mut held = cell.try_lock().expect("nobody else has it yet");
        for event in events {
            held.on_event(event);
        }
        // Someone lining up behind us needs our loss noticed in time.
        if let Some(turn) = &held.turn {
            let (weak, runtime) = (Arc::downgrade(&cell), conns.runtime.clone());
            turn.when_waited_for(Box::new(move || {
                if shared.start_watching() {
                    arm(weak, &runtime);
                }
            }));
        }
    }
    cell
}

/// An inline lease's core and what it holds with it.
pub(crate) struct Held {
    /// `Some` until dropped (an unclaimed grant's release takes it).
    lock: Option<Lock>,
    turn: Option<Turn>,
    /// The waiter our release in flight hands the lock to (with `turn`).
    /// Boxed, as is an error answer: a held lease keeps this cell.
    promise: Option<Box<Promise>>,
    /// `Connections::owned` has our token (see [`Owned::keep`]).
    owns: bool,
    conns: Weak<Connections>,
    shared: Arc<Shared>,
    seen: metrics::Seen,
    /// Commands sent whose replies the core has not had.
    in_flight: InFlight,
    /// The request a caller waits on, and its answer once the core gave it.
    asked: Option<Operation>,
    answer: Option<Result<(), Box<Error>>>,
}

impl Held {
    fn lock(&mut self) -> &mut Lock {
        self.lock.as_mut().expect("until dropped")
    }

    /// The guard of our token's record, once: dropped, it ends the record.
    fn owned(&mut self) -> Option<Owned> {
        let lock = self
            .lock
            .as_ref()
            .filter(|_| std::mem::take(&mut self.owns))?;
        let conns = self.conns.upgrade()?;
        Some(Owned::adopt(&conns, lock.name(), lock.token()))
    }

    pub(crate) fn extend(&mut self, ttl: Option<Ttl>) -> Result<(), Error> {
        self.lock().extend(now(), ttl)
    }

    /// A waiter of ours in line gets the lock in the same round trip.
    pub(crate) fn release(&mut self) -> Result<(), Error> {
        let promise = self.turn.as_ref().and_then(Turn::promise_next);
        let at = now();
        let lock = self.lock();
        let released = match &promise {
            Some(promise) => lock.release_to(at, promise.successor().clone()),
            None => lock.release(at),
        };
        // Refused: the promise, dropped, puts the waiter back.
        if released.is_ok() {
            self.promise = promise.map(Box::new);
        }
        released
    }

    /// Let the core see the time: a validity that ran out is a loss.
    fn look(&mut self) {
        let lock = self.lock();
        let at = now();
        if lock.poll_timeout().is_some_and(|t| t <= at) {
            lock.handle_timeout(at);
            while let Some(event) = self.lock().poll_event() {
                self.on_event(event);
            }
        }
    }

    /// Drive the core until nothing a caller waits for is under way.
    async fn settle(&mut self, conns: &Arc<Connections>) {
        loop {
            while let Some(event) = self.lock().poll_event() {
                self.on_event(event);
            }
            let lock = self.lock.as_mut().expect("until dropped");
            if run_queued(conns, lock, &mut self.in_flight, None).await {
                self.seen.record(lock.name(), lock.stats());
                continue;
            }
            let lock = self.lock.as_ref().expect("until dropped");
            self.shared.publish(lock);
            if lock.progress() != Progress::Underway {
                return;
            }
            match lock.poll_timeout() {
                Some(at) => {
                    tokio::time::sleep_until(to_tokio(at)).await;
                    self.lock().handle_timeout(now());
                }
                None => return,
            }
        }
    }

    fn on_event(&mut self, event: Event) {
        let asked = self.asked;
        match event {
            Event::Extended { .. } => {
                self.shared
                    .publish(self.lock.as_ref().expect("until dropped"));
                if asked == Some(Operation::Extend) {
                    self.answer = Some(Ok(()));
                }
            }
            Event::ExtendFailed(e) => {
                if asked == Some(Operation::Extend) {
                    self.answer = Some(Err(Box::new(e)));
                }
            }
            Event::Released(result) => {
                self.turn = None;
                // Released (or handed over): no token of ours left for
                // `inspect` to ask about. Not left to the handle's drop,
                // which a garbage-collected front end puts off: one name's
                // released leases piled up there, each drop a scan of them.
                if result.is_ok() {
                    drop(self.owned());
                }
                self.shared.mark_over();
                let name = self.lock.as_ref().expect("until dropped").name();
                if asked == Some(Operation::Release) {
                    metrics::released(name, &result);
                    self.answer = Some(result.map_err(Box::new));
                } else if let Err(e) = result {
                    tracing::debug!(lock = %name, error = %e, "release finished with an error");
                }
            }
            Event::Handoff(handoff) => match (self.turn.take(), self.promise.take()) {
                (Some(turn), Some(promise)) => turn.hand_over(*promise, handoff),
                _ => unreachable!("a handoff comes only for a release_to made holding the turn"),
            },
            Event::NotPublished => {
                if let Some(conns) = self.conns.upgrade() {
                    let name = self.lock.as_ref().expect("until dropped").name();
                    driver::not_published(&conns, name);
                }
            }
            Event::Lost => {
                self.shared.mark_lost();
                let name = self.lock.as_ref().expect("until dropped").name();
                tracing::warn!(lock = %name, "lease lost");
                metrics::lost(name);
                if self.promise.is_none() {
                    self.turn = None;
                }
            }
            // Not in a held lease's life.
            Event::Subscribe
            | Event::Unsubscribe
            | Event::Acquired { .. }
            | Event::AcquireFailed(_) => {}
        }
    }
}

impl Drop for Held {
    /// Won, but nobody claimed the lease: release it (in a task), do not
    /// leave it held. Claimed and dropped: the key expires by its TTL.
    fn drop(&mut self) {
        let owned = self.owned();
        let Some(mut lock) = self.lock.take() else {
            return;
        };
        if self.shared.is_claimed() || lock.progress() != Progress::Holding {
            return;
        }
        let Some(conns) = self.conns.upgrade() else {
            return;
        };
        if *conns.closed.borrow() {
            return;
        }
        tracing::debug!(lock = %lock.name(), "lease never claimed; releasing");
        if lock.release(now()).is_ok() {
            let finish = driver::finish(
                Arc::clone(&conns),
                lock,
                self.turn.take(),
                owned,
                std::mem::take(&mut self.seen),
            );
            conns.actors.spawn_on(finish, &conns.runtime);
        }
    }
}

/// A request being driven: dropped mid-flight, what it sent is `Unknown`
/// to the core and the rest runs in a task.
struct Running(Option<tokio::sync::OwnedMutexGuard<Held>>);

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut held) = self.0.take() else {
            return;
        };
        held.asked = None;
        held.answer = None;
        {
            let held = &mut *held;
            let lock = held.lock.as_mut().expect("until dropped");
            held.in_flight
                .abandon(lock, now(), "the caller stopped waiting");
        }
        let Some(conns) = held.conns.upgrade() else {
            return;
        };
        let runtime = conns.runtime.clone();
        let tracker = conns.actors.clone();
        tracker.spawn_on(
            async move {
                held.settle(&conns).await;
            },
            &runtime,
        );
    }
}

/// An extend or a release of an inline lease, started by `start` and
/// driven here; `None` if the client was closed (the lease's `gone`).
pub(crate) async fn request(
    cell: &HeldCell,
    runtime: &Handle,
    asked: Operation,
    start: impl FnOnce(&mut Held) -> Result<(), Error>,
) -> Option<Result<(), Error>> {
    entered(runtime.clone(), async {
        let held = Arc::clone(cell).lock_owned().await;
        let conns = held.conns.upgrade().filter(|c| !*c.closed.borrow())?;
        let mut running = Running(Some(held));
        let held = running.0.as_mut().expect("just set");
        held.look();
        if let Err(e) = start(held) {
            running.0 = None;
            return Some(Err(e));
        }
        held.asked = Some(asked);
        held.settle(&conns).await;
        let mut held = running.0.take().expect("until done");
        held.asked = None;
        let answer = held.answer.take().map(|r| r.map_err(|e| *e));
        let name = held.lock().name().clone();
        Some(answer.unwrap_or_else(|| Err(Error::redis(Some(&name), "no answer from the lock"))))
    })
    .await
}

/// [`Lease::lost`] of an inline lease: the core looks at the time, unless
/// a request is driving it right now (that one looks too).
pub(crate) fn look(cell: &HeldCell) {
    if let Ok(mut held) = cell.try_lock() {
        held.look();
    }
}

/// Someone waits for this lease's loss: run its validity timer.
pub(crate) fn watch(cell: &HeldCell, shared: &Shared, runtime: &Handle) {
    if shared.start_watching() {
        arm(Arc::downgrade(cell), runtime);
    }
}

/// The validity timer: sleeps until the core's next timeout and lets it
/// look, until the lease is released, lost or dropped.
fn arm(weak: Weak<tokio::sync::Mutex<Held>>, runtime: &Handle) {
    runtime.spawn(async move {
        loop {
            let at = {
                let Some(cell) = weak.upgrade() else { return };
                let mut held = cell.lock().await;
                held.look();
                match held.lock().poll_timeout() {
                    Some(at) => at,
                    None => return,
                }
            };
            tokio::time::sleep_until(to_tokio(at)).await;
        }
    });
}
