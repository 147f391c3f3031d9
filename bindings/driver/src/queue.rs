//! The local FIFO: waiters of one client for one name line up behind a single
//! remote attempt. A fair tokio mutex per name is held from the attempt until
//! the lease is released, lost or dropped; the map entry disappears with the
//! last user, so idle names cost nothing. A caller takes its place in line
//! synchronously, inside the acquire call ([`Slot::line_up`]), so waiters are
//! served in call order whatever order the scheduler runs their tasks in.
//!
//! The entry also knows whether the acquire holding the turn was cancelled by
//! its caller (it then only finishes its compensating release): a try-once
//! or a bounded wait of the same client waits for such a holder to leave
//! instead of reporting `NotAcquired` for a lock nobody holds.
//!
//! Handoff (one round trip instead of a release and then the waiter's own
//! acquire; the core's `Lock::release_to`): every waiter lines up with its
//! [`Successor`] as a [`Candidate`]. The holder's release picks the first
//! live one ([`Turn::promise_next`]), sends the handoff, and gives its turn
//! with the outcome straight to that waiter ([`Turn::hand_over`]), which
//! starts from it instead of attempting ([`Waited::HandedOver`]). A waiter
//! whose caller leaves once promised still takes delivery and gives the
//! lock back ([`abandon`]): the handoff may have set its key.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use fencelock_core::{Handoff, LockName, Successor};
use tokio::sync::{Notify, Semaphore};

/// Set (once) when the acquire that owns it is cancelled by its caller.
pub(crate) type Cancelled = Arc<AtomicBool>;

/// One name's queue.
#[derive(Default)]
struct Entry {
    turn: Gate,
    /// Fires whenever a turn is given back.
    freed: Notify,
    line: Mutex<Line>,
}

/// The name's line: the acquire holding the turn and those waiting behind
/// it. One lock, so that lining up and registering `on_wait` cannot miss
/// each other.
#[derive(Default)]
struct Line {
    /// The cancellation flag of the acquire holding the turn, if any.
    holder: Option<Cancelled>,
    /// The waiters a release may hand the lock to, in the order they lined
    /// up (the fair mutex's order: both are taken under this lock).
    waiters: VecDeque<Arc<Candidate>>,
    /// Run once when someone lines up behind the holder: an inline lease
    /// (no task, no timer of its own) arms its validity timer then, so a
    /// waiter behind a lease that runs out is not stuck (see `inline.rs`).
    on_wait: Option<OnWait>,
}

/// See `Line::on_wait`.
pub(crate) type OnWait = Box<dyn FnOnce() + Send>;

/// The name's turn: one permit, handed out in the order it was asked for
/// (tokio's semaphore is fair). In the entry itself, not behind an `Arc`
/// of its own as a mutex's owned guard would need: a taken permit is
/// forgotten ([`Taken`]), and the [`Turn`] gives it back when dropped.
struct Gate(Semaphore);

impl Default for Gate {
    fn default() -> Self {
        Gate(Semaphore::new(1))
    }
}

/// The turn's permit, taken (see [`Gate`]).
#[derive(Debug)]
struct Taken;

/// Takes the turn once polled to completion; queued from its first poll.
type Taking = Pin<Box<dyn Future<Output = Taken> + Send>>;

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry").finish_non_exhaustive()
    }
}

impl Entry {
    /// The turn is held by an acquire whose caller has gone away: it is only
    /// finishing its compensating release (or about to leave).
    fn held_by_cancelled(&self) -> bool {
        self.line()
            .holder
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }

    fn line(&self) -> std::sync::MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `candidate` is no longer in line (it took its turn or left).
    fn leave_line(&self, candidate: &Arc<Candidate>) {
        self.line().waiters.retain(|c| !Arc::ptr_eq(c, candidate));
    }
}

/// A waiter in line as a release sees it: whom to hand the lock to, and
/// where the handoff is delivered.
pub(crate) struct Candidate {
    successor: Successor,
    who: Cancelled,
    offer: Mutex<Offer>,
    /// Fires whenever `offer` changes.
    changed: Notify,
}

impl std::fmt::Debug for Candidate {
    /// The successor's token is a secret (and redacted in its own `Debug`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate").finish_non_exhaustive()
    }
}

