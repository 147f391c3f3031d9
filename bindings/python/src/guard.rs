//! Belt and braces for acquire futures that are dropped (asyncio cancel,
//! Ctrl-C): if the driver already produced a lease that nobody polled out
//! yet, release it instead of letting it sit until its TTL.
//!
//! The driver sends a compensating release when the caller left before the
//! grant; a grant that is already in the result channel when the future is
//! dropped was, at the time of writing, dropped unreleased. One last poll on drop shrinks that window to the
//! few instructions between that poll and the drop. It is harmless once the
//! driver handles it itself: a lease released twice is a no-op.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use fencelock::Error;

/// Results that may carry a lease.
pub trait Granted {
    fn lease(self) -> Option<fencelock::Lease>;
}

impl Granted for fencelock::Lease {
    fn lease(self) -> Option<fencelock::Lease> {
        Some(self)
    }
}

impl Granted for Option<fencelock::Lease> {
    fn lease(self) -> Option<fencelock::Lease> {
        self
    }
}

type Acquiring<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

/// Wraps an acquire future; see the module docs.
pub struct ReleaseIfDropped<T: Granted> {
    inner: Option<Acquiring<T>>,
}

impl<T: Granted> std::fmt::Debug for ReleaseIfDropped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReleaseIfDropped")
    }
}

impl<T: Granted> ReleaseIfDropped<T> {
    pub fn new(fut: impl Future<Output = Result<T, Error>> + Send + 'static) -> Self {
        ReleaseIfDropped {
            inner: Some(Box::pin(fut)),
        }
    }
}

impl<T: Granted> Future for ReleaseIfDropped<T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Pending;
        };
        let result = inner.as_mut().poll(cx);
        if result.is_ready() {
            self.inner = None;
        }
        result
    }
}

impl<T: Granted> Drop for ReleaseIfDropped<T> {
    fn drop(&mut self) {
        let Some(mut inner) = self.inner.take() else {
            return;
        };
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(Ok(granted)) = inner.as_mut().poll(&mut cx) {
            drop(inner);
            if let (Some(lease), Ok(handle)) =
                (granted.lease(), tokio::runtime::Handle::try_current())
            {
                handle.spawn(async move {
                    let _ = lease.release().await;
                });
            }
        }
    }
}
