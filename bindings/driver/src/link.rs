//! The data connection of one node, made on first use and made again once it
//! is known dead — the one place that knows whether a command can have been
//! sent. redis-rs's `ConnectionManager` does not tell "the connection could
//! not be made, nothing was sent" from "the command was lost on the wire",
//! so fencelock keeps its own: a failure in [`Link::connection`] provably
//! sent nothing; a failure after it may have run the command.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind, RedisError, RedisResult};

use crate::tls::Target;

/// A connection and whether the server (or the OS) closed it since.
#[derive(Clone)]
pub(crate) struct Live {
    pub conn: MultiplexedConnection,
    dead: Arc<AtomicBool>,
}

impl Live {
    /// A command on this connection failed in a way that leaves it unusable:
    /// the next command gets a new one.
    pub(crate) fn check(&self, error: &RedisError) {
        if error.is_unrecoverable_error() || error.is_connection_dropped() {
            self.dead.store(true, Ordering::Release);
        }
    }
}

/// Gets every push message of a RESP3 link's connections (pub/sub).
pub(crate) type OnPush = Arc<dyn Fn(PushInfo) + Send + Sync>;

pub(crate) struct Link {
    client: redis::Client,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    /// RESP3: the connection reports its own death (EOF, reset) as a push,
    /// so the next command goes to a fresh connection instead of the dead
    /// one. RESP2 has no pushes; a failed command marks it dead instead.
    resp3: bool,
    on_push: Option<OnPush>,
    current: Mutex<Option<Live>>,
    /// One connect at a time; the others wait for it and share the result.
    connecting: tokio::sync::Mutex<()>,
}

impl Link {
    /// `on_push` (RESP3 only) also sees each push, the connection's
    /// `Disconnection` included.
    pub(crate) fn new(
        target: Target,
        connect_timeout: Duration,
        response_timeout: Duration,
        on_push: Option<OnPush>,
    ) -> Link {
        let config = target.config(
            AsyncConnectionConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                .set_response_timeout(Some(response_timeout)),
        );
        let resp3 = target
            .client
            .get_connection_info()
            .redis_settings()
            .protocol()
            == redis::ProtocolVersion::RESP3;
        Link {
            client: target.client,
            config,
            connect_timeout,
            resp3,
            on_push: on_push.filter(|_| resp3),
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// The database the connection selects.
    pub(crate) fn db(&self) -> i64 {
        self.client.get_connection_info().redis_settings().db()
    }

    fn live(&self) -> Option<Live> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .as_ref()
            .filter(|live| !live.dead.load(Ordering::Acquire))
            .cloned()
    }

    /// A connection believed alive: the current one, or a new one. An error
    /// here means nothing was sent. `attempt` bounds a new connection (DNS,
    /// TCP, TLS, AUTH, SELECT together).
    pub(crate) async fn connection(&self, attempt: Duration) -> RedisResult<Live> {
        match self.live() {
            Some(conn) => Ok(conn),
            // Boxed: connecting takes kilobytes of state, which every
            // command's future (this one's caller) would otherwise carry.
            None => Box::pin(self.connect(attempt)).await,
        }
    }

    async fn connect(&self, attempt: Duration) -> RedisResult<Live> {
        let _one_at_a_time = self.connecting.lock().await;
        // Someone else may have connected while we waited.
        if let Some(conn) = self.live() {
            return Ok(conn);
        }
        let dead = Arc::new(AtomicBool::new(false));
        let config = if self.resp3 {
            let flag = Arc::clone(&dead);
            let on_push = self.on_push.clone();
            self.config.clone().set_push_sender(
                move |push: PushInfo| -> Result<(), std::convert::Infallible> {
                    if push.kind == PushKind::Disconnection {
                        flag.store(true, Ordering::Release);
                    }
                    if let Some(on_push) = &on_push {
                        on_push(push);
                    }
                    Ok(())
                },
            )
        } else {
            self.config.clone()
        };
        let made = tokio::time::timeout(
            attempt.min(self.connect_timeout) + Duration::from_millis(50),
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from((
                redis::ErrorKind::Io,
                "connect timed out",
            )))
        })?;
        let live = Live { conn: made, dead };
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(live.clone());
        Ok(live)
    }
}