/// Where a candidate stands with the releases of its name.
enum Offer {
    /// Waiting in line, nobody handing it anything.
    Open,
    /// A release is handing it the lock (its `Promise` is out).
    Promised,
    /// That release is done: its outcome, and the turn that goes with it.
    Delivered(Turn, Handoff),
    /// Taken by the waiter, or the waiter left: out of the story.
    Closed,
}

impl Candidate {
    fn offer(&self) -> std::sync::MutexGuard<'_, Offer> {
        self.offer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, offer: Offer) {
        *self.offer() = offer;
        self.changed.notify_waiters();
    }

    fn is_promised(&self) -> bool {
        matches!(*self.offer(), Offer::Promised)
    }

    /// A delivered handoff, taken (once).
    fn take_delivered(&self) -> Option<(Turn, Handoff)> {
        let mut offer = self.offer();
        match std::mem::replace(&mut *offer, Offer::Closed) {
            Offer::Delivered(turn, handoff) => Some((turn, handoff)),
            other => {
                *offer = other;
                None
            }
        }
    }
}

/// A release's promise to hand the lock to a candidate (see
/// [`Turn::promise_next`]). Dropped undelivered (the release was refused),
/// the candidate is back at the head of the line, waiting as before.
pub(crate) struct Promise {
    candidate: Option<Arc<Candidate>>,
    slot: Slot,
}

impl Promise {
    /// What the release sends for the candidate (`Lock::release_to`).
    pub(crate) fn successor(&self) -> &Successor {
        &self.candidate.as_ref().expect("until delivered").successor
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        let Some(candidate) = self.candidate.take() else {
            return;
        };
        let entry = self.slot.entry();
        let mut line = entry.line();
        let mut offer = candidate.offer();
        if matches!(*offer, Offer::Promised) {
            *offer = Offer::Open;
            line.waiters.push_front(Arc::clone(&candidate));
        }
        drop((offer, line));
        candidate.changed.notify_waiters();
        entry.freed.notify_waiters();
    }
}

/// The waiter of `candidate` is leaving without a turn (its caller
/// cancelled, gave up, or the client closed): out of line at once, unless a
/// release is handing it the lock. Then wait for that handoff and return it
/// with the turn: the lock may be ours on some nodes, so the caller gives it
/// back (`Lock::refuse_handoff`) before the turn passes on.
pub(crate) async fn abandon(candidate: &Candidate) -> Option<(Turn, Handoff)> {
    loop {
        let changed = candidate.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        {
            let mut offer = candidate.offer();
            match std::mem::replace(&mut *offer, Offer::Closed) {
                Offer::Delivered(turn, handoff) => return Some((turn, handoff)),
                Offer::Promised => *offer = Offer::Promised,
                // Out of line (a release skips a closed candidate).
                Offer::Open | Offer::Closed => return None,
            }
        }
        changed.await;
    }
}

type Slots = HashMap<LockName, Arc<Entry>>;

#[derive(Debug, Default)]
pub(crate) struct NameQueues {
    slots: Mutex<Slots>,
}

impl NameQueues {
    /// A place in `name`'s queue (not yet taken).
    pub(crate) fn slot(self: &Arc<Self>, name: &LockName) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // The map's key and every slot of the name share the lease's copy
        // of it (`LockName` is shared, not copied).
        let entry = slots.entry(name.clone()).or_default();
        Slot {
            entry: Some(Arc::clone(entry)),
            queues: Arc::clone(self),
            name: Some(name.clone()),
        }
    }

    /// A turn of its own, for an acquire that does not line up locally (a
    /// semaphore permit, a read or write lock: several of one client may
    /// hold at once, and the server's fair line orders them). It is on no
    /// name's queue: nobody waits for it.
    pub(crate) fn alone(self: &Arc<Self>, who: &Cancelled) -> Place {
        let slot = Slot {
            entry: Some(Arc::new(Entry::default())),
            queues: Arc::clone(self),
            // On no name's queue: nothing to remove from the map.
            name: None,
        };
        // A fresh entry: the turn is free, so nobody ever waits to be
        // handed anything here.
        slot.line_up(who, || {
            unreachable!("a turn of its own is never waited for")
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.lock().unwrap().len()
    }
}

/// A handle on one name's queue; removes the idle entry when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    entry: Option<Arc<Entry>>,
    queues: Arc<NameQueues>,
    /// `None` for a turn of its own (`NameQueues::alone`).
    name: Option<LockName>,
}

impl Slot {
    fn entry(&self) -> &Entry {
        self.entry.as_ref().expect("slot entry present until drop")
    }

