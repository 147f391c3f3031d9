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
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use crate::link::Link;
use crate::sentinel::SentinelConn;

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

/// One server behind a [`Conn`], for commands whose answer differs per
/// server (a `SCAN` cursor): a cluster's primary, by the address the slot
/// map gives it, or the one server of any other connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Server {
    Only,
    Primary { host: String, port: u16 },
}

impl Conn {
    /// A cluster publishes release notifications on the shard (SPUBLISH), so
    /// they reach only the shard's sharded subscribers.
    pub(crate) fn sharded(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Send `cmd` to every server holding data at once (every primary of a
    /// cluster; otherwise the one server): each one's answer.
    pub(crate) async fn on_every_primary(
        &mut self,
        cmd: &Cmd,
    ) -> RedisResult<Vec<(Server, RedisResult<Value>)>> {
        let Conn::Cluster(cluster) = self else {
            return Ok(vec![(Server::Only, self.req_packed_command(cmd).await)]);
        };
        let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        // Without a response policy redis-rs answers with a map from each
        // primary's "host:port" to its reply.
        let Value::Map(answers) = cluster.route_command(cmd.clone(), all).await? else {
            return Err(unexpected("no per-primary answers"));
        };
        answers
            .into_iter()
            .map(|(address, value)| {
                let address = match address {
                    Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
                    Value::SimpleString(text) => Some(text),
                    _ => None,
                };
                let (host, port) = address
                    .as_deref()
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(host, port)| Some((host.to_owned(), port.parse().ok()?)))
                    .ok_or_else(|| unexpected("a primary without a host:port address"))?;
                let value = match value {
                    Value::ServerError(e) => Err(RedisError::from(e)),
                    other => Ok(other),
                };
                Ok((Server::Primary { host, port }, value))
            })
            .collect()
    }

    /// Send `cmd` to `server` (from [`Conn::on_every_primary`]).
    pub(crate) async fn on(&mut self, server: &Server, cmd: &Cmd) -> RedisResult<Value> {
        match (self, server) {
            (Conn::Cluster(cluster), Server::Primary { host, port }) => {
                let at = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                cluster
                    .route_command(cmd.clone(), RoutingInfo::SingleNode(at))
                    .await
            }
            (conn, _) => conn.req_packed_command(cmd).await,
        }
    }
}

fn unexpected(what: &'static str) -> RedisError {
    RedisError::from((
        redis::ErrorKind::Client,
        "unexpected cluster reply",
        what.to_owned(),
    ))
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
