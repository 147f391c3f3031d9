//! The local FIFO: waiters of one client for one name line up behind a single
//! remote attempt. A fair tokio mutex per name is held from the attempt until
//! the lease is released, lost or dropped; the map entry disappears with the
//! last user, so idle names cost nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as FairMutex, OwnedMutexGuard};

type Slots = HashMap<Box<[u8]>, Arc<FairMutex<()>>>;

#[derive(Debug, Default)]
pub(crate) struct NameQueues {
    slots: Mutex<Slots>,
}

impl NameQueues {
    /// A place in `name`'s queue (not yet taken).
    pub(crate) fn slot(self: &Arc<Self>, name: &[u8]) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mutex = match slots.get(name) {
            Some(mutex) => Arc::clone(mutex),
            None => {
                let mutex = Arc::new(FairMutex::new(()));
                slots.insert(name.into(), Arc::clone(&mutex));
                mutex
            }
        };
        Slot {
            mutex: Some(mutex),
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
    mutex: Option<Arc<FairMutex<()>>>,
    queues: Arc<NameQueues>,
    name: Box<[u8]>,
}

impl Slot {
    fn mutex(&self) -> Arc<FairMutex<()>> {
        Arc::clone(self.mutex.as_ref().expect("slot mutex present until drop"))
    }

    pub(crate) fn try_take(self) -> Result<Turn, Slot> {
        match self.mutex().try_lock_owned() {
            Ok(guard) => Ok(Turn {
                guard: Some(guard),
                _slot: self,
            }),
            Err(_) => Err(self),
        }
    }

    /// Wait for our turn (FIFO). Cancel-safe: dropping the future leaves the
    /// queue.
    pub(crate) async fn take(self) -> Turn {
        let guard = self.mutex().lock_owned().await;
        Turn {
            guard: Some(guard),
            _slot: self,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.mutex.take());
        let mut slots = self.queues.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mutex) = slots.get(&self.name) {
            // Clones are only made under this lock, so a count of one means
            // nobody holds or waits for this name.
            if Arc::strong_count(mutex) == 1 {
                slots.remove(&self.name);
            }
        }
    }
}

/// Our turn: the next local waiter for the name runs when this is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    guard: Option<OwnedMutexGuard<()>>,
    _slot: Slot,
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Release the mutex before the slot checks whether it is idle.
        drop(self.guard.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fifo_and_cleanup() {
        let queues = Arc::new(NameQueues::default());
        let first = queues.slot(b"a").try_take().unwrap();
        assert!(queues.slot(b"a").try_take().is_err());
        let waiting = tokio::spawn({
            let queues = Arc::clone(&queues);
            async move { queues.slot(b"a").take().await }
        });
        tokio::task::yield_now().await;
        drop(first);
        let second = waiting.await.unwrap();
        assert_eq!(queues.len(), 1);
        drop(second);
        assert_eq!(queues.len(), 0);
    }
}
