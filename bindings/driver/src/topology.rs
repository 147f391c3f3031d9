//! Which deployment a client's URLs describe, and the one data-connection
//! type that hides it from the rest of the driver: a single node's
//! self-reconnecting connection, a Redis Cluster connection (follows
//! MOVED/ASK and failovers), or the primary that Sentinels point at.
//!
//! The core never needs to know: every key of one lock hashes to one cluster
//! slot, so each of its commands goes to exactly one node whatever the
//! topology.

use std::sync::Arc;
use std::time::Duration;

use fencelock_core::Error;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::connection::{describe_error, is_fatal_connect_error, manager_config, Node};
use crate::link::Link;
use crate::notify::Notifier;
use crate::sentinel::SentinelConn;
use crate::url::NodeUrl;
use crate::ClientOptions;

/// How to read the URLs given to [`crate::Client::connect_with`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Topology {
    /// One URL: a single Redis. Several: independent Redlock nodes.
    #[default]
    Standalone,
    /// The URLs are seeds of one Redis Cluster (any reachable one will do).
    Cluster,
    /// The URLs are Sentinels; `service` names the primary they monitor.
    Sentinel { service: String },
}

impl Topology {
    /// The bindings' spelling: `topology` (absent, `"cluster"` or
    /// `"sentinel"`) and `service` (required by, and only allowed with,
    /// `"sentinel"`).
    pub fn parse(topology: Option<&str>, service: Option<&str>) -> Result<Topology, Error> {
        let parsed =
            match topology {
                None | Some("standalone") => Topology::Standalone,
                Some("cluster") => Topology::Cluster,
                Some("sentinel") => match service {
                    Some(s) if !s.is_empty() => Topology::Sentinel {
                        service: s.to_owned(),
                    },
                    _ => return Err(Error::invalid(
                        "topology \"sentinel\" needs service= (the name of the monitored primary)",
                    )),
                },
                Some(other) => {
                    return Err(Error::invalid(format!(
                "unknown topology {other:?}: expected \"standalone\", \"cluster\" or \"sentinel\""
            )))
                }
            };
        if service.is_some() && !matches!(parsed, Topology::Sentinel { .. }) {
            return Err(Error::invalid(
                "service= is only used with topology \"sentinel\"",
            ));
        }
        Ok(parsed)
    }
}

/// Connect a cluster or a Sentinel-managed primary: one [`Node`] (the core
/// sees a single Redis) and its notifier. Fails fast, like a single node:
/// within the connect timeout when no seed / no Sentinel / no primary
/// answers.
pub(crate) async fn connect(
    urls: &[NodeUrl],
    options: &ClientOptions,
    tls: &crate::tls::Tls,
    handle: &tokio::runtime::Handle,
) -> Result<(Node, Arc<Notifier>), Error> {
    let list = urls
        .iter()
        .map(|u| u.redacted.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let password = urls[0].password.as_deref();
    let fail = |label: &str, e: redis::RedisError| {
        let message = describe_error(label, password, &e);
        if is_fatal_connect_error(&e) {
            Error::redis(None, message)
        } else {
            Error::redis(None, format!("{message} (no server reachable)"))
        }
    };
    match &options.topology {
        Topology::Standalone => unreachable!("standalone nodes connect in client.rs"),
        Topology::Cluster => {
            let label = format!("cluster {list}");
            let data =
                crate::cluster::builder(urls, options.connect_timeout, options.response_timeout)
                    .build()
                    .map_err(|e| fail(&label, e))?;
            let conn = crate::cluster::connect(&data, options.connect_timeout)
                .await
                .map_err(|e| fail(&label, e))?;
            let notifier = Notifier::new_cluster(
                crate::cluster::builder(urls, options.connect_timeout, options.response_timeout),
                options.connect_timeout,
                label.clone(),
                handle,
            )?;
            Ok((
                Node::from_conn(
                    Conn::Cluster(conn),
                    &label,
                    password,
                    options.response_timeout,
                ),
                Arc::new(notifier),
            ))
        }
        Topology::Sentinel { service } => {
            let label = format!("sentinel {service:?} via {list}");
            let config = manager_config(options.connect_timeout, options.response_timeout);
            let conn = SentinelConn::new(
                urls,
                service,
                &urls[0],
                config.clone(),
                options.connect_timeout,
            );
            let primary = conn.connect().await.map_err(|e| fail(&label, e))?;
            // Release notifications come from the primary found now; after a
            // failover they stop (until the client reconnects) and waiters
            // fall back to the core's timed retries.
            let mut primary_url = crate::url::parse(&format!("redis://{primary}"))?;
            primary_url.info = primary_url
                .info
                .set_redis_settings(urls[0].info.redis_settings().clone());
            primary_url.password = urls[0].password.clone();
            let notifier = Notifier::new(&[primary_url], &config, tls, handle)?;
            Ok((
                Node::from_conn(
                    Conn::Sentinel(conn),
                    &label,
                    password,
                    options.response_timeout,
                ),
                Arc::new(notifier),
            ))
        }
    }
}

/// A data connection of any topology. Cheap to clone (all share one
/// multiplexed connection per server).
#[derive(Clone)]
pub(crate) enum Conn {
    /// A single node's connection, (re)made on use (see `link.rs`).
    Single(Arc<Link>),
    /// The current connection of a `Single` link, for one command.
    Live(MultiplexedConnection),
    Cluster(ClusterConnection),
    Sentinel(SentinelConn),
}

impl Conn {
    /// A cluster publishes release notifications on the shard (SPUBLISH), so
    /// they reach only the shard's sharded subscribers.
    pub(crate) fn sharded(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(link) => {
                let link = Arc::clone(link);
                Box::pin(async move {
                    let mut conn = link.connection(Duration::MAX).await?.conn;
                    conn.req_packed_command(cmd).await
                })
            }
            Conn::Live(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(link) => {
                let link = Arc::clone(link);
                Box::pin(async move {
                    let mut conn = link.connection(Duration::MAX).await?.conn;
                    conn.req_packed_commands(pipeline, offset, count).await
                })
            }
            Conn::Live(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(link) => link.db(),
            Conn::Live(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_bindings_spelling() {
        assert_eq!(Topology::parse(None, None).unwrap(), Topology::Standalone);
        assert_eq!(
            Topology::parse(Some("cluster"), None).unwrap(),
            Topology::Cluster
        );
        assert_eq!(
            Topology::parse(Some("sentinel"), Some("mymaster")).unwrap(),
            Topology::Sentinel {
                service: "mymaster".into()
            }
        );
        for (t, s) in [
            (Some("sentinel"), None),
            (Some("sentinel"), Some("")),
            (Some("cluster"), Some("mymaster")),
            (None, Some("mymaster")),
            (Some("Cluster"), None),
            (Some("redlock"), None),
        ] {
            assert!(
                matches!(Topology::parse(t, s), Err(Error::InvalidArgument(_))),
                "{t:?} {s:?}"
            );
        }
    }
}
