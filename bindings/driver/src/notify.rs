//! Release notifications: ONE pub/sub connection per node per client (RESP3
//! push messages on a dedicated connection, made like the data connection in
//! `link.rs` and made again and resubscribed when it dies), shared by every
//! waiting lease through refcounted per-channel subscriptions.
//!
//! A waiting lease registers a [`Waiter`] for its channel on every node. The
//! waiter's `Notify` fires when (a) every node has confirmed the subscription
//! (the core then re-checks the lock, closing the window in which a release
//! could be missed) and (b) whenever a release message arrives. Messages are
//! dispatched straight from the connection's reader, without an extra task,
//! and kept for the waiter ([`Waiter::take`]): what a message says (a fair
//! mutex's names the one waiter it is for) is the core's to read
//! (`Lock::handle_message`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, RedisResult, Value};
use tokio::sync::{mpsc, Notify};

use crate::link::Link;
use crate::url::NodeUrl;

/// What a waiting lease holds on to.
#[derive(Debug, Default)]
pub(crate) struct Waiter {
    pub notify: Notify,
    /// Nodes whose subscription is not confirmed yet.
    pending: AtomicUsize,
    /// What woke it since it last looked.
    woke: Mutex<Woke>,
}

/// What woke a waiter since it last looked ([`Waiter::take`]).
#[derive(Debug, Default)]
pub(crate) struct Woke {
    /// A wake-up for every waiter, whatever the messages say: the
    /// subscription is active or was made anew (a release may have been
    /// missed meanwhile), or more messages came than are kept.
    pub everyone: bool,
    /// The release messages that came, oldest first.
    pub messages: Vec<Vec<u8>>,
}

/// Messages kept per waiter between two looks; more wake it as
/// `everyone` (a waiter that never looks, `watch`, stays bounded).
const KEPT_MESSAGES: usize = 16;

