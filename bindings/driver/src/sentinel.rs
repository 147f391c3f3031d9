//! The primary behind a group of Sentinels: asks them where it is
//! (`SENTINEL get-master-addr-by-name`), checks that the server agrees
//! (`ROLE`), and keeps one self-reconnecting connection to it (`link.rs`)
//! until a command shows it is gone or demoted; then asks again. With
//! `rediss://` URLs the Sentinels and the primary are both reached over TLS,
//! with the client's TLS options.
//!
//! Re-asking happens on: a refused or dropped connection (the primary died)
//! and `READONLY` (it is a replica now: the script's first write was refused,
//! so nothing ran). A command that could not reach any primary comes back as
//! a refused connection, so the core treats it as "never sent" and retries
//! within the caller's bounds while the Sentinels fail over.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencelock_core::Error;
use redis::aio::ConnectionLike;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisError,
    RedisFuture, Value,
};

use crate::link::Link;
use crate::tls::{Target, Tls};
use crate::url::NodeUrl;

#[derive(Clone)]
pub(crate) struct SentinelConn(Arc<Shared>);

struct Shared {
    sentinels: Vec<Target>,
    service: String,
    /// The URLs' credentials and database, applied to the primary.
    primary: ConnectionInfo,
    /// TLS for the Sentinels and the primary (`rediss://` URLs).
    tls: Tls,
    secure: bool,
    /// `host:port` of the primary in use, for messages.
    current_addr: Mutex<String>,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The primary in use and a generation number, so a command that failed
    /// on an old primary does not discard a newer one.
    current: Mutex<Option<(u64, Arc<Link>)>>,
    /// One re-discovery at a time.
    resolving: tokio::sync::Mutex<u64>,
}

impl SentinelConn {
    /// `sentinels`: the Sentinels' URLs. `primary`: the first URL, whose
    /// credentials and database are the primary's.
    pub(crate) fn new(
        sentinels: &[NodeUrl],
        service: &str,
        primary: &NodeUrl,
        tls: &Tls,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<SentinelConn, Error> {
        let sentinels = sentinels
            .iter()
            .map(|s| {
                // The URLs' credentials and database are the primary's:
                // Sentinels have no databases and usually no password.
                let info = s
                    .info
                    .clone()
                    .set_redis_settings(redis::RedisConnectionInfo::default());
                tls.target(info, &s.redacted)
            })
            .collect::<Result<_, _>>()?;
        Ok(SentinelConn(Arc::new(Shared {
            sentinels,
            service: service.to_owned(),
            primary: primary.info.clone(),
            tls: tls.clone(),
            secure: primary.tls,
            current_addr: Mutex::new(String::new()),
            connect_timeout,
            response_timeout,
            current: Mutex::new(None),
            resolving: tokio::sync::Mutex::new(0),
        })))
    }

    /// The URL of the primary at `host:port`, as the Sentinels' URLs would
    /// spell it (TLS or not), without credentials.
    pub(crate) fn primary_url(&self, addr: &str) -> String {
        let scheme = if self.0.secure { "rediss" } else { "redis" };
        self.0.tls.url(&format!("{scheme}://{addr}"))
    }

    /// Find the primary now; returns its `host:port`.
    pub(crate) async fn connect(&self) -> redis::RedisResult<String> {
        self.primary_conn().await?;
        Ok(self
            .0
            .current_addr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone())
    }

    async fn primary_conn(&self) -> redis::RedisResult<(u64, Arc<Link>)> {
        if let Some(current) = self.cached() {
            return Ok(current);
        }
        let mut generation = self.0.resolving.lock().await;
        if let Some(current) = self.cached() {
            return Ok(current);
        }
        let conn = self.discover().await?;
        *generation += 1;
        let current = (*generation, conn);
        *self.0.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(current.clone());
        Ok(current)
    }

    fn cached(&self) -> Option<(u64, Arc<Link>)> {
        self.0
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn forget(&self, generation: u64) {
        let mut current = self.0.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }

    /// Ask each Sentinel in turn; the first address whose server says
    /// `master` wins.
    async fn discover(&self) -> redis::RedisResult<Arc<Link>> {
        let shared = &self.0;
        let mut last = String::from("no Sentinel answered");
        for sentinel in &shared.sentinels {
            let addr = match self.ask(sentinel).await {
                Ok(Some(addr)) => addr,
                Ok(None) => {
                    last = format!("Sentinels do not know service {:?}", shared.service);
                    continue;
                }
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            match self.open_primary(&addr).await {
                Ok(conn) => return Ok(conn),
                Err(e) => last = format!("{}:{}: {e}", addr.0, addr.1),
            }
        }
        tracing::debug!(service = %shared.service, reason = %last, "no primary found");
        Err(no_primary(&shared.service, &last))
    }

    async fn ask(&self, sentinel: &Target) -> redis::RedisResult<Option<(String, u16)>> {
        let config = sentinel.config(AsyncConnectionConfig::new());
        let mut conn = tokio::time::timeout(
            self.0.connect_timeout,
            sentinel
                .client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| timed_out())??;
        let reply: Option<(String, u16)> = tokio::time::timeout(
            self.0.connect_timeout,
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.0.service)
                .query_async(&mut conn),
        )
        .await
        .map_err(|_| timed_out())??;
        Ok(reply)
    }

    async fn open_primary(&self, (host, port): &(String, u16)) -> redis::RedisResult<Arc<Link>> {
        let addr = format!("{host}:{port}");
        let info = self.primary_url(&addr).into_connection_info()?;
        let settings = self
            .0
            .primary
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        let target = self.0.tls.target(info, &addr).map_err(|e| {
            RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "TLS setup",
                e.to_string(),
            ))
        })?;
        let link = Arc::new(Link::new(
            target,
            self.0.connect_timeout,
            self.0.response_timeout,
            None,
        ));
        let mut conn = link.connection(self.0.connect_timeout).await?.conn;
        let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
        match role.first() {
            Some(Value::BulkString(r)) if r == b"master" => {
                *self
                    .0
                    .current_addr
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = format!("{host}:{port}");
                tracing::debug!(service = %self.0.service, primary = %format!("{host}:{port}"), "Sentinel primary");
                Ok(link)
            }
            _ => Err(RedisError::from((
                redis::ErrorKind::Io,
                "not a primary (yet)",
            ))),
        }
    }