    /// Another handle on the same entry (made under the map's lock, as
    /// every slot is: see `Drop for Slot`).
    fn share(&self) -> Slot {
        let _slots = self.queues.slots.lock().unwrap_or_else(|e| e.into_inner());
        Slot {
            entry: self.entry.clone(),
            queues: Arc::clone(&self.queues),
            name: self.name.clone(),
        }
    }

    /// The future that takes this name's turn. It holds the entry, and is
    /// always dropped before its slot is (see `Waiting`): a slot's drop
    /// then sees every other user of the entry.
    fn take_turn(&self) -> Taking {
        let entry = Arc::clone(self.entry.as_ref().expect("slot entry present until drop"));
        Box::pin(async move {
            let permit = entry.turn.0.acquire().await;
            permit.expect("the gate is never closed").forget();
            drop(entry);
            Taken
        })
    }

    fn into_turn(self, guard: Taken, who: Cancelled) -> Turn {
        self.entry().line().holder = Some(Arc::clone(&who));
        Turn {
            guard: Some(guard),
            who,
            slot: self,
        }
    }

    /// Take a place in line now: the turn if it is free, else a place
    /// behind everyone who lined up before. Synchronous on purpose: the
    /// fair mutex queues a waiter when its lock future is first polled, so
    /// polling it here, in the caller's acquire call, fixes the order.
    /// `successor` is what a release sends to hand this acquire the lock
    /// (made only when it has to wait).
    pub(crate) fn line_up(self, who: &Cancelled, successor: impl FnOnce() -> Successor) -> Place {
        let mut lock = self.take_turn();
        let mut line = self.entry().line();
        // The task that waits later polls again with its own waker; the
        // place in line is kept.
        match lock.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(guard) => {
                drop(line);
                Place::Turn(self.into_turn(guard, Arc::clone(who)))
            }
            Poll::Pending => {
                let candidate = Arc::new(Candidate {
                    successor: successor(),
                    who: Arc::clone(who),
                    offer: Mutex::new(Offer::Open),
                    changed: Notify::new(),
                });
                line.waiters.push_back(Arc::clone(&candidate));
                let on_wait = line.on_wait.take();
                drop(line);
                if let Some(on_wait) = on_wait {
                    on_wait();
                }
                Place::Waiting(Waiting {
                    slot: Some(self),
                    lock: Some(lock),
                    who: Arc::clone(who),
                    candidate,
                })
            }
        }
    }
}

/// A place shared by the acquire's caller and its task: the task waits for
/// its turn in it ([`take_until`]); the caller takes it back to leave the
/// line at once when it cancels, whether or not the task started waiting.
pub(crate) type SharedPlace = Arc<Mutex<Option<Place>>>;

/// Where an acquire stands in its name's line.
pub(crate) enum Place {
    Turn(Turn),
    Waiting(Waiting),
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Place::Turn(_) => "Place::Turn",
            Place::Waiting(_) => "Place::Waiting",
        })
    }
}

impl Place {
    /// The candidate a release may hand the lock to, for a place in line:
    /// the acquire's task keeps it to give a handoff back if it leaves.
    pub(crate) fn candidate(&self) -> Option<Arc<Candidate>> {
        match self {
            Place::Turn(_) => None,
            Place::Waiting(waiting) => Some(Arc::clone(&waiting.candidate)),
        }
    }
}

/// A place in line, not yet at the front.
pub(crate) struct Waiting {
    /// Both `Some` until the turn comes (`into_turn`). `lock` first: it
    /// is dropped before `slot` (see `Slot::take_turn`).
    lock: Option<Taking>,
    slot: Option<Slot>,
    who: Cancelled,
    candidate: Arc<Candidate>,
}

impl Waiting {
    fn slot(&self) -> &Slot {
        self.slot.as_ref().expect("until the turn comes")
    }

    fn into_turn(mut self, guard: Taken) -> Turn {
        drop(self.lock.take());
        let slot = self.slot.take().expect("until the turn comes");
        slot.entry().leave_line(&self.candidate);
        self.candidate.set(Offer::Closed);
        slot.into_turn(guard, Arc::clone(&self.who))
    }
}

