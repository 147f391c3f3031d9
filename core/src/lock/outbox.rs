//! [`Outbox`]: the lock's queue of commands or events to drain. A lease
//! mostly has one of either waiting at a time (one node's command, one
//! event), so one lives inline and only more spill to the heap: a held
//! lease keeps no queue buffer, and a single-node cycle allocates none.
//! Events wait as [`Queued`]: a held lease keeps its lock, queues and all,
//! so the queue is as small as the events every cycle has.

use std::collections::VecDeque;

use crate::{Event, Instant};

#[derive(Debug, Default)]
pub(super) enum Outbox<T> {
    #[default]
    Empty,
    One(T),
    /// Boxed: the inline item sets the size, not a spare `VecDeque` (a
    /// held lease keeps an empty outbox; spilling is for Redlock rounds).
    #[allow(clippy::box_collection)]
    Many(Box<VecDeque<T>>),
}

impl<T> Outbox<T> {
    pub(super) fn push_back(&mut self, item: impl Into<T>) {
        let item = item.into();
        *self = match std::mem::take(self) {
            Outbox::Empty => Outbox::One(item),
            Outbox::One(first) => Outbox::Many(Box::new(VecDeque::from([first, item]))),
            Outbox::Many(mut queue) => {
                queue.push_back(item);
                Outbox::Many(queue)
            }
        };
    }

    /// The oldest item; the heap buffer goes once the queue is empty.
    pub(super) fn pop_front(&mut self) -> Option<T> {
        match self {
            Outbox::Empty => None,
            Outbox::One(_) => match std::mem::take(self) {
                Outbox::One(item) => Some(item),
                _ => unreachable!("matched above"),
            },
            Outbox::Many(queue) => {
                let item = queue.pop_front();
                if queue.is_empty() {
                    *self = Outbox::Empty;
                }
                item
            }
        }
    }
}

impl<T, U: Into<T>> Extend<U> for Outbox<T> {
    fn extend<I: IntoIterator<Item = U>>(&mut self, items: I) {
        for item in items {
            self.push_back(item);
        }
    }
}

/// An [`Event`] waiting to be drained: those of every acquire and release
/// inline (24 bytes), the rest (an error, a handoff: 56 bytes) boxed.
#[derive(Debug)]
pub(super) enum Queued {
    Acquired { fence: u64, valid_until: Instant },
    Extended { valid_until: Instant },
    Released,
    Subscribe,
    Unsubscribe,
    NotPublished,
    Lost,
    Other(Box<Event>),
}

impl From<Event> for Queued {
    fn from(event: Event) -> Queued {
        match event {
            Event::Acquired { fence, valid_until } => Queued::Acquired { fence, valid_until },
            Event::Extended { valid_until } => Queued::Extended { valid_until },
            Event::Released(Ok(())) => Queued::Released,
            Event::Subscribe => Queued::Subscribe,
            Event::Unsubscribe => Queued::Unsubscribe,
            Event::NotPublished => Queued::NotPublished,
            Event::Lost => Queued::Lost,
            other => Queued::Other(Box::new(other)),
        }
    }
}

impl From<Queued> for Event {
    fn from(queued: Queued) -> Event {
        match queued {
            Queued::Acquired { fence, valid_until } => Event::Acquired { fence, valid_until },
            Queued::Extended { valid_until } => Event::Extended { valid_until },
            Queued::Released => Event::Released(Ok(())),
            Queued::Subscribe => Event::Subscribe,
            Queued::Unsubscribe => Event::Unsubscribe,
            Queued::NotPublished => Event::NotPublished,
            Queued::Lost => Event::Lost,
            Queued::Other(event) => *event,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Outbox, Queued};
    use crate::{Error, Event, Instant};

    #[test]
    fn every_event_comes_back_as_queued() {
        let at = Instant::from_epoch(std::time::Duration::from_millis(5));
        let events = [
            Event::Acquired {
                fence: 7,
                valid_until: at,
            },
            Event::Extended { valid_until: at },
            Event::Released(Ok(())),
            Event::Released(Err(Error::invalid("x"))),
            Event::AcquireFailed(Error::invalid("y")),
            Event::ExtendFailed(Error::invalid("z")),
            Event::Subscribe,
            Event::Unsubscribe,
            Event::NotPublished,
            Event::Lost,
        ];
        for event in events {
            assert_eq!(Event::from(Queued::from(event.clone())), event);
        }
        assert_eq!(std::mem::size_of::<Outbox<Queued>>(), 24);
    }

    #[test]
    fn keeps_arrival_order_inline_and_spilled() {
        let mut outbox = Outbox::<u32>::default();
        assert_eq!(outbox.pop_front(), None);
        outbox.push_back(1u32);
        assert!(matches!(outbox, Outbox::One(1)));
        outbox.extend([2u32, 3]);
        assert_eq!(outbox.pop_front(), Some(1));
        outbox.push_back(4u32);
        assert_eq!(outbox.pop_front(), Some(2));
        assert_eq!(outbox.pop_front(), Some(3));
        assert_eq!(outbox.pop_front(), Some(4));
        assert!(matches!(outbox, Outbox::Empty));
        assert_eq!(outbox.pop_front(), None);
    }
}
