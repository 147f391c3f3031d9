//! RESP for the nemesis and the final checks: fencelock-testkit's client
//! (independent of the library under test and of redis-rs, so a driver bug
//! cannot hide here), one command per connection, bounded by a timeout, run
//! on tokio's blocking pool.

use std::time::Duration;

pub use fencelock_testkit::resp::Value;

/// Send one command to 127.0.0.1:`port`, return its reply (2 s bound per
/// step).
pub async fn cmd(port: u16, args: &[&[u8]]) -> Result<Value, String> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        fencelock_testkit::resp::cmd(port, &args, Duration::from_secs(2))
    })
    .await
    .map_err(|e| e.to_string())?
}

pub async fn cmd_str(port: u16, args: &[&str]) -> Result<Value, String> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd(port, &args).await
}