impl Drop for Waiting {
    /// Leaving the line without the turn: out of the fair mutex's queue (the
    /// lock future is dropped) and out of the candidates, unless a release
    /// is handing it the lock (the acquire's task then takes delivery).
    fn drop(&mut self) {
        let Some(slot) = &self.slot else { return };
        let entry = slot.entry();
        let mut line = entry.line();
        let mut offer = self.candidate.offer();
        if matches!(*offer, Offer::Open) {
            *offer = Offer::Closed;
            line.waiters.retain(|c| !Arc::ptr_eq(c, &self.candidate));
        }
    }
}

/// What waiting in a shared place came to.
pub(crate) enum Waited {
    Turn(Turn),
    /// A release of this client handed us the lock: the turn, and the
    /// handoff to start from instead of an attempt (`Lock::accept_handoff`).
    HandedOver(Turn, Handoff),
    /// Past the deadline, and the turn is held by a live acquire of this
    /// client (or goes to a live waiter who lined up before us). We have
    /// left the line.
    GaveUp,
    /// The caller cancelled and took the place back: it left the line.
    Left,
}

/// Takes a place that is still waiting out of its cell when dropped: the
/// line is left however the wait ends (given up, the client closed, the
/// task's future dropped), not when the caller's handle on the cell goes.
struct LeaveOnDrop<'a>(&'a SharedPlace);

impl Drop for LeaveOnDrop<'_> {
    fn drop(&mut self) {
        let mut cell = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let left = match cell.take() {
            // Taken: ours to keep (cannot be here, the wait took it).
            Some(turn @ Place::Turn(_)) => {
                *cell = Some(turn);
                None
            }
            waiting => waiting,
        };
        drop(cell);
        drop(left);
    }
}

/// Wait in `place` for our turn (FIFO) until `deadline` (`None`: no bound).
/// Past the deadline, keep waiting only while the turn is held by an
/// acquire of this client that was cancelled: it is only finishing its
/// compensating release, so the name is not really busy, and a try-once
/// (`deadline` = now) or a short wait must not report `NotAcquired`
/// because of it. Once that acquire leaves, the turn is ours if we are
/// next in line; if another live local waiter was ahead of us, `GaveUp`.
///
/// The place stays in its cell while we wait, and the lock future is
/// polled there: an acquire cancelled by its caller takes it out (leaving
/// the line) synchronously, inside the caller's drop. Were it kept in the
/// waiting task until that task next runs, the turn given back by the
/// cancelled holder ahead would go to this waiter nobody waits for, the
/// holder flag would be clear while it sat on it, and a try-once of the
/// same client behind it would give up on a free name.
/// Cancel-safe: dropping the future leaves the queue.
pub(crate) async fn take_until(
    place: &SharedPlace,
    deadline: Option<tokio::time::Instant>,
) -> Waited {
    let cell = || place.lock().unwrap_or_else(|e| e.into_inner());
    // Our own handle on the entry and on our candidate: the place may be
    // taken from the cell under us.
    let (slot, candidate) = {
        let mut cell = cell();
        match cell.as_ref() {
            None => return Waited::Left,
            Some(Place::Waiting(waiting)) => {
                (waiting.slot().share(), Arc::clone(&waiting.candidate))
            }
            Some(Place::Turn(_)) => {
                let Some(Place::Turn(turn)) = cell.take() else {
                    unreachable!("matched above")
                };
                return Waited::Turn(turn);
            }
        }
    };
    let _leave = LeaveOnDrop(place);
    let mut turn = std::pin::pin!(std::future::poll_fn(|cx| {
        let mut cell = cell();
        let Some(Place::Waiting(waiting)) = cell.as_mut() else {
            return Poll::Ready(None);
        };
        let lock = waiting.lock.as_mut().expect("until the turn comes");
        let guard = std::task::ready!(lock.as_mut().poll(cx));
        let Some(Place::Waiting(waiting)) = cell.take() else {
            unreachable!("matched above")
        };
        Poll::Ready(Some(waiting.into_turn(guard)))
    }));
    let entry = slot.entry();
    let mut past = deadline.is_some_and(|d| d <= tokio::time::Instant::now());
    let expired = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expired);
    loop {
        // Registered before the holder and the offer are looked at, so a
        // turn given back or a handoff delivered after the look still
        // wakes us.
        let freed = entry.freed.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        let changed = candidate.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if let Some((turn, handoff)) = candidate.take_delivered() {
            return Waited::HandedOver(turn, handoff);
        }
        // Promised: the turn comes with the handoff, and is worth waiting
        // for past the deadline.
        let promised = candidate.is_promised();
        let give_up = past && !promised && !entry.held_by_cancelled();
        tokio::select! {
            biased;
            turn = &mut turn, if !promised => return match turn {
                Some(turn) => Waited::Turn(turn),
                None => Waited::Left,
            },
            () = std::future::ready(()), if give_up => return Waited::GaveUp,
            () = &mut expired, if !past => past = true,
            () = &mut freed, if past => {}
            () = &mut changed => {}
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.entry.take());
        let Some(name) = self.name.take() else {
            return;
        };
        let mut slots = self.queues.slots.lock().unwrap_or_else(|e| e.into_inner());
        // One lookup, as in `Owned`'s drop.
        if let MapEntry::Occupied(entry) = slots.entry(name) {
            // Slots are only made under this lock, and a slot's turn future
            // (`Slot::take_turn`, the one other holder) never outlives it,
            // so a count of one means nobody holds or waits for this name.
            if Arc::strong_count(entry.get()) == 1 {
                entry.remove();
            }
        }
    }
}

