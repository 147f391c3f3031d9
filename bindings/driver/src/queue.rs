//! The local FIFO: waiters of one client for one name line up behind a single
//! remote attempt. A fair tokio mutex per name is held from the attempt until
//! the lease is released, lost or dropped; the map entry disappears with the
//! last user, so idle names cost nothing.
//!
//! The entry also knows whether the acquire holding the turn was cancelled by
//! its caller (it then only finishes its compensating release): a try-once
//! or a bounded wait of the same client waits for such a holder to leave
//! instead of reporting `NotAcquired` for a lock nobody holds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as FairMutex, Notify, OwnedMutexGuard};

/// Set (once) when the acquire that owns it is cancelled by its caller.
pub(crate) type Cancelled = Arc<AtomicBool>;

/// One name's queue.
#[derive(Debug, Default)]
struct Entry {
    turn: Arc<FairMutex<()>>,
    /// The cancellation flag of the acquire holding the turn, if any.
    holder: Mutex<Option<Cancelled>>,
    /// Fires whenever a turn is given back.
    freed: Notify,
}

impl Entry {
    /// The turn is held by an acquire whose caller has gone away: it is only
    /// finishing its compensating release (or about to leave).
    fn held_by_cancelled(&self) -> bool {
        self.holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire))
    }
}

type Slots = HashMap<Box<[u8]>, Arc<Entry>>;

#[derive(Debug, Default)]
pub(crate) struct NameQueues {
    slots: Mutex<Slots>,
}

impl NameQueues {
    /// A place in `name`'s queue (not yet taken).
    pub(crate) fn slot(self: &Arc<Self>, name: &[u8]) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let entry = match slots.get(name) {
            Some(entry) => Arc::clone(entry),
            None => {
                let entry = Arc::new(Entry::default());
                slots.insert(name.into(), Arc::clone(&entry));
                entry
            }
        };
        Slot {
            entry: Some(entry),
            queues: Arc::clone(self),
            name: name.into(),
        }
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
    name: Box<[u8]>,
}

impl Slot {
    fn entry(&self) -> &Entry {
        self.entry.as_ref().expect("slot entry present until drop")
    }

    fn into_turn(self, guard: OwnedMutexGuard<()>, who: Cancelled) -> Turn {
        *self
            .entry()
            .holder
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&who));
        Turn {
            guard: Some(guard),
            who,
            slot: self,
        }
    }

    /// The turn if it is free right now.
    pub(crate) fn try_take(self, who: &Cancelled) -> Result<Turn, Slot> {
        match Arc::clone(&self.entry().turn).try_lock_owned() {
            Ok(guard) => Ok(self.into_turn(guard, Arc::clone(who))),
            Err(_) => Err(self),
        }
    }

    /// Wait for our turn (FIFO) until `deadline` (`None`: no bound). Past
    /// the deadline, keep waiting only while the turn is held by an acquire
    /// of this client that was cancelled: it is only finishing its
    /// compensating release, so the name is not really busy, and a try-once
    /// (`deadline` = now) or a short wait must not report `NotAcquired`
    /// because of it. Once that acquire leaves, the turn is ours if we are
    /// next in line; if another local waiter was ahead of us, `None`.
    /// Cancel-safe: dropping the future leaves the queue.
    pub(crate) async fn take_until(
        self,
        who: &Cancelled,
        deadline: Option<tokio::time::Instant>,
    ) -> Option<Turn> {
        let guard = {
            let entry = self.entry();
            let lock = Arc::clone(&entry.turn).lock_owned();
            tokio::pin!(lock);
            let mut past = deadline.is_some_and(|d| d <= tokio::time::Instant::now());
            let expired = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(expired);
            loop {
                // Registered before the holder is looked at, so a turn given
                // back after the look still wakes us.
                let freed = entry.freed.notified();
                tokio::pin!(freed);
                freed.as_mut().enable();
                let give_up = past && !entry.held_by_cancelled();
                tokio::select! {
                    biased;
                    guard = &mut lock => break guard,
                    () = std::future::ready(()), if give_up => return None,
                    () = &mut expired, if !past => past = true,
                    () = &mut freed, if past => {}
                }
            }
        };
        Some(self.into_turn(guard, Arc::clone(who)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.entry.take());
        let mut slots = self.queues.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = slots.get(&self.name) {
            // Clones are only made under this lock, so a count of one means
            // nobody holds or waits for this name.
            if Arc::strong_count(entry) == 1 {
                slots.remove(&self.name);
            }
        }
    }
}

/// Our turn: the next local waiter for the name runs when this is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    guard: Option<OwnedMutexGuard<()>>,
    who: Cancelled,
    slot: Slot,
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Hand the turn on (to the first queued waiter, if any) before the
        // slot checks whether it is idle; then forget our flag unless the
        // next holder already put its own, and wake those that wait for a
        // cancelled holder to leave.
        drop(self.guard.take());
        let entry = self.slot.entry();
        {
            let mut holder = entry.holder.lock().unwrap_or_else(|e| e.into_inner());
            if holder.as_ref().is_some_and(|h| Arc::ptr_eq(h, &self.who)) {
                *holder = None;
            }
        }
        entry.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn who() -> Cancelled {
        Arc::new(AtomicBool::new(false))
    }

    #[tokio::test]
    async fn fifo_and_cleanup() {
        let queues = Arc::new(NameQueues::default());
        let first = queues.slot(b"a").try_take(&who()).unwrap();
        assert!(queues.slot(b"a").try_take(&who()).is_err());
        let waiting = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { queues.slot(b"a").take_until(&who(), None).await }
        });
        tokio::task::yield_now().await;
        drop(first);
        let second = waiting.await.unwrap().unwrap();
        assert_eq!(queues.len(), 1);
        drop(second);
        assert_eq!(queues.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_deadline_only_a_cancelled_holder_is_waited_for() {
        let queues = Arc::new(NameQueues::default());
        let now = tokio::time::Instant::now;
        // A live holder: a try-once gives up at once, a bounded wait at its
        // deadline.
        let held = queues.slot(b"a").try_take(&who()).unwrap();
        assert!(queues
            .slot(b"a")
            .take_until(&who(), Some(now()))
            .await
            .is_none());
        let bound = now() + Duration::from_millis(50);
        assert!(queues
            .slot(b"a")
            .take_until(&who(), Some(bound))
            .await
            .is_none());
        assert_eq!(now(), bound);
        drop(held);

        // A cancelled holder: the try-once waits for it and gets the turn.
        let cancelled = who();
        let held = queues.slot(b"a").try_take(&cancelled).unwrap();
        cancelled.store(true, Ordering::Release);
        let trying = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { queues.slot(b"a").take_until(&who(), Some(now())).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!trying.is_finished());
        drop(held);
        assert!(trying.await.unwrap().is_some());

        // ...unless another local waiter was queued first: that one is
        // next, and the try-once gives up instead of waiting for it too.
        let cancelled = who();
        let held = queues.slot(b"a").try_take(&cancelled).unwrap();
        let first = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { queues.slot(b"a").take_until(&who(), None).await }
        });
        tokio::task::yield_now().await;
        cancelled.store(true, Ordering::Release);
        let trying = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { queues.slot(b"a").take_until(&who(), Some(now())).await }
        });
        tokio::task::yield_now().await;
        assert!(!trying.is_finished());
        drop(held);
        assert!(trying.await.unwrap().is_none());
        drop(first.await.unwrap().unwrap());
        assert_eq!(queues.len(), 0);
    }
}
