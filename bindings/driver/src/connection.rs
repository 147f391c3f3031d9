//! One multiplexed, self-reconnecting connection per node, shared by every
//! lease of a client; runs the core's [`Command`]s as `EVALSHA` and reloads
//! scripts transparently on `NOSCRIPT`.

use std::sync::Arc;
use std::time::Duration;

use fencelock_core::{Command, Error, Reply, Script};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, Value};

use crate::topology::Conn;
use crate::url::{scrub, NodeUrl};

/// A Redis node (or a whole cluster, or the primary Sentinels point at): its
/// data connection and the name it goes by in messages.
#[derive(Clone)]
pub(crate) struct Node {
    conn: Conn,
    label: Arc<str>,
    password: Option<Arc<str>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// The settings every connection of a client shares. Reconnection: one
/// attempt per use, bounded by the connect timeout (no retry storm behind a
/// command; the core decides about retries), and redis-rs reconnects in the
/// background after any connection-level failure.
pub(crate) fn manager_config(
    connect_timeout: Duration,
    response_timeout: Duration,
) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_number_of_retries(0)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(Duration::from_millis(500))
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(response_timeout))
}

/// How connecting to one node went.
pub(crate) enum Connected {
    Up(Node),
    /// Unreachable right now; the node reconnects lazily on use.
    Down(Node, Error),
}

impl Node {
    /// Connect and wait for the first connection (AUTH, SELECT included),
    /// giving up after `connect_timeout`. Bad credentials are a hard error;
    /// an unreachable server comes back as `Down` with a lazily reconnecting
    /// node so the caller can decide whether a minority of down nodes is
    /// acceptable (Redlock).
    pub(crate) async fn connect(
        url: &NodeUrl,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Connected, Error> {
        let label: Arc<str> = url.redacted.as_str().into();
        let password: Option<Arc<str>> = url.password.as_deref().map(Into::into);
        // RESP3 unless the URL says otherwise: on RESP3 redis-rs's connection
        // reports its own death (EOF, reset) to the ConnectionManager, which
        // reconnects at once, so a command sent after a CLIENT KILL (or a
        // server timeout) goes to a fresh connection instead of failing on the
        // dead one. On RESP2 the manager only learns of it from the next
        // command's failure. (The pub/sub side needs RESP3 anyway.)
        let info = if url.protocol_given {
            url.info.clone()
        } else {
            let settings = url
                .info
                .redis_settings()
                .clone()
                .set_protocol(redis::ProtocolVersion::RESP3);
            url.info.clone().set_redis_settings(settings)
        };
        let client = redis::Client::open(info).map_err(|e| {
            Error::invalid(format!(
                "invalid Redis URL {:?}: {}",
                url.redacted,
                e.category()
            ))
        })?;
        let config = manager_config(connect_timeout, response_timeout);
        // redis-rs bounds each phase by the connect timeout; the outer bound
        // makes sure DNS + TCP + TLS + AUTH together cannot hang either.
        let attempt = tokio::time::timeout(
            connect_timeout + Duration::from_millis(50),
            ConnectionManager::new_with_config(client.clone(), config.clone()),
        )
        .await;
        let err = match attempt {
            Ok(Ok(mut conn)) => {
                // redis-rs tolerates a failed handshake when no password was
                // given; one PING tells "needs AUTH" (or an ACL problem) now
                // instead of at the first lock.
                match conn.send_packed_command(&redis::cmd("PING")).await {
                    Ok(Value::ServerError(e)) => RedisError::from(e),
                    Err(e) => e,
                    Ok(_) => {
                        // Cache the scripts now so even the first acquire is
                        // one round trip. Best effort: an ACL without
                        // SCRIPT still works through EVAL on NOSCRIPT.
                        let mut load = redis::pipe();
                        for script in Script::ALL {
                            load.cmd("SCRIPT").arg("LOAD").arg(script.source());
                        }
                        if let Err(e) = conn.send_packed_commands(&load, 0, Script::ALL.len()).await
                        {
                            tracing::debug!(node = %label, error = %e.category(), "SCRIPT LOAD at connect failed; scripts load on first use");
                        }
                        return Ok(Connected::Up(Node {
                            conn: Conn::Single(conn),
                            label,
                            password,
                        }));
                    }
                }
            }
            Ok(Err(e)) => e,
            Err(_) => RedisError::from((redis::ErrorKind::Io, "connect timed out")),
        };
        let message = describe_error(&label, password.as_deref(), &err);
        let error = Error::redis(None, message);
        if is_fatal_connect_error(&err) {
            return Err(error);
        }
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| Error::redis(None, describe_error(&label, password.as_deref(), &e)))?;
        Ok(Connected::Down(
            Node {
                conn: Conn::Single(conn),
                label,
                password,
            },
            error,
        ))
    }