/// Our turn: the next local waiter for the name runs when this is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    /// `None` once handed over.
    guard: Option<Taken>,
    who: Cancelled,
    slot: Slot,
}

impl Turn {
    /// The acquire holding this turn has answered its caller (it failed)
    /// and is only finishing its compensating release: like a cancelled
    /// one, it does not make the name busy for a try-once or a short wait.
    pub(crate) fn only_compensating(&self) {
        self.who.store(true, Ordering::Release);
        self.slot.entry().freed.notify_waiters();
    }

    /// Run `on_wait` once someone lines up behind this turn (at once if
    /// someone already has); forgotten when the turn is dropped.
    pub(crate) fn when_waited_for(&self, on_wait: OnWait) {
        let mut line = self.slot.entry().line();
        if line.waiters.is_empty() {
            line.on_wait = Some(on_wait);
        } else {
            drop(line);
            on_wait();
        }
    }

    /// The first waiter in line whose caller still waits, promised the
    /// lock by the release about to be sent: `release_to` its successor,
    /// then [`Turn::hand_over`] the outcome. `None`: nobody waits.
    pub(crate) fn promise_next(&self) -> Option<Promise> {
        let entry = self.slot.entry();
        let mut line = entry.line();
        let at = line
            .waiters
            .iter()
            .position(|c| !c.who.load(Ordering::Acquire) && matches!(*c.offer(), Offer::Open))?;
        let candidate = line.waiters.remove(at).expect("found");
        drop(line);
        candidate.set(Offer::Promised);
        Some(Promise {
            candidate: Some(candidate),
            slot: self.slot.share(),
        })
    }

