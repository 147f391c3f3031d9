//! [`Submissions`]: the calls an event-loop thread (Node's JS thread, an
//! asyncio loop) hands to its runtime thread ([`crate::runtime_thread`]),
//! sent in batches.
//!
//! Handing a task to another thread's runtime writes to that runtime's
//! wake-up fd, and wakes the thread if it sleeps: a system call and often a
//! context switch per call. When one turn of the loop starts many calls (64
//! acquires resolve in one batch, and each caller goes on to release), they
//! are queued and one spawn at the end of the turn carries them all. A call
//! made while none of this loop's calls is in flight starts at once: it
//! would wait for nobody.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One event loop's calls on their way to its runtime. Only the loop's
/// thread submits and flushes; the runtime's threads only count the calls
/// that finish.
pub struct Submissions {
    runtime: Handle,
    queued: Mutex<Vec<Task>>,
    in_flight: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Submissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submissions")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// What [`Submissions::submit`] did with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// Running: nothing else was in flight.
    Started,
    /// Queued behind calls in flight; `first` of its batch: the loop must
    /// call [`Submissions::flush`] once the current turn's calls are made.
    Queued { first: bool },
}

impl Submissions {
    pub fn new(runtime: Handle) -> Self {
        Submissions {
            runtime,
            queued: Mutex::new(Vec::new()),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Run `call` on the runtime: now, or with the next [`flush`](Self::flush).
    pub fn submit(&self, call: impl Future<Output = ()> + Send + 'static) -> Submitted {
        // Counted until it ends, however it ends. A queued call counts too,
        // so no later call can start before it.
        let (counted, others) = InFlight::enter(&self.in_flight);
        let call = async move {
            let _counted = counted;
            call.await;
        };
        if others == 0 {
            self.runtime.spawn(call);
            return Submitted::Started;
        }
        let mut queued = self.queued.lock().unwrap_or_else(|p| p.into_inner());
        queued.push(Box::pin(call));
        Submitted::Queued {
            first: queued.len() == 1,
        }
    }

    /// Start every queued call: one spawn for the batch.
    pub fn flush(&self) {
        let mut calls = std::mem::take(&mut *self.queued.lock().unwrap_or_else(|p| p.into_inner()));
        match calls.len() {
            0 => {}
            1 => drop(self.runtime.spawn(calls.pop().expect("one call"))),
            _ => drop(self.runtime.spawn(async move {
                // On the runtime's own thread: local spawns, no wake-up.
                for call in calls {
                    tokio::spawn(call);
                }
            })),
        }
    }
}

/// One call in flight, from its submission until it ends.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// The new call's guard, and how many were in flight before it.
    fn enter(count: &Arc<AtomicUsize>) -> (Self, usize) {
        let others = count.fetch_add(1, Ordering::AcqRel);
        (InFlight(Arc::clone(count)), others)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    const BOUND: Duration = Duration::from_secs(5);

    #[test]
    fn calls_behind_one_in_flight_wait_for_the_flush_and_keep_their_order() {
        let calls = Submissions::new(crate::runtime_thread("submissions-test"));
        let (started, seen) = mpsc::channel();
        let (end_first, first_ends) = tokio::sync::oneshot::channel::<()>();

        let tx = started.clone();
        let first = calls.submit(async move {
            tx.send(0).unwrap();
            let _ = first_ends.await;
        });
        assert_eq!(first, Submitted::Started);
        assert_eq!(seen.recv_timeout(BOUND), Ok(0));

        for i in 1..=3 {
            let tx = started.clone();
            let queued = calls.submit(async move { tx.send(i).unwrap() });
            assert_eq!(queued, Submitted::Queued { first: i == 1 });
        }
        // Queued, not handed to the runtime: none of them can have run.
        assert_eq!(seen.try_recv(), Err(mpsc::TryRecvError::Empty));
        calls.flush();
        let order: Vec<i32> = (0..3).map(|_| seen.recv_timeout(BOUND).unwrap()).collect();
        assert_eq!(order, [1, 2, 3]);

        // Once every call has ended, the next one starts at once again.
        end_first.send(()).unwrap();
        let deadline = Instant::now() + BOUND;
        while calls.in_flight.load(Ordering::Acquire) > 0 {
            assert!(Instant::now() < deadline, "the calls never ended");
            std::thread::yield_now();
        }
        let tx = started.clone();
        assert_eq!(
            calls.submit(async move { tx.send(4).unwrap() }),
            Submitted::Started
        );
        assert_eq!(seen.recv_timeout(BOUND), Ok(4));
    }
}
