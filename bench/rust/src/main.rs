//! The Rust side of `make bench` (see bench/README.md): runs one scenario for
//! one or more implementations and prints one JSON line per implementation.
//!
//!     fencelock-bench SCENARIO --impls fencelock,floor --url redis://... \
//!         [--urls u1,u2,...] [--replica-url u] [--secs 1.0] [--workers 64] [--leases 10000]
//!
//! Scenarios: s1 (sequential acquire+release), s2 (N workers, own keys),
//! s3 (N workers, one key), s4 (s1 over the Redlock URLs), s1r (s1 on a
//! primary with one replica), mem (hold N leases, report the RSS growth,
//! wait for a line on stdin, exit).
//! Implementations: `fencelock` (the crate), `fencelock-replicas1` (the
//! crate with `replicas: 1`) and `floor` (hand-written
//! SET NX PX + EVALSHA compare-and-delete on one multiplexed redis-rs
//! connection: the least any lock can do in two round trips).

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencelock::{Client, Lease, LockOptions};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Lock TTL: 10 s; 300 s for `mem` (holding 10,000 locks takes the slowest
/// peer longer than 10 s, and they must all still be held when Redis is read).
static TTL_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(10_000);

fn ttl_ms() -> u64 {
    TTL_MS.load(std::sync::atomic::Ordering::Relaxed)
}

const RELEASE_LUA: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

struct Args {
    scenario: String,
    impls: Vec<String>,
    url: String,
    urls: Vec<String>,
    /// A primary with one replica (s1r: what replicas=1 costs).
    replica_url: String,
    secs: f64,
    workers: usize,
    leases: usize,
    /// Profiling: a fixed number of cycles per worker instead of `secs`.
    cycles: Option<u64>,
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let scenario = it
        .next()
        .expect("usage: fencelock-bench SCENARIO --impls ...");
    let mut map = HashMap::new();
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        map.insert(k.trim_start_matches("--").to_owned(), v);
    }
    let get = |k: &str, d: &str| map.get(k).cloned().unwrap_or_else(|| d.to_owned());
    let split = |s: String| -> Vec<String> {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    };
    Args {
        scenario,
        impls: split(get("impls", "fencelock")),
        url: get("url", "redis://127.0.0.1:6379/0"),
        urls: split(get("urls", "")),
        replica_url: get("replica-url", ""),
        secs: get("secs", "1.0").parse().expect("--secs"),
        workers: get("workers", "1").parse().expect("--workers"),
        leases: get("leases", "10000").parse().expect("--leases"),
        cycles: map.get("cycles").map(|c| c.parse().expect("--cycles")),
    }
}

/// User + system CPU of the whole process (every thread), in microseconds.
fn cpu_us() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// One implementation, behind the operations the scenarios need.
enum Impl {
    Fencelock(Client),
    Floor(Vec<(redis::aio::MultiplexedConnection, String)>),
    FloorHop(Arc<Vec<(redis::aio::MultiplexedConnection, String)>>),
}

// Boxing the lease would add an allocation to the cycle being measured.
#[allow(clippy::large_enum_variant)]
enum Held {
    Lease(Lease),
    Raw(String, String),
}

impl Impl {
    async fn open(kind: &str, urls: Vec<String>) -> Result<Impl, BoxError> {
        match kind {
            "fencelock" => Ok(Impl::Fencelock(Client::connect(urls).await?)),
            // Every acquire waits for one replica's acknowledgement (WAIT 1,
            // pipelined with the script).
            "fencelock-replicas1" => {
                let options = fencelock::ClientOptions {
                    replicas: 1,
                    ..fencelock::ClientOptions::default()
                };
                Ok(Impl::Fencelock(Client::connect_with(urls, options).await?))
            }
            // The floor, but every operation runs in a freshly spawned task
            // the caller awaits: what one actor hop per operation costs.
            "floor-hop" => match Box::pin(Impl::open("floor", urls)).await? {
                Impl::Floor(nodes) => Ok(Impl::FloorHop(Arc::new(nodes))),
                _ => unreachable!(),
            },
            "floor" => {
                let mut nodes = Vec::new();
                for url in &urls {
                    let client = redis::Client::open(url.as_str())?;
                    let mut conn = client.get_multiplexed_async_connection().await?;
                    let sha: String = redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(RELEASE_LUA)
                        .query_async(&mut conn)
                        .await?;
                    nodes.push((conn, sha));
                }
                Ok(Impl::Floor(nodes))
            }
            other => Err(format!("unknown implementation {other}").into()),
        }
    }