    /// The release's handoff for the promised waiter, with this turn: it
    /// passes straight to that waiter (nobody else can take it between).
    pub(crate) fn hand_over(mut self, mut promise: Promise, handoff: Handoff) {
        let candidate = promise.candidate.take().expect("delivered once");
        let guard = self
            .guard
            .take()
            .expect("a turn holds its guard until dropped");
        let turn = self
            .slot
            .share()
            .into_turn(guard, Arc::clone(&candidate.who));
        candidate.set(Offer::Delivered(turn, handoff));
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Hand the turn on (to the first queued waiter, if any) before the
        // slot checks whether it is idle; then forget our flag unless the
        // next holder already put its own, and wake those that wait for a
        // cancelled holder to leave. Our `on_wait` goes first: the next
        // holder may register its own as soon as the guard is dropped.
        let entry = self.slot.entry();
        let on_wait = entry.line().on_wait.take();
        drop(on_wait);
        if self.guard.take().is_some() {
            entry.turn.0.add_permits(1);
        }
        entry.line().holder.take_if(|h| Arc::ptr_eq(h, &self.who));
        entry.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock_core::{
        Event, FenceGrace, Instant, KeySpace, Kind, Lock, LockConfig, Reply, RetryPolicy, Token,
        Ttl, Wait,
    };
    use std::time::Duration;

    /// The name every test's queue is for.
    fn name_a() -> LockName {
        LockName::new("a").unwrap()
    }

    fn who() -> Cancelled {
        Arc::new(AtomicBool::new(false))
    }

    fn config(token: &str) -> LockConfig {
        let name = name_a();
        LockConfig {
            kind: Kind::Mutex,
            keys: KeySpace::default().keys(&name),
            name,
            token: Token(token.into()),
            ttl: Ttl::from_millis(1000).unwrap(),
            wait: Wait::Forever,
            nodes: 1,
            auto_renew: false,
            max_hold: None,
            retry: RetryPolicy::default(),
            fence_grace: FenceGrace::DEFAULT,
            seed: 1,
        }
    }

    fn successor() -> Successor {
        Successor::new(&config("w"))
    }

    /// A handoff to "w" as the core makes it: held, then handed over.
    fn handoff() -> Handoff {
        let now = Instant::from_epoch(Duration::from_secs(1));
        let mut holder = Lock::new(config("h"));
        holder.acquire(now).unwrap();
        let c = holder.poll_command().unwrap();
        holder.handle_reply(now, c.id, Reply::Array(vec![Reply::Int(1), Reply::Int(5)]));
        while holder.poll_event().is_some() {}
        holder.release_to(now, successor()).unwrap();
        let c = holder.poll_command().unwrap();
        holder.handle_reply(now, c.id, Reply::Array(vec![Reply::Int(1), Reply::Int(6)]));
        std::iter::from_fn(|| holder.poll_event())
            .find_map(|e| match e {
                Event::Handoff(h) => Some(h),
                _ => None,
            })
            .unwrap()
    }

    fn line_up(queues: &Arc<NameQueues>, who: &Cancelled) -> SharedPlace {
        shared(queues.slot(&name_a()).line_up(who, successor))
    }

    /// The turn if it is free now (a try-once's first look).
    fn try_take(queues: &Arc<NameQueues>, who: &Cancelled) -> Option<Turn> {
        match queues.slot(&name_a()).line_up(who, successor) {
            Place::Turn(turn) => Some(turn),
            Place::Waiting(_) => None,
        }
    }

    fn shared(place: Place) -> SharedPlace {
        Arc::new(Mutex::new(Some(place)))
    }

    async fn take_until(
        queues: &Arc<NameQueues>,
        who: &Cancelled,
        deadline: Option<tokio::time::Instant>,
    ) -> Option<Turn> {
        let place = shared(queues.slot(&name_a()).line_up(who, successor));
        match super::take_until(&place, deadline).await {
            Waited::Turn(turn) => Some(turn),
            Waited::GaveUp | Waited::Left => None,
            Waited::HandedOver(..) => panic!("nobody hands over here"),
        }
    }

    #[tokio::test]
    async fn fifo_and_cleanup() {
        let queues = Arc::new(NameQueues::default());
        let first = try_take(&queues, &who()).unwrap();
        assert!(try_take(&queues, &who()).is_none());
        let waiting = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { take_until(&queues, &who(), None).await }
        });
        tokio::task::yield_now().await;
        drop(first);
        let second = waiting.await.unwrap().unwrap();
        assert_eq!(queues.len(), 1);
        drop(second);
        assert_eq!(queues.len(), 0);
    }

    /// A waiter whose turn came while nobody polled for it, and which then
    /// leaves as the name's last user, leaves no entry behind: its turn
    /// future (which holds the entry) goes before its slot.
    #[test]
    fn a_waiter_leaving_last_removes_the_entry() {
        let queues = Arc::new(NameQueues::default());
        let holder = try_take(&queues, &who()).unwrap();
        let place = line_up(&queues, &who());
        drop(holder);
        drop(place);
        assert_eq!(queues.len(), 0);
        assert!(
            try_take(&queues, &who()).is_some(),
            "the turn is free again"
        );
    }

    /// The order is the order of `line_up` calls, not of the tasks that
    /// wait: here they are spawned in reverse.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_are_served_in_the_order_they_lined_up() {
        let queues = Arc::new(NameQueues::default());
        let first = try_take(&queues, &who()).unwrap();
        let places: Vec<(usize, SharedPlace)> = (0..200)
            .map(
                |i| match queues.slot(&name_a()).line_up(&who(), successor) {
                    place @ Place::Waiting(_) => (i, shared(place)),
                    Place::Turn(_) => panic!("the turn is held"),
                },
            )
            .collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, place) in places.into_iter().rev() {
            let tx = tx.clone();
            tokio::spawn(async move {
                let Waited::Turn(turn) = super::take_until(&place, None).await else {
                    panic!("no deadline, not cancelled");
                };
                tx.send(i).unwrap();
                drop(turn);
            });
        }
        drop(tx);
        drop(first);
        let mut served = Vec::new();
        while let Some(i) = rx.recv().await {
            served.push(i);
        }
        assert_eq!(served, (0..200).collect::<Vec<_>>());
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_deadline_only_a_cancelled_holder_is_waited_for() {
        let queues = Arc::new(NameQueues::default());
        let now = tokio::time::Instant::now;
        // A live holder: a try-once gives up at once, a bounded wait at its
        // deadline.
        let held = try_take(&queues, &who()).unwrap();
        assert!(take_until(&queues, &who(), Some(now())).await.is_none());
        let bound = now() + Duration::from_millis(50);
        assert!(take_until(&queues, &who(), Some(bound)).await.is_none());
        assert_eq!(now(), bound);
        drop(held);

        // A cancelled holder: the try-once waits for it and gets the turn.
        let cancelled = who();
        let held = try_take(&queues, &cancelled).unwrap();
        cancelled.store(true, Ordering::Release);
        let trying = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { take_until(&queues, &who(), Some(now())).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!trying.is_finished());
        drop(held);
        assert!(trying.await.unwrap().is_some());

        // ...unless another local waiter was queued first: that one is
        // next, and the try-once gives up instead of waiting for it too.
        let cancelled = who();
        let held = try_take(&queues, &cancelled).unwrap();
        let first = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { take_until(&queues, &who(), None).await }
        });
        tokio::task::yield_now().await;
        cancelled.store(true, Ordering::Release);
        let trying = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { take_until(&queues, &who(), Some(now())).await }
        });
        tokio::task::yield_now().await;
        assert!(!trying.is_finished());
        drop(held);
        assert!(trying.await.unwrap().is_none());
        drop(first.await.unwrap().unwrap());
        assert_eq!(queues.len(), 0);
    }

    fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
    }

    /// The fast path's drop-mid-flight loop, without Redis: the holder only
    /// compensates (cancelled), the next acquire was lined up and its task
    /// started waiting, then its caller dropped it too, before that task
    /// ran again. A try-once behind both must get the turn when the holder
    /// leaves, not find it handed to the waiter nobody waits for.
    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_whose_task_already_waits_leaves_the_line_at_once() {
        let queues = Arc::new(NameQueues::default());
        let holder = who();
        let held = try_take(&queues, &holder).unwrap();
        holder.store(true, Ordering::Release);

        let dropped = who();
        let place = shared(queues.slot(&name_a()).line_up(&dropped, successor));
        let mut waiting = Box::pin(super::take_until(&place, None));
        assert!(poll_once(&mut waiting).is_pending(), "behind the holder");
        // The caller's drop (`Acquiring`), while its task is not running.
        dropped.store(true, Ordering::Release);
        let left = place.lock().unwrap().take();
        assert!(matches!(left, Some(Place::Waiting(_))));
        drop(left);

        let now = tokio::time::Instant::now;
        let trying = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { take_until(&queues, &who(), Some(now())).await }
        });
        tokio::task::yield_now().await;
        assert!(!trying.is_finished(), "waits for the cancelled holder");
        drop(held);
        let turn = trying.await.unwrap();
        assert!(
            turn.is_some(),
            "the try-once was turned away by a dropped acquire"
        );
        // The dropped waiter's task, when it runs, finds it left.
        assert!(matches!(poll_once(&mut waiting), Poll::Ready(Waited::Left)));
        drop(waiting);
        drop(turn);
        assert_eq!(queues.len(), 0);
    }

    /// A wait that gives up (or whose task stops) leaves the line even while
    /// the caller still holds its handle on the place.
    #[tokio::test(start_paused = true)]
    async fn a_wait_that_ends_leaves_the_line() {
        let queues = Arc::new(NameQueues::default());
        let held = try_take(&queues, &who()).unwrap();
        let place = shared(queues.slot(&name_a()).line_up(&who(), successor));
        let now = tokio::time::Instant::now();
        assert!(matches!(
            super::take_until(&place, Some(now)).await,
            Waited::GaveUp
        ));
        assert!(place.lock().unwrap().is_none());
        let place2 = shared(queues.slot(&name_a()).line_up(&who(), successor));
        let mut waiting = Box::pin(super::take_until(&place2, None));
        assert!(poll_once(&mut waiting).is_pending());
        drop(waiting);
        assert!(place2.lock().unwrap().is_none());
        drop(held);
        // Nobody is left in line before us: the turn is free.
        let turn = try_take(&queues, &who()).expect("the line was left");
        drop(turn);
        drop((place, place2));
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test]
    async fn a_release_hands_its_turn_to_the_first_waiter_whose_caller_still_waits() {
        let queues = Arc::new(NameQueues::default());
        let held = try_take(&queues, &who()).unwrap();
        let gone = who();
        let cancelled = line_up(&queues, &gone);
        gone.store(true, Ordering::Release); // its caller left, its task has not run
        let next = line_up(&queues, &who());
        let behind = line_up(&queues, &who());
        let promise = held.promise_next().expect("a live waiter");
        let waiting = tokio::spawn(async move { super::take_until(&next, None).await });
        tokio::task::yield_now().await;
        held.hand_over(promise, handoff());
        match waiting.await.unwrap() {
            Waited::HandedOver(turn, handoff) => {
                assert_eq!(handoff.handed_over(), 1);
                // The cancelled caller's drop leaves the line; the turn then
                // passes on as usual.
                drop(cancelled.lock().unwrap().take());
                let after = tokio::spawn(async move { super::take_until(&behind, None).await });
                tokio::task::yield_now().await;
                assert!(!after.is_finished(), "the turn is still the handed one");
                drop(turn);
                assert!(matches!(after.await.unwrap(), Waited::Turn(_)));
            }
            _ => panic!("not handed over"),
        }
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test]
    async fn a_promise_dropped_undelivered_puts_the_waiter_back_at_the_head() {
        let queues = Arc::new(NameQueues::default());
        let held = try_take(&queues, &who()).unwrap();
        let first = line_up(&queues, &who());
        let _second = line_up(&queues, &who());
        let promise = held.promise_next().unwrap();
        drop(promise); // the release was refused: no handoff
        let again = held.promise_next().unwrap();
        let first_candidate = first.lock().unwrap().as_ref().unwrap().candidate().unwrap();
        assert!(Arc::ptr_eq(
            again.candidate.as_ref().unwrap(),
            &first_candidate
        ));
        drop(again);
        let waiting = tokio::spawn(async move { super::take_until(&first, None).await });
        tokio::task::yield_now().await;
        drop(held);
        assert!(matches!(waiting.await.unwrap(), Waited::Turn(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_promised_waiter_waits_past_its_deadline_for_the_handoff() {
        let queues = Arc::new(NameQueues::default());
        let held = try_take(&queues, &who()).unwrap();
        let place = line_up(&queues, &who());
        let promise = held.promise_next().unwrap();
        let now = tokio::time::Instant::now();
        let waiting = tokio::spawn(async move { super::take_until(&place, Some(now)).await });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(
            !waiting.is_finished(),
            "a live holder, but the lock is coming"
        );
        held.hand_over(promise, handoff());
        assert!(matches!(waiting.await.unwrap(), Waited::HandedOver(..)));
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_once_promised_takes_delivery_to_give_it_back() {
        let queues = Arc::new(NameQueues::default());
        let held = try_take(&queues, &who()).unwrap();
        let gone = who();
        let place = line_up(&queues, &gone);
        let candidate = place.lock().unwrap().as_ref().unwrap().candidate().unwrap();
        let promise = held.promise_next().unwrap();
        // The caller's drop: flag set, place taken back (out of the fair
        // queue), while the release is in flight.
        gone.store(true, Ordering::Release);
        drop(place.lock().unwrap().take());
        let abandoning = tokio::spawn(async move { super::abandon(&candidate).await });
        tokio::task::yield_now().await;
        assert!(!abandoning.is_finished(), "it waits for the handoff");
        held.hand_over(promise, handoff());
        let (turn, handoff) = abandoning.await.unwrap().expect("delivered");
        assert_eq!(handoff.handed_over(), 1);
        // Its turn is a cancelled holder's: a try-once behind waits for it.
        assert!(queues.slot(&name_a()).entry().held_by_cancelled());
        drop(turn);
        assert_eq!(queues.len(), 0);

        // Not promised: out of line at once, and nobody promises it later.
        let held = try_take(&queues, &who()).unwrap();
        let place = line_up(&queues, &who());
        let candidate = place.lock().unwrap().as_ref().unwrap().candidate().unwrap();
        drop(place.lock().unwrap().take());
        assert!(super::abandon(&candidate).await.is_none());
        assert!(held.promise_next().is_none());
        drop(held);
        drop((place, candidate));
        assert_eq!(queues.len(), 0);
    }
}
