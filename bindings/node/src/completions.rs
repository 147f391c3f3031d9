//! The results of the addon's asynchronous calls, delivered to JavaScript
//! in batches: one wake-up of the JS thread per batch, where napi's
//! `spawn_future` made a promise, a threadsafe function and two tokio tasks
//! per call and woke the JS thread once for each.
//!
//! Protocol with `node/calls.js`: an asynchronous call takes a small integer
//! id from JavaScript, starts its tokio task and returns at once. The task
//! pushes `(id, outcome)` into its environment's [`Queue`]; the first push of
//! a batch rings the doorbell, the one threadsafe function of the
//! environment. Its JavaScript side calls [`Completions::take`], which turns
//! the batch into `[id, value, id, value, ...]` on the JS thread (a failure
//! is `~id` and its tagged message) and settles the promises.
//!
//! Calls go the other way in batches too: one started while others of the
//! environment are in flight waits, with the rest of the current JS job's
//! calls, for the `flush()` that `calls.js` makes from a microtask.
//!
//! The doorbell is weak: it never keeps the process alive. `calls.js` keeps
//! a referenced handle while any call is pending, so a pending promise does.

use std::future::Future;
use std::sync::{Arc, Mutex};

use fencelock::Submissions;
use napi::bindgen_prelude::{Array, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Status};
use napi_derive::napi;

/// Called with no arguments when a batch is ready. Weak (unref'd).
type Doorbell = ThreadsafeFunction<(), (), (), Status, false, true>;

/// Writes a call's value into the batch, on the JS thread.
type Deliver = Box<dyn FnOnce(&mut Array<'_>, u32) -> napi::Result<()> + Send>;

/// One call's outcome: its value, or its error's (tagged) message.
type Outcome = Result<Deliver, String>;

/// One environment's finished calls, waiting for the JS thread. Tokio tasks
/// only lock it to push; the JS thread only to take the whole batch.
pub struct Queue {
    calls: Submissions,
    done: Mutex<Vec<(u32, Outcome)>>,
    doorbell: Doorbell,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.done.lock().map_or(0, |done| done.len());
        f.debug_struct("Queue").field("waiting", &waiting).finish()
    }
}

impl Queue {
    /// Run `call` on the runtime; its outcome settles promise `id`.
    pub fn spawn<T, F>(self: &Arc<Self>, id: u32, call: F)
    where
        T: ToNapiValue + Send + 'static,
        F: Future<Output = napi::Result<T>> + Send + 'static,
    {
        self.spawn_then(id, call, |value| value);
    }

    /// [`Queue::spawn`], with the value turned into its JS form by
    /// `deliver` on the JS thread, when the promise is settled: a value that
    /// never gets there (the environment went away) is dropped unconverted.
    pub fn spawn_then<T, U, F>(self: &Arc<Self>, id: u32, call: F, deliver: fn(T) -> U)
    where
        T: Send + 'static,
        U: ToNapiValue + 'static,
        F: Future<Output = napi::Result<T>> + Send + 'static,
    {
        let pending = Pending {
            id,
            queue: Some(Arc::clone(self)),
        };
        // Started now, or by the `flush()` calls.js makes at the end of
        // the current job (it asks for one after every call).
        let _ = self.calls.submit(async move {
            let outcome = call.await;
            pending.finish(match outcome {
                Ok(value) => Ok(Box::new(move |batch: &mut Array<'_>, at| {
                    batch.set(at, deliver(value))
                })),
                Err(error) => Err(error.reason),
            });
        });
    }

    /// Queue an outcome; the first of a batch rings the doorbell.
    fn push(&self, id: u32, outcome: Outcome) {
        let first = {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            done.push((id, outcome));
            done.len() == 1
        };
        if first {
            // Fails only once the environment is gone: nobody is waiting.
            self.doorbell
                .call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// A call's hold on its promise. Whatever ends the task (its outcome, a
/// panic, the runtime shutting down), the promise is settled, so it never
/// keeps the process waiting.
struct Pending {
    id: u32,
    queue: Option<Arc<Queue>>,
}

impl Pending {
    fn finish(mut self, outcome: Outcome) {
        if let Some(queue) = self.queue.take() {
            queue.push(self.id, outcome);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            let message = "the operation stopped unexpectedly (a panic in the addon)";
            queue.push(self.id, Err(message.to_owned()));
        }
    }
}

/// The environment's queue, made once by `calls.js` with its drain
/// function as the doorbell.
#[napi]
#[derive(Debug)]
pub struct Completions {
    queue: Arc<Queue>,
}

#[napi]
impl Completions {
    #[napi(constructor)]
    pub fn new(#[napi(ts_arg_type = "() => void")] doorbell: Doorbell) -> Self {
        Completions {
            queue: Arc::new(Queue {
                calls: Submissions::new(crate::runtime::handle().clone()),
                done: Mutex::new(Vec::new()),
                doorbell,
            }),
        }
    }

    /// Start the calls queued since the last flush (see `Submissions`).
    #[napi]
    pub fn flush(&self) {
        self.queue.calls.flush();
    }

    /// The finished calls since the last take: `[id, value, ...]`, a failed
    /// call as `~id` (negative) and its message.
    #[napi(ts_return_type = "Array<unknown>")]
    pub fn take<'env>(&self, env: &'env Env) -> napi::Result<Array<'env>> {
        let done = std::mem::take(&mut *self.queue.done.lock().unwrap_or_else(|e| e.into_inner()));
        let mut batch = env.create_array(2 * done.len() as u32)?;
        for (i, (id, outcome)) in done.into_iter().enumerate() {
            let at = 2 * i as u32;
            // A value that cannot be made still settles its promise.
            let delivered = outcome.and_then(|deliver| {
                deliver(&mut batch, at + 1).map_err(|e| format!("fencelock: {}", e.reason))
            });
            match delivered {
                Ok(()) => batch.set(at, id)?,
                Err(message) => {
                    batch.set(at, -1 - i64::from(id))?;
                    batch.set(at + 1, message)?;
                }
            }
        }
        Ok(batch)
    }
}

impl Completions {
    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }
}
