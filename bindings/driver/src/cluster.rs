//! Redis Cluster connections (redis-rs `cluster-async`): one for commands,
//! which routes each script by its first key's slot and follows MOVED/ASK
//! redirections and failovers by refreshing the slot map, and one for
//! sharded pub/sub (`SSUBSCRIBE`), which redis-rs moves to the new owner of
//! a channel's slot after a resharding or a failover.
//!
//! Every attempt, retries and redirections included, stays within the
//! response timeout; a command that runs out of it is an unknown outcome
//! that the core compensates like any other.

use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;

use crate::tls::Tls;
use crate::url::NodeUrl;

/// The seeds as one cluster client (credentials and TLS from the first URL,
/// as redis-rs does; the client's CA bundle and client certificate for every
/// node it finds).
pub(crate) fn builder(
    seeds: &[NodeUrl],
    connect_timeout: Duration,
    response_timeout: Duration,
    tls: &Tls,
) -> ClusterClientBuilder {
    let mut builder = ClusterClientBuilder::new(seeds.iter().map(|s| s.info.clone()));
    if seeds.iter().any(|s| s.tls) {
        if tls.skip_verification {
            // Set first: certificates alone would make the mode "secure".
            builder = builder.tls(redis::TlsMode::Insecure);
        }
        if let Some(certificates) = tls.certificates() {
            builder = builder.certs(certificates);
        }
    }
    builder
        .use_protocol(redis::ProtocolVersion::RESP3)
        .connection_timeout(connect_timeout)
        .response_timeout(response_timeout)
        // Redirections and a failing-over shard are retried quickly; the
        // response timeout bounds the whole command anyway.
        .min_retry_wait(10)
        .max_retry_wait(500)
}

/// Connect within `connect_timeout` (redis-rs reads the slot map from the
/// first seed that answers).
pub(crate) async fn connect(
    client: &ClusterClient,
    connect_timeout: Duration,
) -> redis::RedisResult<ClusterConnection> {
    tokio::time::timeout(
        connect_timeout + Duration::from_millis(50),
        client.get_async_connection(),
    )
    .await
    .map_err(|_| {
        redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no cluster seed answered in time",
        ))
    })?
}
