//! The nemesis's view of a Redis Cluster and of a Sentinel group: who owns
//! the lock's slot, who replicates whom, moving a slot (the resharding
//! `redis-cli --cluster reshard` does, for one slot), and which primary the
//! Sentinels name. Through the checker's own RESP client only.

use std::time::Duration;

use crate::resp::{self, Value};

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// For a replica: its primary's id.
    pub primary_id: Option<String>,
    pub slots: Vec<(u16, u16)>,
}

fn text(v: Result<Value, String>) -> Result<String, String> {
    match v? {
        Value::Simple(s) => Ok(s),
        Value::Bulk(Some(s)) => Ok(String::from_utf8_lossy(&s).into_owned()),
        Value::Error(e) => Err(e),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// `CLUSTER NODES` as seen from `port`.
pub async fn nodes(port: u16) -> Result<Vec<ClusterNode>, String> {
    let raw = text(resp::cmd_str(port, &["CLUSTER", "NODES"]).await)?;
    let mut nodes = Vec::new();
    for line in raw.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let port = f[1]
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("bad CLUSTER NODES line {line}"))?;
        let flags = f[2];
        let slots = f[8..]
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => s.parse().ok().map(|a| (a, a)),
            })
            .collect();
        nodes.push(ClusterNode {
            id: f[0].to_owned(),
            port,
            primary: flags.contains("master"),
            failed: flags.contains("fail"),
            primary_id: (f[3] != "-").then(|| f[3].to_owned()),
            slots,
        });
    }
    Ok(nodes)
}

pub async fn keyslot(port: u16, key: &[u8]) -> Result<u16, String> {
    match resp::cmd(port, &[b"CLUSTER", b"KEYSLOT", key]).await? {
        Value::Int(n) => Ok(n as u16),
        other => Err(format!("CLUSTER KEYSLOT: {other:?}")),
    }
}

/// The live primary owning `slot`, as `port` sees the cluster.
pub fn owner(nodes: &[ClusterNode], slot: u16) -> Option<&ClusterNode> {
    nodes
        .iter()
        .find(|n| n.primary && !n.failed && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
}

/// A replica of the node with id `primary`.
pub fn replica_of<'a>(nodes: &'a [ClusterNode], primary: &str) -> Option<&'a ClusterNode> {
    nodes
        .iter()
        .find(|n| !n.primary && !n.failed && n.primary_id.as_deref() == Some(primary))
}

/// Wait (up to `within`) until every live node in `ports` agrees that
/// `slot` belongs to a primary other than `old` and the cluster is ok;
/// returns the new owner's port.
pub async fn wait_new_owner(
    ports: &[u16],
    slot: u16,
    old: u16,
    within: Duration,
) -> Result<u16, String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut agreed = None;
        let mut all = true;
        for &port in ports {
            let Ok(view) = nodes(port).await else {
                continue; // down
            };
            let ok = text(resp::cmd_str(port, &["CLUSTER", "INFO"]).await)
                .is_ok_and(|i| i.contains("cluster_state:ok"));
            match owner(&view, slot).map(|n| n.port) {
                Some(p) if p != old && ok && agreed.is_none_or(|a| a == p) => agreed = Some(p),
                _ => all = false,
            }
        }
        if let (true, Some(p)) = (all, agreed) {
            return Ok(p);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("slot {slot} found no new owner within {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Move `slot` from `src` to `dst` the way `redis-cli --cluster reshard`
/// does: IMPORTING/MIGRATING, MIGRATE the keys, then SETSLOT NODE
/// everywhere. Clients see ASK, TRYAGAIN and MOVED meanwhile.
pub async fn move_slot(
    all: &[u16],
    src: &ClusterNode,
    dst: &ClusterNode,
    slot: u16,
) -> Result<(), String> {
    let s = slot.to_string();
    ok(resp::cmd_str(dst.port, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src.id]).await)?;
    ok(resp::cmd_str(src.port, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst.id]).await)?;
    loop {
        let keys = match resp::cmd_str(src.port, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).await? {
            Value::Array(Some(keys)) => keys,
            other => return Err(format!("GETKEYSINSLOT: {other:?}")),
        };
        if keys.is_empty() {
            break;
        }
        let port = dst.port.to_string();
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            b"127.0.0.1",
            port.as_bytes(),
            b"",
            b"0",
            b"5000",
            b"REPLACE",
            b"KEYS",
        ];
        args.extend(keys.iter().filter_map(Value::as_bytes));
        if let Value::Error(e) = resp::cmd(src.port, &args).await? {
            return Err(format!("MIGRATE: {e}"));
        }
    }
    // The new owner first, then the old one, then everyone else.
    ok(resp::cmd_str(dst.port, &["CLUSTER", "SETSLOT", &s, "NODE", &dst.id]).await)?;
    ok(resp::cmd_str(src.port, &["CLUSTER", "SETSLOT", &s, "NODE", &dst.id]).await)?;
    for &port in all {
        if port != src.port && port != dst.port {
            let _ = resp::cmd_str(port, &["CLUSTER", "SETSLOT", &s, "NODE", &dst.id]).await;
        }
    }
    Ok(())
}

fn ok(v: Result<Value, String>) -> Result<(), String> {
    match v? {
        Value::Error(e) => Err(e),
        _ => Ok(()),
    }
}

/// The primary's port that the Sentinel on `port` names for `service`.
pub async fn sentinel_primary(port: u16, service: &str) -> Option<u16> {
    match resp::cmd_str(port, &["SENTINEL", "get-master-addr-by-name", service]).await {
        Ok(Value::Array(Some(v))) => v
            .get(1)
            .and_then(Value::as_bytes)
            .and_then(|p| std::str::from_utf8(p).ok()?.parse().ok()),
        _ => None,
    }
}

/// `redis-cli --cluster create` over `ports` (3 primaries, 1 replica each),
/// then wait for every node to report the cluster ok, its final role (a
/// primary with its replica attached, or a replica synced), and a view of
/// as many primaries as replicas. Until gossip settles, a view can still show
/// a new replica as a primary without slots: a nemesis that took it for
/// one failed with "Please use SETSLOT only with masters".
pub async fn create_cluster(ports: &[u16]) -> Result<(), String> {
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = tokio::process::Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .output()
        .await
        .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    for _ in 0..300 {
        let mut ready = 0;
        for &port in ports {
            let info = text(resp::cmd_str(port, &["CLUSTER", "INFO"]).await).unwrap_or_default();
            let repl =
                text(resp::cmd_str(port, &["INFO", "replication"]).await).unwrap_or_default();
            let settled = (repl.contains("role:master") && repl.contains("connected_slaves:1"))
                || (repl.contains("role:slave") && repl.contains("master_link_status:up"));
            let agreed = nodes(port).await.is_ok_and(|view| {
                view.len() == ports.len()
                    && view.iter().filter(|n| n.primary).count() == ports.len() / 2
            });
            if info.contains("cluster_state:ok") && settled && agreed {
                ready += 1;
            }
        }
        if ready == ports.len() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("the cluster never became ok".into())
}