    /// A node of another topology (see `topology.rs`).
    pub(crate) fn from_conn(conn: Conn, label: &str, password: Option<&str>) -> Node {
        Node {
            conn,
            label: label.into(),
            password: password.map(Into::into),
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Run one core command. Every call yields exactly one reply: server
    /// errors as `Reply::Error`, anything that leaves the outcome open (IO
    /// error, timeout, reconnect failure) as `Reply::Unknown`.
    ///
    /// A command that failed because its connection was closed (CLIENT KILL,
    /// a server-side timeout, a proxy cutting it: EOF, reset, broken pipe) is
    /// retried ONCE on the fresh connection redis-rs opens at once; timeouts
    /// and refused connections are not retried. The first try either never
    /// reached Redis (the dead connection was noticed before the send) or ran
    /// and lost its reply; a retry is safe for every script because each is
    /// idempotent for its owner:
    /// - acquire re-grants a key that already holds our token (new fence,
    ///   TTL from the retry: later, i.e. conservative);
    /// - extend resets the TTL again; raise-fence is set-if-greater;
    /// - release: a second delete finds nothing, so its `0` ("not ours")
    ///   cannot tell "someone else's" from "our first try deleted it": the
    ///   outcome stays `Unknown` (the core reports a Redis error), only a
    ///   `1` is a definite answer.
    ///
    /// Even if the first try were still to run after the retry (its bytes
    /// were in the server's buffer when the socket closed), each order is
    /// safe: the scripts compare our token and fences only grow.
    pub(crate) async fn run(&self, command: &Command) -> Reply {
        let first = match self.run_once(command).await {
            Err(e) if retry_on_fresh_connection(&e) => e,
            other => return self.to_reply(command, other),
        };
        tracing::debug!(
            node = %self.label,
            script = ?command.script,
            error = %describe_error(&self.label, self.password.as_deref(), &first),
            "connection closed under the command; retrying once on a fresh connection"
        );
        let retry = self.run_once(command).await;
        if command.script == Script::Release && matches!(retry, Ok(Value::Int(0))) {
            return self.to_reply(command, Err(first));
        }
        self.to_reply(command, retry)
    }

    /// `EVALSHA`, and `EVAL` on NOSCRIPT.
    async fn run_once(&self, command: &Command) -> redis::RedisResult<Value> {
        let mut conn = self.conn.clone();
        // Sized up front: growing it argument by argument cost 6 % of the
        // instructions of an acquire + release (callgrind, bench/README.md).
        let bytes = 60
            + command.keys.iter().map(Vec::len).sum::<usize>()
            + command.args.iter().map(Vec::len).sum::<usize>();
        let mut evalsha =
            redis::Cmd::with_capacity(3 + command.keys.len() + command.args.len(), bytes);
        evalsha
            .arg("EVALSHA")
            .arg(command.script.sha1())
            .arg(command.keys.len())
            .arg(&command.keys)
            .arg(&command.args);
        let sharded = conn.sharded() && command.script == Script::Release;
        if sharded {
            // The release script's notification goes out as SPUBLISH, to
            // the shard's sharded subscribers (not an argument the core
            // knows: it is how this topology delivers it).
            evalsha.arg("SPUBLISH");
        }
        let first = crate::replicas::send(&mut conn, evalsha, command.wait_replicas).await;
        if !crate::replicas::is_noscript(&first, command.wait_replicas.is_some()) {
            return first;
        }
        // SCRIPT FLUSH, a restart or a failover emptied the script cache: EVAL
        // runs the source and caches it again, so the next EVALSHA hits.
        tracing::debug!(node = %self.label, script = ?command.script, "NOSCRIPT; reloading with EVAL");
        let mut eval = redis::cmd("EVAL");
        eval.arg(command.script.source())
            .arg(command.keys.len())
            .arg(&command.keys)
            .arg(&command.args);
        if sharded {
            eval.arg("SPUBLISH");
        }
        crate::replicas::send(&mut conn, eval, command.wait_replicas).await
    }

    fn to_reply(&self, command: &Command, result: redis::RedisResult<Value>) -> Reply {
        match result {
            Ok(value) => self.value_to_reply(command, value),
            Err(e)
                if matches!(e.kind(), redis::ErrorKind::Server(_))
                    || e.code().is_some() && !e.is_io_error() =>
            {
                let text = self.secret_free(command, &server_text(e.code(), e.detail()));
                tracing::debug!(node = %self.label, error = %text, "server error");
                Reply::Error(text)
            }
            Err(e) => {
                let text = describe_error(&self.label, self.password.as_deref(), &e);
                tracing::debug!(node = %self.label, error = %text, "command outcome unknown");
                Reply::Unknown(self.secret_free(command, &text))
            }
        }
    }

    fn value_to_reply(&self, command: &Command, value: Value) -> Reply {
        match value {
            Value::Nil => Reply::Nil,
            Value::Int(i) => Reply::Int(i),
            Value::BulkString(b) => Reply::Bulk(b),
            Value::SimpleString(s) => Reply::Bulk(s.into_bytes()),
            Value::Okay => Reply::Bulk(b"OK".to_vec()),
            Value::Array(items) | Value::Set(items) => Reply::Array(
                items
                    .into_iter()
                    .map(|v| self.value_to_reply(command, v))
                    .collect(),
            ),
            Value::Map(pairs) => Reply::Array(
                pairs
                    .into_iter()
                    .flat_map(|(k, v)| [k, v])
                    .map(|v| self.value_to_reply(command, v))
                    .collect(),
            ),
            Value::Attribute { data, .. } => self.value_to_reply(command, *data),
            Value::Boolean(b) => Reply::Int(i64::from(b)),
            Value::Double(d) => Reply::Bulk(d.to_string().into_bytes()),
            Value::BigNumber(n) => Reply::Bulk(n),
            Value::VerbatimString { text, .. } => Reply::Bulk(text.into_bytes()),
            Value::ServerError(e) => {
                let text = self.secret_free(command, &server_text(Some(e.code()), e.details()));
                tracing::debug!(node = %self.label, error = %text, "server error");
                Reply::Error(text)
            }
            other => Reply::Error(format!(
                "unexpected reply type from {}: {other:?}",
                self.label
            )),
        }
    }

    /// Server error texts can echo arguments (a script error quoting its
    /// input): take the token and the password out before they go anywhere.
    fn secret_free(&self, command: &Command, text: &str) -> String {
        let mut text = scrub(text, self.password.as_deref());
        for arg in &command.args {
            if arg.len() >= 8 {
                if let Ok(arg) = std::str::from_utf8(arg) {
                    text = scrub(&text, Some(arg));
                }
            }
        }
        text
    }
}

fn server_text(code: Option<&str>, detail: Option<&str>) -> String {
    match (code, detail) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        (None, Some(detail)) => detail.to_owned(),
        (None, None) => "unknown server error".to_owned(),
    }
}

/// The connection under a command was closed (EOF, reset, broken pipe, or
/// already known dead so the command was never written). Not: timeouts (the
/// command may still be queued and run later), refused connections (the
/// server is down; a retry would only double the wait), server errors.
pub(crate) fn retry_on_fresh_connection(e: &RedisError) -> bool {
    e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout()
}

/// Errors that retrying cannot fix: wrong credentials, missing permissions,
/// a bad database index, a TLS configuration problem. (A server that is
/// down, loading or timing out is not fatal: Redlock tolerates a minority.)
pub(crate) fn is_fatal_connect_error(e: &RedisError) -> bool {
    use redis::{ErrorKind as K, ServerErrorKind as S};
    matches!(
        e.kind(),
        K::AuthenticationFailed
            | K::InvalidClientConfig
            | K::Server(S::NoPerm)
            | K::Server(S::ResponseError)
    ) || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
}

/// A human message for a redis-rs error, naming the node, never a password.
pub(crate) fn describe_error(label: &str, password: Option<&str>, e: &RedisError) -> String {
    let what = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connection_refusal() {
        "connection refused".to_owned()
    } else {
        e.to_string()
    };
    scrub(&format!("{label}: {what}"), password)
}
