//! [`Outbox`]: the lock's queue of commands or events to drain. A lease
//! mostly has one of either waiting at a time (one node's command, one
//! event), so one lives inline and only more spill to the heap: a held
//! lease keeps no queue buffer, and a single-node cycle allocates none.

use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(super) enum Outbox<T> {
    #[default]
    Empty,
    One(T),
    Many(VecDeque<T>),
}

impl<T> Outbox<T> {
    pub(super) fn push_back(&mut self, item: T) {
        *self = match std::mem::take(self) {
            Outbox::Empty => Outbox::One(item),
            Outbox::One(first) => Outbox::Many(VecDeque::from([first, item])),
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

impl<T> Extend<T> for Outbox<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            self.push_back(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Outbox;

    #[test]
    fn keeps_arrival_order_inline_and_spilled() {
        let mut outbox = Outbox::default();
        assert_eq!(outbox.pop_front(), None::<u32>);
        outbox.push_back(1);
        assert!(matches!(outbox, Outbox::One(1)));
        outbox.extend([2, 3]);
        assert_eq!(outbox.pop_front(), Some(1));
        outbox.push_back(4);
        assert_eq!(outbox.pop_front(), Some(2));
        assert_eq!(outbox.pop_front(), Some(3));
        assert_eq!(outbox.pop_front(), Some(4));
        assert!(matches!(outbox, Outbox::Empty));
        assert_eq!(outbox.pop_front(), None);
    }
}
