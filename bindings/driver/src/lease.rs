//! [`Lease`]: a held lock. Getters are synchronous reads of state the lease's
//! actor publishes; `extend`/`release` are requests to that actor.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fencelock_core::{Error, LockName, Ttl};
use tokio::sync::{mpsc, oneshot};

use crate::driver::{Request, Shared};

/// A held lock. Dropping it without [`Lease::release`] stops any
/// auto-renewal and leaves the key to expire by its TTL.
///
/// `Debug` never shows the token.
pub struct Lease {
    name: LockName,
    token: String,
    fence: u64,
    ttl: Duration,
    auto_renew: bool,
    shared: Arc<Shared>,
    requests: mpsc::UnboundedSender<Request>,
}

impl Lease {
    pub(crate) fn new(
        name: LockName,
        token: String,
        fence: u64,
        ttl: Duration,
        auto_renew: bool,
        shared: Arc<Shared>,
        requests: mpsc::UnboundedSender<Request>,
    ) -> Lease {
        Lease {
            name,
            token,
            fence,
            ttl,
            auto_renew,
            shared,
            requests,
        }
    }

    /// The acquire caller has it now (see `Shared::claimed`).
    pub(crate) fn claim(&self) {
        self.shared.claim();
    }

    /// The lock's name, as given to `acquire`.
    pub fn name(&self) -> &[u8] {
        self.name.as_bytes()
    }

    /// The name as the core's validated type (for messages).
    pub fn lock_name(&self) -> &LockName {
        &self.name
    }

    /// The token stored in Redis; never printed by `Debug`.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token: strictly increasing across every successful
    /// acquire of this name. Pass it to the resource you protect.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The TTL the lock was taken with (auto-renewal and `extend(None)` use it).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether the lease renews itself every ttl/3.
    pub fn auto_renew(&self) -> bool {
        self.auto_renew
    }

    /// Time left before the lease must be assumed lost (clock drift already
    /// taken off); zero once lost or released.
    pub fn valid_for(&self) -> Duration {
        self.shared.valid_for()
    }

    /// Whether the lease is known lost (renewal failed or validity ran out).
    pub fn lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// Resolves when the lease is lost (renewal failed or validity ran out);
    /// never resolves if it is released first.
    pub async fn lost_signal(&self) {
        let mut lost = self.shared.lost_watch();
        if lost.wait_for(|lost| *lost).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Extend to `ttl` (default: the lease's ttl) from now; `LockLost` if gone.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<(), Error> {
        let ttl = ttl.map(Ttl::from_duration).transpose()?;
        let (tx, rx) = oneshot::channel();
        self.ask(Request::Extend(ttl, tx), rx).await
    }

    /// Release; `LockLost` if the lease was lost; a second call is a no-op.
    pub async fn release(&self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.ask(Request::Release(tx), rx).await
    }

    async fn ask(
        &self,
        request: Request,
        rx: oneshot::Receiver<Result<(), Error>>,
    ) -> Result<(), Error> {
        if self.requests.send(request).is_err() {
            return Err(self.gone());
        }
        rx.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// The actor is gone: only after the client was closed.
    fn gone(&self) -> Error {
        if self.lost() {
            Error::LockLost {
                name: self.name.clone(),
            }
        } else {
            Error::redis(Some(&self.name), "the client is closed")
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .field("fence", &self.fence)
            .field("ttl", &self.ttl)
            .field("valid_for", &self.valid_for())
            .field("lost", &self.lost())
            .field("auto_renew", &self.auto_renew)
            .finish()
    }
}
