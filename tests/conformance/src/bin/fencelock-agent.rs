//! Interop agent, Rust side: one `fencelock::Client` driven by JSON lines on
//! stdin (protocol: tests/python/test_interop.py), one reply line per
//! request on stdout. Usage: fencelock-agent REDIS_URL[,URL2,...] (several: Redlock)

use std::collections::HashMap;
use std::time::Duration;

use fencelock::{Client, Error, Lease, LockOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

fn kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::NotAcquired { .. } => "NotAcquired",
        Error::LockLost { .. } => "LockLost",
        Error::Redis { .. } => "Redis",
        Error::Closed { .. } => "Closed",
        Error::StaleFence { .. } => "StaleFence",
    }
}

fn ms(v: &Value) -> Option<Duration> {
    v.as_u64().map(Duration::from_millis)
}

async fn handle(
    client: &Client,
    leases: &mut HashMap<String, Lease>,
    req: &Value,
) -> Result<Value, Error> {
    let lease = req["lease"].as_str().and_then(|id| leases.get(id));
    Ok(match req["op"].as_str().unwrap_or("") {
        op @ ("acquire" | "try") => {
            let name = req["name"].as_str().expect("name");
            let mut options = LockOptions::new(ms(&req["ttl"]).expect("ttl"))
                .auto_renew(req["auto_renew"].as_bool().unwrap_or(false));
            if let Some(wait) = ms(&req["wait"]) {
                options = options.wait(wait);
            }
            let primitive = &req["primitive"];
            let got = if let Some(permits) = primitive["semaphore"].as_u64() {
                let sem = client.semaphore(name, permits as u32)?;
                match op {
                    "acquire" => Some(sem.acquire(&options).await?),
                    _ => sem.try_acquire(&options).await?,
                }
            } else if let Some(side) = primitive["rw"].as_str() {
                let rw = client.rw_lock(name)?;
                match (op, side) {
                    ("acquire", "read") => Some(rw.read(&options).await?),
                    ("acquire", _) => Some(rw.write(&options).await?),
                    (_, "read") => rw.try_read(&options).await?,
                    _ => rw.try_write(&options).await?,
                }
            } else if op == "acquire" {
                Some(client.acquire(name, &options).await?)
            } else {
                client.try_acquire(name, &options).await?
            };
            match got {
                None => json!({"ok": true, "lease": null}),
                Some(lease) => {
                    let id = leases.len().to_string();
                    let fence = lease.fence().to_string();
                    leases.insert(id.clone(), lease);
                    json!({"ok": true, "lease": id, "fence": fence})
                }
            }
        }
        "extend" => {
            lease.expect("lease").extend(ms(&req["ttl"])).await?;
            json!({"ok": true})
        }
        "release" => {
            lease.expect("lease").release().await?;
            json!({"ok": true})
        }
        "lost" => json!({"ok": true, "lost": lease.expect("lease").lost()}),
        other => json!({"ok": false, "error": format!("unknown op {other}")}),
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = std::env::args()
        .nth(1)
        .expect("usage: fencelock-agent REDIS_URL");
    // Several comma-separated URLs: Redlock.
    let urls: Vec<String> = url.split(',').map(str::to_owned).collect();
    let client = Client::connect(urls).await.expect("connect");
    let mut leases = HashMap::new();
    println!("{}", json!({"ready": true, "lang": "rust"}));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.expect("stdin") {
        let req: Value = serde_json::from_str(&line).expect("JSON request");
        let reply = match handle(&client, &mut leases, &req).await {
            Ok(reply) => reply,
            Err(e) => json!({"ok": false, "error": kind(&e), "message": e.to_string()}),
        };
        println!("{reply}");
    }
    client.close().await;
}