    /// Run on the current primary; after a refusal or `READONLY` (nothing
    /// ran) once more on the primary the Sentinels name now. A dropped
    /// connection is not retried here (the command may have run): the
    /// caller decides, and its retry goes to the new primary.
    async fn run(&self, request: Request<'_>) -> redis::RedisResult<Vec<Value>> {
        let mut retried = false;
        loop {
            let (generation, link) = self.primary_conn().await?;
            let (result, connected) = match link.connection(self.0.connect_timeout).await {
                Ok(live) => {
                    let mut conn = live.conn.clone();
                    let result = match request {
                        Request::One(cmd) => conn.req_packed_command(cmd).await.map(|v| vec![v]),
                        Request::Many(pipeline, offset, count) => {
                            conn.req_packed_commands(pipeline, offset, count).await
                        }
                    };
                    if let Err(e) = &result {
                        live.check(e);
                    }
                    (result, true)
                }
                // No connection: nothing was sent.
                Err(e) => (Err(e), false),
            };
            let (gone, safe_to_retry) = match &result {
                _ if !connected => (true, true),
                Err(e) if e.code() == Some("READONLY") => (true, true),
                Err(e) if e.is_connection_refusal() => (true, true),
                Err(e) if e.is_connection_dropped() => (true, false),
                Ok(values) if values.first().is_some_and(readonly) => (true, true),
                _ => (false, false),
            };
            if gone {
                self.forget(generation);
            }
            if !(gone && safe_to_retry) || retried {
                return result;
            }
            retried = true;
        }
    }
}

#[derive(Clone, Copy)]
enum Request<'a> {
    One(&'a Cmd),
    Many(&'a Pipeline, usize, usize),
}

fn readonly(value: &Value) -> bool {
    match value {
        Value::ServerError(e) => {
            e.code() == "READONLY" || e.details().is_some_and(|d| d.contains("READONLY"))
        }
        _ => false,
    }
}

fn timed_out() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "timed out",
    ))
}

/// Reported as a refused connection: nothing was sent, so the core may retry.
fn no_primary(service: &str, reason: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("no primary for Sentinel service {service:?}: {reason}"),
    ))
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut values = self.run(Request::One(cmd)).await?;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move { self.run(Request::Many(pipeline, offset, count)).await })
    }

    fn get_db(&self) -> i64 {
        self.0.primary.redis_settings().db()
    }
}
