//! Quick latency check of the driver against a running Redis (not a
//! benchmark suite; those live under bench/):
//!
//!     cargo run --release -p fencelock --example latency -- redis://127.0.0.1:6379/0 [iterations]
//!
//! Prints the mean time of an uncontended acquire+release next to a bare
//! PING round trip and a bare EVALSHA round trip on one multiplexed
//! connection, i.e. the driver's overhead over the network.

use std::time::{Duration, Instant};

use fencelock::{Client, LockOptions};

/// Process CPU time (user + system), from /proc (Linux), so the overhead can
/// be judged on a busy machine where wall-clock latency is noise.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the ")": state is index 0, utime 11, stime 12; 100 ticks/s.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/0".into());
    let n: u32 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000);

    let raw = redis::Client::open(url.as_str())?;
    let mut conn = raw.get_multiplexed_async_connection().await?;
    let ping = redis::cmd("PING");
    for _ in 0..1000 {
        let _: String = ping.query_async(&mut conn).await?;
    }
    let t = Instant::now();
    for _ in 0..n {
        let _: String = ping.query_async(&mut conn).await?;
    }
    let ping_rtt = t.elapsed() / n;

    let source = "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 1000) and 1";
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query_async(&mut conn)
        .await?;
    let mut evalsha = redis::cmd("EVALSHA");
    evalsha.arg(&sha).arg(1).arg("latency:raw").arg("x");
    let t = Instant::now();
    let c = cpu();
    for _ in 0..n {
        let _: i64 = evalsha.query_async(&mut conn).await?;
    }
    let eval_cpu = (cpu() - c) / n;
    let eval_rtt = t.elapsed() / n;

    let client = Client::connect(url.as_str()).await?;
    let options = LockOptions::new(Duration::from_secs(10));
    for _ in 0..1000 {
        client.acquire("latency", &options).await?.release().await?;
    }
    let t = Instant::now();
    let c = cpu();
    for _ in 0..n {
        client.acquire("latency", &options).await?.release().await?;
    }
    let lock_cycle = t.elapsed() / n;
    let lock_cpu = (cpu() - c) / n;

    // From a task on a runtime worker (the usual async application).
    let in_task = {
        let client = client.clone();
        let options = options.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            for _ in 0..n {
                client
                    .acquire("latency-task", &options)
                    .await
                    .unwrap()
                    .release()
                    .await
                    .unwrap();
            }
            t.elapsed() / n
        })
        .await?
    };

    // The blocking path Python uses: block_on from a plain thread.
    let handle = tokio::runtime::Handle::current();
    let blocking = {
        let client = client.clone();
        let options = options.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = handle;
            let t = Instant::now();
            for _ in 0..n {
                let lease = rt
                    .block_on(client.acquire("latency-blocking", &options))
                    .unwrap();
                rt.block_on(lease.release()).unwrap();
            }
            t.elapsed() / n
        })
        .join()
        .unwrap()
    };

    println!(
        "PING round trip             {:>8.1} us",
        ping_rtt.as_secs_f64() * 1e6
    );
    println!(
        "EVALSHA round trip          {:>8.1} us",
        eval_rtt.as_secs_f64() * 1e6
    );
    println!(
        "acquire+release (2 RTT)     {:>8.1} us  ({:.2}x two EVALSHAs)",
        lock_cycle.as_secs_f64() * 1e6,
        lock_cycle.as_secs_f64() / (2.0 * eval_rtt.as_secs_f64())
    );
    println!(
        "CPU per EVALSHA {:.1} us, per acquire+release {:.1} us (client side, all threads)",
        eval_cpu.as_secs_f64() * 1e6,
        lock_cpu.as_secs_f64() * 1e6
    );
    println!(
        "  same from a worker task   {:>8.1} us",
        in_task.as_secs_f64() * 1e6
    );
    println!(
        "  same via block_on         {:>8.1} us",
        blocking.as_secs_f64() * 1e6
    );
    client.close().await;
    Ok(())
}
