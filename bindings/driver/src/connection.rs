//! One node of a client (or a whole cluster, or the primary Sentinels point
//! at): runs the core's [`Command`]s as `EVALSHA`, reloads scripts
//! transparently on `NOSCRIPT`, and, on a single node's [`Link`], retries a
//! command that provably never reached the server on a fresh connection.

use std::sync::Arc;
use std::time::Duration;

use fencelock_core::{Command, Error, Reply, Script};
use redis::{RedisError, Value};

use crate::link::Link;
use crate::tls::{Target, Tls};
use crate::topology::Conn;
use crate::url::{scrub, NodeUrl};

/// A Redis node (or a whole cluster, or the primary Sentinels point at): its
/// data connection and the name it goes by in messages.
#[derive(Clone)]
pub(crate) struct Node {
    conn: Conn,
    label: Arc<str>,
    password: Option<Arc<str>>,
    /// The bound on re-connecting for a release, extend or fence write-back
    /// (acquires use their wait).
    response_timeout: Duration,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// How connecting to one node went.
pub(crate) enum Connected {
    Up(Node),
    /// Unreachable right now; the node connects again on use.
    Down(Node, Error),
}

/// Waits between attempts to reach a node that refused or dropped the
/// connection: short at first (a restarted server is back within
/// milliseconds of listening), never longer than `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// The redis-rs client for one node: RESP3 unless the URL chose a protocol
/// (on RESP3 a connection reports its own death, see `link.rs`; the pub/sub
/// side needs it anyway, `force_resp3`).
pub(crate) fn open(url: &NodeUrl, force_resp3: bool, tls: &Tls) -> Result<Target, Error> {
    let info = if url.protocol_given && !force_resp3 {
        url.info.clone()
    } else {
        let settings = url
            .info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        url.info.clone().set_redis_settings(settings)
    };
    tls.target(info, &url.redacted)
}

impl Node {
    /// Connect and wait for the first connection (AUTH, SELECT included),
    /// giving up after `connect_timeout`. Bad credentials are a hard error;
    /// an unreachable server comes back as `Down` with a node that connects
    /// on use, so the caller can decide whether a minority of down nodes is
    /// acceptable (Redlock).
    pub(crate) async fn connect(
        url: &NodeUrl,
        target: Target,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Connected, Error> {
        let label: Arc<str> = url.redacted.as_str().into();
        let password: Option<Arc<str>> = url.password.as_deref().map(Into::into);
        let link = Arc::new(Link::new(target, connect_timeout, response_timeout, None));
        let node = Node {
            conn: Conn::Single(Arc::clone(&link)),
            label,
            password,
            response_timeout,
        };
        let err = match link.connection(connect_timeout).await {
            Ok(live) => {
                let mut conn = live.conn.clone();
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
                            tracing::debug!(node = %node.label, error = %e.category(), "SCRIPT LOAD at connect failed; scripts load on first use");
                        }
                        node.check_eviction_policy(&mut conn).await;
                        return Ok(Connected::Up(node));
                    }
                }
            }
            Err(e) => e,
        };
        let error = Error::redis(None, node.describe(&err));
        if is_fatal_connect_error(&err) {
            return Err(error);
        }
        Ok(Connected::Down(node, error))
    }

    /// Warn when the server may evict our keys: a lock key evicted while
    /// held lets a second holder in, and an evicted fence key restarts the
    /// counter's stored value. Only `noeviction` (the default) keeps them.
    /// Best effort: an ACL user without `CONFIG` is not told (a debug line).
    async fn check_eviction_policy(&self, conn: &mut redis::aio::MultiplexedConnection) {
        let mut get = redis::cmd("CONFIG");
        get.arg("GET").arg("maxmemory-policy");
        let policy = match conn.send_packed_command(&get).await {
            Ok(Value::Array(items)) if items.len() == 2 => match &items[1] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return,
            },
            Ok(Value::Map(pairs)) if pairs.len() == 1 => match &pairs[0].1 {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return,
            },
            other => {
                tracing::debug!(node = %self.label, reply = ?other.map(|_| ()), "CONFIG GET maxmemory-policy not permitted; eviction policy not checked");
                return;
            }
        };
        if let Some(risk) = eviction_risk(&policy) {
            tracing::warn!(
                node = %self.label,
                policy = %policy,
                "Redis maxmemory-policy {policy} can evict {risk} when memory runs out: a lock \
                 could then be taken twice and fences repeat; use maxmemory-policy noeviction"
            );
        }
    }

    /// A node of another topology (see `topology.rs`).
    pub(crate) fn from_conn(
        conn: Conn,
        label: &str,
        password: Option<&str>,
        response_timeout: Duration,
    ) -> Node {
        Node {
            conn,
            label: label.into(),
            password: password.map(Into::into),
            response_timeout,
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// The data connection, for commands other than the core's scripts
    /// (listing's `SCAN`, see `scan.rs`).
    pub(crate) fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// Run one core command. Every call yields exactly one reply: server
    /// errors as `Reply::Error`, anything that leaves the outcome open (IO
    /// error or timeout after the command was handed to a connection) as
    /// `Reply::Unknown`, never resent.
    ///
    /// A command that provably never reached the server — no connection
    /// could be made (refused, reset, timed out), or the last one is known
    /// dead (the server closed it: restart, CLIENT KILL) — goes out on a
    /// fresh connection, retried with a short backoff until `retry_until`
    /// (`None`: no bound; at least one fresh attempt is always made). If the
    /// node stays unreachable it is `Reply::Error`: a definite "not run",
    /// so the core has nothing to compensate.
    /// `give_up` (the caller cancelled, the client closed) ends the retries
    /// early, as an error: nothing was sent.
    pub(crate) async fn run(
        &self,
        command: &Command,
        retry_until: Option<tokio::time::Instant>,
        mut give_up: tokio::sync::watch::Receiver<bool>,
    ) -> Reply {
        let link = match &self.conn {
            Conn::Single(link) => link,
            // Cluster and Sentinel connections find and replace their
            // servers themselves.
            other => {
                let result = self.run_once(other.clone(), command).await;
                return self.to_reply(command, result);
            }
        };
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = self.link_attempt_bound(retry_until, true);
        let live = loop {
            match link.connection(attempt).await {
                Ok(live) => break live,
                Err(e) => {
                    let resume = tokio::time::Instant::now() + backoff;
                    if is_fatal_connect_error(&e) || retry_until.is_some_and(|end| resume >= end) {
                        let text = self.describe(&e);
                        tracing::debug!(node = %self.label, error = %text, "node unreachable; command not sent");
                        return Reply::Error(self.secret_free(command, &text));
                    }
                    tracing::debug!(node = %self.label, error = %self.describe(&e), "node unreachable; connecting again");
                    let stopped = tokio::select! {
                        () = tokio::time::sleep_until(resume) => false,
                        _ = give_up.wait_for(|stop| *stop) => true,
                    };
                    if stopped {
                        return Reply::Error(self.secret_free(command, &self.describe(&e)));
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt = self.link_attempt_bound(retry_until, false);
                }
            }
        };
        let result = self.run_once(Conn::Live(live.conn.clone()), command).await;
        if let Err(e) = &result {
            live.check(e);
        }
        self.to_reply(command, result)
    }

    /// How long one connection attempt may take: the connect timeout, cut to
    /// what is left of `retry_until` after the first attempt.
    fn link_attempt_bound(
        &self,
        retry_until: Option<tokio::time::Instant>,
        first: bool,
    ) -> Duration {
        match retry_until {
            Some(end) if !first => end
                .saturating_duration_since(tokio::time::Instant::now())
                .max(Duration::from_millis(1)),
            _ => Duration::MAX,
        }
    }

    /// When a command that was not sent stops being retried. With one node:
    /// an acquire at the end of its wait (`None`: it waits for ever),
    /// anything else within the response timeout. With several (Redlock)
    /// one fresh attempt only: the round must not wait for one dead node
    /// while a majority answers, and the core retries rounds itself.
    pub(crate) fn retry_bound(
        &self,
        command: &Command,
        acquire_deadline: Option<tokio::time::Instant>,
        nodes: usize,
    ) -> Option<tokio::time::Instant> {
        if nodes > 1 {
            Some(tokio::time::Instant::now())
        } else if command.script.is_acquire() {
            acquire_deadline
        } else {
            Some(tokio::time::Instant::now() + self.response_timeout)
        }
    }

    pub(crate) fn describe(&self, e: &RedisError) -> String {
        describe_error(&self.label, self.password.as_deref(), e)
    }

    /// `EVALSHA`, and `EVAL` on NOSCRIPT.
    async fn run_once(&self, mut conn: Conn, command: &Command) -> redis::RedisResult<Value> {
        // Sized up front: growing it argument by argument cost 6 % of the
        // instructions of an acquire + release (callgrind, bench/README.md).
        let bytes = 60
            + command.keys.iter().map(|k| k.len()).sum::<usize>()
            + command.args.iter().map(|a| a.len()).sum::<usize>();
        let mut evalsha =
            redis::Cmd::with_capacity(3 + command.keys.len() + command.args.len(), bytes);
        evalsha.arg("EVALSHA").arg(command.script.sha1());
        keys_and_args(&mut evalsha, command);
        let publishes = command.script.publishes();
        let sharded = conn.sharded() && publishes;
        if sharded {
            // A release's notification goes out as SPUBLISH, to
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
        eval.arg(command.script.source());
        keys_and_args(&mut eval, command);
        if sharded {
            eval.arg("SPUBLISH");
        }
        crate::replicas::send(&mut conn, eval, command.wait_replicas).await
    }

    /// The core's input for one command: what came back, uninterpreted.
    /// Only whether the command ran is decided here (a server error: it did
    /// not; an IO error or a timeout after sending: unknown); what a reply
    /// means for the lock is read in the core (`core/src/lock/outcomes.rs`).
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

/// `numkeys key... arg...`, as `EVALSHA` and `EVAL` take them.
fn keys_and_args(cmd: &mut redis::Cmd, command: &Command) {
    cmd.arg(command.keys.len());
    for bytes in command.keys.iter().chain(&command.args) {
        cmd.arg(&**bytes);
    }
}

/// What an eviction policy may remove of ours, if anything.
fn eviction_risk(policy: &str) -> Option<&'static str> {
    if policy.starts_with("allkeys-") {
        Some("any key, held locks and fence counters included")
    } else if policy.starts_with("volatile-") {
        Some("keys with a TTL, held locks and fence counters included")
    } else {
        None
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
        // The OS's wording, or ours with the reason (a Sentinel group
        // without a reachable primary says why: TLS, auth, ...).
        let text = e.to_string();
        if text.to_ascii_lowercase().starts_with("connection refused") {
            "connection refused".to_owned()
        } else {
            text
        }
    } else {
        e.to_string()
    };
    scrub(&format!("{label}: {what}"), password)
}
