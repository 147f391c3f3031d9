//! Connecting a cluster or a Sentinel-managed primary (the [`Topology`]s
//! other than a single node or Redlock): one [`Node`] for the core and its
//! notifier.

use crate::connection::{describe_error, is_fatal_connect_error, Node};
use crate::notify::Notifier;
use crate::sentinel::SentinelConn;
use crate::topology::{Conn, Topology};
use crate::url::NodeUrl;
use crate::ClientConfig;
use fencelock_core::Error;
use std::sync::Arc;

/// Connect a cluster or a Sentinel-managed primary: one [`Node`] (the core
/// sees a single Redis) and its notifier. Fails fast, like a single node:
/// within the connect timeout when no seed / no Sentinel / no primary
/// answers.
pub(crate) async fn connect(
    urls: &[NodeUrl],
    options: &ClientConfig,
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
            let data = crate::cluster::builder(
                urls,
                options.connect_timeout,
                options.response_timeout,
                tls,
            )
            .build()
            .map_err(|e| fail(&label, e))?;
            let conn = crate::cluster::connect(&data, options.connect_timeout)
                .await
                .map_err(|e| fail(&label, e))?;
            let notifier = Notifier::new_cluster(
                crate::cluster::builder(
                    urls,
                    options.connect_timeout,
                    options.response_timeout,
                    tls,
                ),
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
            let conn = SentinelConn::new(
                urls,
                service,
                &urls[0],
                tls,
                options.connect_timeout,
                options.response_timeout,
            )?;
            let primary = conn.connect().await.map_err(|e| fail(&label, e))?;
            // Release notifications come from the primary found now; after a
            // failover they stop (until the client reconnects) and waiters
            // fall back to the core's timed retries.
            let mut primary_url = crate::url::parse(&conn.primary_url(&primary))?;
            primary_url.info = primary_url
                .info
                .set_redis_settings(urls[0].info.redis_settings().clone());
            primary_url.password = urls[0].password.clone();
            let notifier = Notifier::new(
                &[primary_url],
                options.connect_timeout,
                options.response_timeout,
                tls,
                handle,
            )?;
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