    /// Acquire `name` (waiting as long as it takes) with a 10 s TTL.
    async fn acquire(&self, name: &str) -> Result<Held, BoxError> {
        match self {
            Impl::FloorHop(nodes) => {
                let (nodes, name) = (Arc::clone(nodes), name.to_owned());
                tokio::spawn(async move { floor_acquire(&nodes, &name).await }).await?
            }
            Impl::Fencelock(client) => {
                let options = LockOptions::new(Duration::from_millis(ttl_ms()));
                Ok(Held::Lease(client.acquire(name, &options).await?))
            }
            Impl::Floor(nodes) => floor_acquire(nodes, name).await,
        }
    }

    async fn release(&self, held: Held) -> Result<(), BoxError> {
        match (self, held) {
            (Impl::FloorHop(nodes), Held::Raw(name, token)) => {
                let nodes = Arc::clone(nodes);
                tokio::spawn(async move { floor_release(&nodes, &name, &token).await }).await?
            }
            (Impl::Fencelock(_), Held::Lease(lease)) => Ok(lease.release().await?),
            (Impl::Floor(nodes), Held::Raw(name, token)) => {
                floor_release(nodes, &name, &token).await
            }
            _ => unreachable!("a lease of another implementation"),
        }
    }
}

type FloorNodes = Vec<(redis::aio::MultiplexedConnection, String)>;

