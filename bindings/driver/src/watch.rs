//! [`LockWatch`]: a lock's holder and fence as they change, for operators.
//!
//! Releases are heard at once (the lock's release channel, as waiters hear
//! them); acquires, expiries and anything a missed message hid are caught
//! by asking Redis again at least every `interval`, and right after the
//! holder's TTL runs out. Only a change of the holder (`held`) or of the
//! fence is reported: renewals, which only move the TTL, are not.

use std::sync::Arc;
use std::time::Duration;

use fencelock_core::{Error, LockInfo, LockName, Operation, Timeout};
use tokio::sync::watch;

use crate::client::Client;
use crate::connections::Connections;
use crate::notify::Subscription;

/// How often a watch asks Redis when no release is heard.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_millis(250);

impl Client {
    /// Follow `name`'s holder and fence as they change (see [`LockWatch`]):
    /// releases are heard at once through the lock's release channel, and
    /// Redis is asked again every 250 ms and when the holder's TTL runs
    /// out, so acquires and expiries show up within that. Read-only.
    pub fn watch(&self, name: impl AsRef<[u8]>) -> Result<LockWatch, Error> {
        let interval = Timeout::from_duration("interval", DEFAULT_WATCH_INTERVAL)?;
        self.watch_named(LockName::new(name)?, interval)
    }

    /// [`Client::watch`] for a validated name, asking Redis again at least
    /// every `interval`.
    pub fn watch_named(&self, name: LockName, interval: Timeout) -> Result<LockWatch, Error> {
        self.connections(&name, Operation::Watch)?;
        Ok(LockWatch::new(self.clone(), name, interval))
    }
}

/// See [`Client::watch`].
pub struct LockWatch {
    client: Client,
    name: LockName,
    interval: Duration,
    /// Opened by the first [`LockWatch::next`].
    listening: Option<Listening>,
    /// The holder and fence last reported.
    last: Option<(bool, Option<u64>)>,
    /// When to ask Redis again without a release heard.
    recheck: tokio::time::Instant,
}

struct Listening {
    subscription: Subscription,
    closed: watch::Receiver<bool>,
}

impl std::fmt::Debug for LockWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockWatch")
            .field("name", &self.name)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl LockWatch {
    pub(crate) fn new(client: Client, name: LockName, interval: Timeout) -> LockWatch {
        LockWatch {
            client,
            name,
            interval: interval.as_duration(),
            listening: None,
            last: None,
            recheck: tokio::time::Instant::now(),
        }
    }

    pub fn name(&self) -> &LockName {
        &self.name
    }

    /// The first call: the lock as it is now. Every later call: the lock
    /// as soon as its holder or fence differs from what was reported last
    /// (a new holder has a new fence; a release, an expiry or a
    /// force-release leaves it free). `Closed` once the client is closed.
    /// Cancel-safe.
    pub async fn next(&mut self) -> Result<LockInfo, Error> {
        let closed = || Error::closed(&self.name, Operation::Watch);
        if self.listening.is_none() {
            let conns = self.connections()?;
            let keys = self.client.keyspace().keys(&self.name);
            let subscription = conns.notifier.subscribe(&keys.channel());
            // Confirmed subscriptions first (bounded: polling covers a
            // pub/sub that is slow to come up), so no release between the
            // first look and the subscription goes unheard.
            let _ =
                tokio::time::timeout(self.interval, subscription.waiter().notify.notified()).await;
            self.listening = Some(Listening {
                subscription,
                closed: conns.closed.subscribe(),
            });
        }
        loop {
            let listening = self.listening.as_mut().expect("opened above");
            if self.last.is_some() {
                tokio::select! {
                    // Any message means "look again"; what it says is for waiters.
                    () = listening.subscription.waiter().notify.notified() => {
                        listening.subscription.waiter().take();
                    }
                    () = tokio::time::sleep_until(self.recheck) => {}
                    _ = listening.closed.wait_for(|closed| *closed) => return Err(closed()),
                }
            }
            if *listening.closed.borrow() {
                return Err(closed());
            }
            let info = self.client.inspect_named(self.name.clone()).await?;
            // Ask again after the interval, or just after the holder's TTL
            // runs out if that is sooner (an expiry publishes nothing).
            let wait = match info.ttl {
                Some(ttl) if info.held => (ttl + Duration::from_millis(1)).min(self.interval),
                _ => self.interval,
            };
            self.recheck = tokio::time::Instant::now() + wait;
            let seen = (info.held, info.fence);
            if self.last != Some(seen) {
                self.last = Some(seen);
                return Ok(info);
            }
        }
    }

    fn connections(&self) -> Result<Arc<Connections>, Error> {
        self.client.connections(&self.name, Operation::Watch)
    }
}
