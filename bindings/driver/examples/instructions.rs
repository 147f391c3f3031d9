//! CPU cost of the driver, for `valgrind --tool=callgrind` (instruction
//! counts are stable on a busy machine, unlike wall-clock time):
//!
//!     for mode in none raw lock; do
//!       valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!         target/release/examples/instructions redis://127.0.0.1:6379/0 $mode 2000
//!     done
//!
//! (raw - none) / n = instructions per bare EVALSHA on a multiplexed
//! connection; (lock - none) / n = per acquire+release (two EVALSHAs).
//! Everything runs on one current-thread runtime.

use std::time::Duration;

use fencelock::{Client, LockOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/0".into());
    let mode = args.next().unwrap_or_else(|| "lock".into());
    let n: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let raw = redis::Client::open(url.as_str())?;
        let mut conn = raw.get_multiplexed_async_connection().await?;
        let client = Client::connect(url.as_str()).await?;
        let source = "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 1000) and 1";
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query_async(&mut conn)
            .await?;
        let options = LockOptions::new(Duration::from_secs(10));
        // Warm both paths in every mode so only the loop differs.
        for _ in 0..10 {
            client.acquire("instr", &options).await?.release().await?;
        }
        match mode.as_str() {
            "raw" => {
                for _ in 0..n {
                    let _: i64 = redis::cmd("EVALSHA")
                        .arg(&sha)
                        .arg(1)
                        .arg("instr:raw")
                        .arg("x")
                        .query_async(&mut conn)
                        .await?;
                }
            }
            "lock" => {
                for _ in 0..n {
                    client.acquire("instr", &options).await?.release().await?;
                }
            }
            _ => {}
        }
        client.close().await;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
