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
