//! fencelock: Redis distributed locks with fencing tokens, Redlock and
//! auto-renewal. STUB: the public API is final, the bodies are being written.
//!
//! ```no_run
//! # async fn demo() -> Result<(), fencelock::Error> {
//! use std::time::Duration;
//! use fencelock::{Client, LockOptions};
//!
//! let client = Client::connect("redis://127.0.0.1:6379/0").await?;
//! let lease = client
//!     .acquire("invoice:42", &LockOptions::new(Duration::from_secs(10)).wait(Duration::from_secs(5)))
//!     .await?;
//! println!("fence {}", lease.fence());
//! lease.release().await?;
//! client.close().await;
//! # Ok(()) }
//! ```

use std::time::Duration;

pub use fencelock_core::{Error, Wait};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Connection settings; `Default` is what most users want.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Key prefix (default `fencelock:`); must not contain braces.
    pub prefix: String,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            prefix: fencelock_core::keys::DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }
}

/// How to take one lock. Validated when used.
#[derive(Clone, Debug)]
pub struct LockOptions {
    ttl: Duration,
    wait: Wait,
    auto_renew: bool,
}

impl LockOptions {
    /// `ttl`: how long the lock lives without renewal. Waits forever by default.
    pub fn new(ttl: Duration) -> Self {
        LockOptions {
            ttl,
            wait: Wait::Forever,
            auto_renew: false,
        }
    }
    /// Wait at most `wait`; `Duration::ZERO` tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Wait::Bounded(wait);
        self
    }
    pub fn wait_policy(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }
    /// Extend every ttl/3 in the background until released or lost.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.auto_renew = on;
        self
    }
}

/// URLs accepted by [`Client::connect`]: one (a single Redis) or several
/// independent nodes (Redlock).
pub trait IntoUrls {
    fn into_urls(self) -> Vec<String>;
}
impl IntoUrls for &str {
    fn into_urls(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}
impl IntoUrls for String {
    fn into_urls(self) -> Vec<String> {
        vec![self]
    }
}
impl<S: Into<String>> IntoUrls for Vec<S> {
    fn into_urls(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}
impl<S: Into<String> + Clone, const N: usize> IntoUrls for [S; N] {
    fn into_urls(self) -> Vec<String> {
        self.into_iter().map(Into::into).collect()
    }
}

/// A connection to one Redis or to N Redlock nodes. Cheap to clone; all
/// clones and all leases share one multiplexed connection per node.
#[derive(Clone, Debug)]
pub struct Client {}

impl Client {
    pub async fn connect(urls: impl IntoUrls) -> Result<Client> {
        Self::connect_with(urls, ClientOptions::default()).await
    }
    pub async fn connect_with(urls: impl IntoUrls, options: ClientOptions) -> Result<Client> {
        let _ = (urls.into_urls(), options);
        unimplemented!()
    }
    /// Acquire `name`, waiting as `options` allow: `NotAcquired` when the wait
    /// runs out. Dropping the future leaves no lock behind.
    pub async fn acquire(&self, name: impl AsRef<[u8]>, options: &LockOptions) -> Result<Lease> {
        let _ = (name.as_ref(), options);
        unimplemented!()
    }
    /// One attempt: `Ok(None)` if someone else holds the lock.
    pub async fn try_acquire(
        &self,
        name: impl AsRef<[u8]>,
        options: &LockOptions,
    ) -> Result<Option<Lease>> {
        let _ = (name.as_ref(), options);
        unimplemented!()
    }
    /// Close connections. Leases still held expire by their TTL.
    pub async fn close(&self) {}
}

/// A held lock. Dropping it without `release` leaves the key to expire.
#[derive(Debug)]
pub struct Lease {}

impl Lease {
    pub fn name(&self) -> &[u8] {
        unimplemented!()
    }
    /// The token stored in Redis; never printed by `Debug`.
    pub fn token(&self) -> &str {
        unimplemented!()
    }
    pub fn fence(&self) -> u64 {
        unimplemented!()
    }
    pub fn ttl(&self) -> Duration {
        unimplemented!()
    }
    /// Time left before the lease must be assumed lost.
    pub fn valid_for(&self) -> Duration {
        unimplemented!()
    }
    pub fn lost(&self) -> bool {
        unimplemented!()
    }
    /// Resolves when the lease is lost (renewal failed or validity ran out);
    /// never resolves if it is released first.
    pub async fn lost_signal(&self) {
        unimplemented!()
    }
    /// Extend to `ttl` (default: the lease's ttl) from now; `LockLost` if gone.
    pub async fn extend(&self, ttl: Option<Duration>) -> Result<()> {
        let _ = ttl;
        unimplemented!()
    }
    /// Release; `LockLost` if the lease was lost; a second call is a no-op.
    pub async fn release(&self) -> Result<()> {
        unimplemented!()
    }
}