async fn floor_acquire(nodes: &FloorNodes, name: &str) -> Result<Held, BoxError> {
    // With several nodes: SET NX PX on all in parallel, a majority
    // wins (the least a Redlock can do; no fencing, no validity
    // maths, no undo on failure: a floor, not a lock).
    let token = uuid::Uuid::new_v4().hyphenated().to_string();
    loop {
        let sets = nodes.iter().map(|(conn, _)| {
            let mut conn = conn.clone();
            let token = &token;
            async move {
                redis::cmd("SET")
                    .arg(name)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms())
                    .query_async::<Option<String>>(&mut conn)
                    .await
            }
        });
        let won = futures_util::future::join_all(sets)
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(Some(_))))
            .count();
        if won > nodes.len() / 2 {
            return Ok(Held::Raw(name.to_owned(), token));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn floor_release(nodes: &FloorNodes, name: &str, token: &str) -> Result<(), BoxError> {
    let dels = nodes.iter().map(|(conn, sha)| {
        let mut conn = conn.clone();

        async move {
            redis::cmd("EVALSHA")
                .arg(sha)
                .arg(1)
                .arg(name)
                .arg(token)
                .query_async::<i64>(&mut conn)
                .await
        }
    });
    for r in futures_util::future::join_all(dels).await {
        r?;
    }
    Ok(())
}

#[derive(Default)]
struct Tally {
    lat_us: Vec<f64>,
    per_worker: Vec<u64>,
    errors: u64,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// `workers` loops until `until`: acquire (the latency recorded is from
/// asking to getting when `wait_only`, else the whole cycle) and release.
async fn phase(
    imp: Arc<Impl>,
    names: Vec<String>,
    until: Instant,
    count: Option<u64>,
    wait_only: bool,
) -> Tally {
    let mut tasks = Vec::new();
    for name in names {
        let imp = Arc::clone(&imp);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut done = 0u64;
            while count.map_or_else(|| Instant::now() < until, |c| done < c) {
                done += 1;
                let t0 = Instant::now();
                match imp.acquire(&name).await {
                    Ok(held) => {
                        let got = t0.elapsed();
                        match imp.release(held).await {
                            Ok(()) => {
                                let total = if wait_only { got } else { t0.elapsed() };
                                lat.push(total.as_secs_f64() * 1e6);
                            }
                            Err(_) => errors += 1,
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let mut tally = Tally::default();
    for task in tasks {
        let (lat, errors) = task.await.expect("worker panicked");
        tally.per_worker.push(lat.len() as u64);
        tally.lat_us.extend(lat);
        tally.errors += errors;
    }
    tally
}

async fn run_cycles(args: &Args, kind: &str) -> Result<String, BoxError> {
    let (urls, workers, shared_key, wait_only) = match args.scenario.as_str() {
        "s1" => (vec![args.url.clone()], 1, false, false),
        "s1r" => (vec![args.replica_url.clone()], 1, false, false),
        "s2" => (vec![args.url.clone()], args.workers, false, false),
        "s3" => (vec![args.url.clone()], args.workers, true, true),
        "s4" => (args.urls.clone(), 1, false, false),
        other => return Err(format!("unknown scenario {other}").into()),
    };
    let imp = Arc::new(Impl::open(kind, urls).await?);
    let run = uuid::Uuid::new_v4().simple().to_string();
    let names: Vec<String> = (0..workers)
        .map(|i| {
            if shared_key {
                format!("bench:{}:rust-{kind}:{run}", args.scenario)
            } else {
                format!("bench:{}:rust-{kind}:{run}:{i}", args.scenario)
            }
        })
        .collect();
    // Warm up (connections, script cache, allocator) on the same code path.
    let warm = Duration::from_secs_f64((args.secs / 4.0).min(0.3));
    let warm_count = args.cycles.map(|_| 100);
    phase(
        Arc::clone(&imp),
        names.clone(),
        Instant::now() + warm,
        warm_count,
        wait_only,
    )
    .await;

    let cpu0 = cpu_us();
    let t0 = Instant::now();
    let mut tally = phase(
        Arc::clone(&imp),
        names,
        t0 + Duration::from_secs_f64(args.secs),
        args.cycles,
        wait_only,
    )
    .await;
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_us() - cpu0;
    tally
        .lat_us
        .sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let cycles = tally.lat_us.len() as f64;
    let min = tally.per_worker.iter().copied().min().unwrap_or(0);
    let max = tally.per_worker.iter().copied().max().unwrap_or(0);
    if let Impl::Fencelock(client) = &*imp {
        client.close().await;
    }
    Ok(format!(
        concat!(
            "{{\"lang\":\"rust\",\"scenario\":\"{}\",\"impl\":\"{}\",\"cycles\":{},",
            "\"secs\":{:.4},\"rate\":{:.1},\"p50_us\":{:.1},\"p99_us\":{:.1},\"p999_us\":{:.1},",
            "\"cpu_us_per_cycle\":{:.2},\"errors\":{},\"min_per_worker\":{},",
            "\"max_per_worker\":{},\"workers\":{}}}"
        ),
        args.scenario,
        kind,
        cycles,
        elapsed,
        cycles / elapsed,
        pct(&tally.lat_us, 0.50),
        pct(&tally.lat_us, 0.99),
        pct(&tally.lat_us, 0.999),
        if cycles > 0.0 { cpu / cycles } else { f64::NAN },
        tally.errors,
        min,
        max,
        workers,
    ))
}

/// Hold `leases` locks, print the RSS growth, wait for a line on stdin (the
/// orchestrator measures Redis meanwhile), then release everything.
async fn run_mem(args: &Args, kind: &str) -> Result<(), BoxError> {
    let imp = Arc::new(Impl::open(kind, vec![args.url.clone()]).await?);
    // Warm: the connection, scripts and the runtime's first allocations.
    for i in 0..200 {
        let held = imp.acquire(&format!("bench:mem:warm:{i}")).await?;
        imp.release(held).await?;
    }
    let rss0 = rss_bytes();
    let mut held = Vec::with_capacity(args.leases);
    let mut next = 0;
    while next < args.leases {
        let end = (next + 256).min(args.leases);
        let batch = (next..end).map(|i| {
            let imp = Arc::clone(&imp);
            async move { imp.acquire(&format!("bench:mem:rust-{kind}:{i}")).await }
        });
        for r in futures_util::future::join_all(batch).await {
            held.push(r?);
        }
        next = end;
    }
    let rss1 = rss_bytes();
    println!(
        "{{\"lang\":\"rust\",\"scenario\":\"mem\",\"impl\":\"{kind}\",\"leases\":{},\"rss_bytes_per_lease\":{:.1},\"holding\":true}}",
        held.len(),
        (rss1 as f64 - rss0 as f64) / held.len() as f64
    );
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    for h in held {
        let _ = imp.release(h).await;
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    // BENCH_RT=current: a current-thread runtime (no cross-thread wake-ups),
    // to tell scheduling costs from the driver's own.
    let runtime = match std::env::var("BENCH_RT").as_deref() {
        Ok("current") => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    }
    .enable_all()
    .build()?;
    runtime.block_on(run_all())
}

async fn run_all() -> Result<(), BoxError> {
    let args = parse_args();
    // BENCH_METRICS=1: count fencelock's metrics (what an installed
    // Prometheus hook turns on), to price them against the default (off).
    if std::env::var("BENCH_METRICS").as_deref() == Ok("1") {
        fencelock::metrics::enable();
    }
    if args.scenario == "mem" {
        TTL_MS.store(300_000, std::sync::atomic::Ordering::Relaxed);
    }
    for kind in &args.impls {
        if args.scenario == "mem" {
            run_mem(&args, kind).await?;
        } else {
            println!("{}", run_cycles(&args, kind).await?);
        }
    }
    Ok(())
}
