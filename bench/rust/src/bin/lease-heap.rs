//! Where a held lease's client memory goes: a counting allocator over
//! `LEASES` held (non-renewing, uncontended) leases of one client, printing
//! the bytes and allocations still live per lease and how they spread over
//! allocation sizes. `make bench`'s `mem` row measures the RSS; this says
//! what makes it up (bench/README.md, "Memory per held lease").
//!
//!   cargo run --release -p fencelock-bench --bin lease-heap -- redis://127.0.0.1:6379/0

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::time::Duration;

use fencelock::{Client, LockOptions};

const LEASES: usize = 10_000;
/// Live allocations counted per 16-byte size class, up to 4 KiB.
const CLASSES: usize = 257;

struct Counting;

static BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    (size / 16).min(CLASSES - 1)
}

fn count(size: usize, sign: i64) {
    BYTES.fetch_add(sign * size as i64, Relaxed);
    LIVE[class(size)].fetch_add(sign, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 1);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(layout.size(), -1);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(layout.size(), -1);
        count(new_size, 1);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn snapshot() -> (i64, Vec<i64>) {
    let live = LIVE.iter().map(|c| c.load(Relaxed)).collect();
    (BYTES.load(Relaxed), live)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: lease-heap REDIS_URL")?;
    let client = Client::connect(vec![url]).await?;
    // Long enough to hold them all while counting, even on a slow machine.
    let options = LockOptions::new(Duration::from_secs(300));
    // Warm: the connection, the scripts and the runtime's first buffers.
    for i in 0..200 {
        let lease = client
            .acquire(format!("bench:heap:warm:{i}"), &options)
            .await?;
        lease.release().await?;
    }
    let mut held = Vec::with_capacity(LEASES);
    let (bytes0, live0) = snapshot();
    // Names as long as `make bench`'s `mem` scenario's.
    for i in 0..LEASES {
        held.push(
            client
                .acquire(format!("bench:mem:rust-fencelock:{i}"), &options)
                .await?,
        );
    }
    let (bytes1, live1) = snapshot();
    let per_lease = |n: i64| n as f64 / LEASES as f64;
    let allocations: i64 = live1.iter().zip(&live0).map(|(a, b)| a - b).sum();
    println!(
        "per held lease: {:.0} bytes in {:.2} allocations (the Lease itself, {} bytes, is the caller's)",
        per_lease(bytes1 - bytes0),
        per_lease(allocations),
        std::mem::size_of::<fencelock::Lease>(),
    );
    for (i, (a, b)) in live1.iter().zip(&live0).enumerate() {
        // Classes most leases use; the rest is map growth and noise.
        if (a - b).unsigned_abs() >= LEASES as u64 / 2 {
            println!(
                "  {:>4}-{:<4} bytes: {:+.2} per lease",
                i * 16,
                i * 16 + 15,
                per_lease(a - b)
            );
        }
    }
    for lease in held {
        lease.release().await?;
    }
    client.close().await;
    Ok(())
}