impl Waiter {
    fn confirm_one(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wake_everyone();
        }
    }

    fn wake_everyone(&self) {
        self.woke.lock().unwrap_or_else(|e| e.into_inner()).everyone = true;
        self.notify.notify_one();
    }

    fn deliver(&self, message: &[u8]) {
        {
            let mut woke = self.woke.lock().unwrap_or_else(|e| e.into_inner());
            if woke.messages.len() < KEPT_MESSAGES {
                woke.messages.push(message.to_vec());
            } else {
                woke.everyone = true;
                woke.messages.clear();
            }
        }
        self.notify.notify_one();
    }

    /// What woke it since the last call (after `notify` fired).
    pub(crate) fn take(&self) -> Woke {
        std::mem::take(&mut *self.woke.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[derive(PartialEq, Eq, Clone, Copy, Debug)]
enum Remote {
    /// SUBSCRIBE queued or in flight.
    Pending,
    /// The server confirmed the subscription.
    Active,
    /// SUBSCRIBE failed; waiters fall back to the core's retry timer.
    Failed,
}

struct Channel {
    /// Each waiter, and whether this node's confirmation was counted for it.
    waiters: Vec<(Arc<Waiter>, bool)>,
    remote: Remote,
    /// The connection died since the subscription was made: a release
    /// published before the reconciler resubscribed was lost, so the waiters are
    /// woken (to look at the lock again) once the subscription is back.
    rejoin: bool,
}

#[derive(Default)]
struct Table {
    channels: HashMap<Vec<u8>, Channel>,
}

/// What the reconciler is asked to do.
enum Request {
    /// Bring this channel's server subscription in line with the table.
    Channel(Vec<u8>),
    /// The connection died: subscribe every active channel again, on a new
    /// one.
    Resubscribe,
}

/// The pub/sub side of one node.
struct NodeSub {
    table: Arc<Mutex<Table>>,
    reconcile: mpsc::UnboundedSender<Request>,
}

/// All nodes' pub/sub of one client.
pub(crate) struct Notifier {
    nodes: Vec<NodeSub>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Notifier {
    /// A Redis Cluster's sharded pub/sub: one cluster connection whose
    /// SSUBSCRIBEs go to the shard owning each channel's slot (redis-rs
    /// moves them after a resharding or failover). Connects in the
    /// background; nothing is sent until the first waiter subscribes.
    pub(crate) fn new_cluster(
        builder: redis::cluster::ClusterClientBuilder,
        connect_timeout: std::time::Duration,
        label: String,
        handle: &tokio::runtime::Handle,
    ) -> Result<Notifier, fencelock_core::Error> {
        let table = Arc::new(Mutex::new(Table::default()));
        let dispatch_table = Arc::clone(&table);
        let sender = move |push: PushInfo| -> Result<(), std::convert::Infallible> {
            dispatch(&dispatch_table, push);
            Ok(())
        };
        let client = builder.push_sender(sender).build().map_err(|e| {
            fencelock_core::Error::invalid(format!("cluster {label}: {}", e.category()))
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let reconcile_table = Arc::clone(&table);
        handle.spawn(async move {
            let mut delay = std::time::Duration::from_millis(10);
            let conn = loop {
                match crate::cluster::connect(&client, connect_timeout).await {
                    Ok(conn) => break conn,
                    // Nobody is listening any more: the client is gone.
                    Err(_) if rx.is_closed() => return,
                    Err(e) => {
                        tracing::warn!(cluster = %label, error = %e.category(), "pub/sub connection failed; retrying");
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(std::time::Duration::from_secs(1));
                    }
                }
            };
            reconciler(Sharded(conn), reconcile_table, rx, label).await;
        });
        Ok(Notifier {
            nodes: vec![NodeSub {
                table,
                reconcile: tx,
            }],
        })
    }

    /// Sets up (lazily connecting) pub/sub connections; nothing is sent
    /// until the first waiter subscribes.
    pub(crate) fn new(
        urls: &[NodeUrl],
        connect_timeout: Duration,
        response_timeout: Duration,
        tls: &crate::tls::Tls,
        handle: &tokio::runtime::Handle,
    ) -> Result<Notifier, fencelock_core::Error> {
        let mut nodes = Vec::with_capacity(urls.len());
        for url in urls {
            let table = Arc::new(Mutex::new(Table::default()));
            let (tx, rx) = mpsc::unbounded_channel();
            let dispatch_table = Arc::clone(&table);
            // Weak: the connection must not keep the reconciler alive.
            let lost = tx.downgrade();
            let on_push = move |push: PushInfo| {
                let died = push.kind == PushKind::Disconnection;
                dispatch(&dispatch_table, push);
                if let Some(reconcile) = lost.upgrade().filter(|_| died) {
                    let _ = reconcile.send(Request::Resubscribe);
                }
            };
            let link = Link::new(
                crate::connection::open(url, true, tls)?,
                connect_timeout,
                response_timeout,
                Some(Arc::new(on_push)),
            );
            handle.spawn(reconciler(
                LinkSub {
                    link: Arc::new(link),
                    connect_timeout,
                },
                Arc::clone(&table),
                rx,
                url.redacted.clone(),
            ));
            nodes.push(NodeSub {
                table,
                reconcile: tx,
            });
        }
        Ok(Notifier { nodes })
    }

    /// Start listening on `channel` on every node. Dropping the returned
    /// subscription stops listening (the last one out unsubscribes).
    pub(crate) fn subscribe(self: &Arc<Self>, channel: &[u8]) -> Subscription {
        let waiter = Arc::new(Waiter {
            notify: Notify::new(),
            pending: AtomicUsize::new(self.nodes.len()),
            woke: Mutex::default(),
        });
        for node in &self.nodes {
            let mut table = node.table.lock().unwrap_or_else(|e| e.into_inner());
            match table.channels.get_mut(channel) {
                Some(entry) => match entry.remote {
                    Remote::Active => {
                        waiter.confirm_one();
                        entry.waiters.push((Arc::clone(&waiter), true));
                    }
                    Remote::Pending => entry.waiters.push((Arc::clone(&waiter), false)),
                    Remote::Failed => {
                        entry.waiters.push((Arc::clone(&waiter), false));
                        entry.remote = Remote::Pending;
                        if node
                            .reconcile
                            .send(Request::Channel(channel.to_vec()))
                            .is_err()
                        {
                            waiter.confirm_one();
                        }
                    }
                },
                None => {
                    table.channels.insert(
                        channel.to_vec(),
                        Channel {
                            waiters: vec![(Arc::clone(&waiter), false)],
                            remote: Remote::Pending,
                            rejoin: false,
                        },
                    );
                    if node
                        .reconcile
                        .send(Request::Channel(channel.to_vec()))
                        .is_err()
                    {
                        // The client is closing: nobody will confirm.
                        waiter.confirm_one();
                    }
                }
            }
        }
        Subscription {
            notifier: Arc::clone(self),
            channel: channel.to_vec(),
            waiter,
        }
    }

    fn unsubscribe(&self, channel: &[u8], waiter: &Arc<Waiter>) {
        for node in &self.nodes {
            let mut table = node.table.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = table.channels.get_mut(channel) {
                entry.waiters.retain(|(w, _)| !Arc::ptr_eq(w, waiter));
                if entry.waiters.is_empty() {
                    table.channels.remove(channel);
                    let _ = node.reconcile.send(Request::Channel(channel.to_vec()));
                }
            }
        }
    }
}

/// A lease listening for release notifications.
pub(crate) struct Subscription {
    notifier: Arc<Notifier>,
    channel: Vec<u8>,
    waiter: Arc<Waiter>,
}

impl Subscription {
    pub(crate) fn waiter(&self) -> &Waiter {
        &self.waiter
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.notifier.unsubscribe(&self.channel, &self.waiter);
    }
}

/// Runs on the connection's reader: hand a release's message to everyone
/// waiting on the channel, and wake them all when the channel is subscribed
/// anew after the connection was lost (CLIENT KILL, timeout, restart): any
/// release published in between never reached us.
fn dispatch(table: &Mutex<Table>, push: PushInfo) {
    let wake = |entry: &Channel| {
        for (waiter, _) in &entry.waiters {
            waiter.wake_everyone();
        }
    };
    match push.kind {
        PushKind::Message | PushKind::SMessage => {
            let Some(Value::BulkString(channel)) = push.data.first() else {
                return;
            };
            // A message we cannot read wakes everyone, as "1" does.
            let message = match push.data.get(1) {
                Some(Value::BulkString(message)) => message.as_slice(),
                _ => b"1",
            };
            let table = table.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = table.channels.get(channel.as_slice()) {
                for (waiter, _) in &entry.waiters {
                    waiter.deliver(message);
                }
            }
        }
        PushKind::Disconnection => {
            let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
            for entry in table.channels.values_mut() {
                entry.rejoin = true;
            }
        }
        // The server dropped a sharded subscription (its slot moved away):
        // redis-rs subscribes at the new owner; wake the waiters then.
        PushKind::SUnsubscribe => {
            let Some(Value::BulkString(channel)) = push.data.first() else {
                return;
            };
            let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = table.channels.get_mut(channel.as_slice()) {
                entry.rejoin = true;
            }
        }
        PushKind::Subscribe | PushKind::SSubscribe => {
            let Some(Value::BulkString(channel)) = push.data.first() else {
                return;
            };
            let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = table.channels.get_mut(channel.as_slice()) {
                if std::mem::take(&mut entry.rejoin) {
                    wake(entry);
                }
            }
        }
        _ => {}
    }
}

/// Brings the server's subscriptions in line with the table, in order, so an
/// UNSUBSCRIBE can never overtake a SUBSCRIBE of the same channel. Requests
/// that queued up meanwhile go out together (one SUBSCRIBE for many
/// channels), so a burst of waiters on many names costs a few round trips,
/// not one each. Ends when the client is dropped or closed.
async fn reconciler(
    mut conn: impl PubSub,
    table: Arc<Mutex<Table>>,
    mut rx: mpsc::UnboundedReceiver<Request>,
    label: String,
) {
    const BATCH: usize = 512;
    let mut active: HashSet<Vec<u8>> = HashSet::new();
    while let Some(first) = rx.recv().await {
        let mut batch = HashSet::new();
        let mut resubscribe = false;
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Channel(channel) => {
                    batch.insert(channel);
                }
                Request::Resubscribe => resubscribe = true,
            }
            if batch.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if resubscribe && !resubscribe_all(&mut conn, &active, &rx, &label).await {
            return;
        }
        let (mut subscribe, mut unsubscribe, mut settled) = (Vec::new(), Vec::new(), Vec::new());
        {
            let table = table.lock().unwrap_or_else(|e| e.into_inner());
            for channel in batch {
                match (
                    table.channels.contains_key(&channel),
                    active.contains(&channel),
                ) {
                    (true, false) => subscribe.push(channel),
                    (false, true) => unsubscribe.push(channel),
                    // Re-registered after a queued unsubscribe was skipped.
                    (true, true) => settled.push(channel),
                    (false, false) => {}
                }
            }
        }
        for channel in &settled {
            settle(&table, channel, true);
        }
        if !unsubscribe.is_empty() {
            let _ = conn.unsubscribe(&unsubscribe).await;
            for channel in &unsubscribe {
                active.remove(channel);
            }
        }
        if subscribe.is_empty() {
            continue;
        }
        let mut result = conn.subscribe(&subscribe).await;
        if let Err(e) = &result {
            if e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout() {
                // SUBSCRIBE is idempotent: sending it twice is harmless.
                // The connection died under the SUBSCRIBE (CLIENT KILL): its
                // replacement is on the way; subscribe there rather than
                // leave these waiters on timers for the rest of their wait.
                result = conn.subscribe(&subscribe).await;
            }
        }
        let ok = match result {
            Ok(()) => {
                active.extend(subscribe.iter().cloned());
                true
            }
            Err(e) => {
                tracing::warn!(node = %label, error = %e.category(), "SUBSCRIBE failed; waiters fall back to timed retries");
                false
            }
        };
        let undo: Vec<Vec<u8>> = subscribe
            .into_iter()
            .filter(|channel| !settle(&table, channel, ok) && ok)
            .collect();
        // Everyone left while we subscribed: undo it.
        if !undo.is_empty() && conn.unsubscribe(&undo).await.is_ok() {
            for channel in &undo {
                active.remove(channel);
            }
        }
    }
}

/// After the connection died: subscribe `active` again on a new one (the
/// `Subscribe` pushes then wake their waiters, see [`dispatch`]), retrying
/// with a backoff while the server is away. False when the client is gone.
async fn resubscribe_all(
    conn: &mut impl PubSub,
    active: &HashSet<Vec<u8>>,
    rx: &mpsc::UnboundedReceiver<Request>,
    label: &str,
) -> bool {
    if active.is_empty() {
        return true;
    }
    let channels: Vec<Vec<u8>> = active.iter().cloned().collect();
    let mut delay = Duration::from_millis(10);
    loop {
        match conn.subscribe(&channels).await {
            Ok(()) => return true,
            Err(_) if rx.is_closed() => return false,
            Err(e) => {
                tracing::debug!(node = %label, error = %e.category(), "pub/sub connection lost; subscribing again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// The server's subscription to `channel` settled (`ok`: it is active):
/// confirm the waiters that were waiting for it. Returns whether anyone
/// still wants the channel.
fn settle(table: &Mutex<Table>, channel: &[u8], ok: bool) -> bool {
    let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
    let Some(entry) = table.channels.get_mut(channel) else {
        return false;
    };
    if entry.remote == Remote::Pending {
        entry.remote = if ok { Remote::Active } else { Remote::Failed };
        for (waiter, counted) in &mut entry.waiters {
            if !std::mem::replace(counted, true) {
                waiter.confirm_one();
            }
        }
    }
    true
}

/// The (un)subscribe commands of one pub/sub connection.
trait PubSub: Send + 'static {
    fn subscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send;
    fn unsubscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send;
}

/// A single node's pub/sub connection (also the primary Sentinels name),
/// made on use like the data connection, TLS server name included.
struct LinkSub {
    link: Arc<Link>,
    connect_timeout: Duration,
}

impl LinkSub {
    async fn send(&self, channels: Vec<Vec<u8>>, subscribe: bool) -> RedisResult<()> {
        let live = self.link.connection(self.connect_timeout).await?;
        let mut conn = live.conn.clone();
        let result = if subscribe {
            conn.subscribe(channels).await
        } else {
            conn.unsubscribe(channels).await
        };
        if let Err(e) = &result {
            live.check(e);
        }
        result
    }
}

impl PubSub for LinkSub {
    fn subscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send {
        self.send(channels.to_vec(), true)
    }
    fn unsubscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send {
        self.send(channels.to_vec(), false)
    }
}

/// Sharded pub/sub on a cluster. One channel per command: the channels of
/// different locks live in different slots (a multi-channel SSUBSCRIBE
/// would be CROSSSLOT); they go out concurrently.
struct Sharded(ClusterConnection);

impl Sharded {
    async fn each(&self, channels: &[Vec<u8>], subscribe: bool) -> RedisResult<()> {
        let calls = channels.iter().map(|channel| {
            let mut conn = self.0.clone();
            async move {
                if subscribe {
                    conn.ssubscribe(channel).await
                } else {
                    conn.sunsubscribe(channel).await
                }
            }
        });
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect()
    }
}

impl PubSub for Sharded {
    fn subscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send {
        let this = Sharded(self.0.clone());
        let channels = channels.to_vec();
        async move { this.each(&channels, true).await }
    }
    fn unsubscribe(
        &mut self,
        channels: &[Vec<u8>],
    ) -> impl std::future::Future<Output = RedisResult<()>> + Send {
        let this = Sharded(self.0.clone());
        let channels = channels.to_vec();
        async move { this.each(&channels, false).await }
    }
}
