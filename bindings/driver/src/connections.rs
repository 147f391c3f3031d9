//! [`Connections`]: what every lease actor of one client shares — the nodes,
//! the pub/sub notifier, the closed flag and the task tracker `close` waits on.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::watch;

use crate::connection::Node;
use crate::notify::Notifier;

pub(crate) struct Connections {
    pub nodes: Vec<Node>,
    pub notifier: Arc<Notifier>,
    /// `true` once `Client::close` ran: actors stop renewing and leave.
    pub closed: watch::Sender<bool>,
    /// `replicas=N`: how many replicas must acknowledge, and how long
    /// `WAIT` may take.
    pub replicas: (u32, std::time::Duration),
    /// A release's notification was refused (`Event::NotPublished`) and
    /// logged: said once per client, not once per release.
    pub not_published_logged: AtomicBool,
    /// Every lease actor, so `close` can wait for those still finishing a
    /// release (a failed or cancelled acquire's compensation).
    pub actors: tokio_util::task::TaskTracker,
}
