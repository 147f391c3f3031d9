//! A libFuzzer-free loop over the same harness, for machines without a
//! nightly toolchain: random inputs (xorshift, seeded) for a bounded time and
//! count. A failing input is written to `artifacts/stable-crash-<n>` (replay
//! it with `cargo fuzz run lock_sequences <file>` or this binary's `--replay`).
//!
//! usage: stable_loop [--seconds S] [--iterations N] [--seed X] [--replay FILE]
use std::panic;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if let Some(file) = get("--replay") {
        let data = std::fs::read(&file).expect("read replay file");
        fencelock_core_fuzz::run(&data);
        println!("replay of {file}: no violation");
        return;
    }
    let seconds: u64 = get("--seconds").map_or(30, |s| s.parse().expect("seconds"));
    let iterations: u64 = get("--iterations").map_or(u64::MAX, |s| s.parse().expect("n"));
    let mut rng: u64 = get("--seed").map_or(0x9e37_79b9_7f4a_7c15, |s| s.parse().expect("seed"));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut n = 0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while n < iterations && Instant::now() < deadline {
        let len = (next() % 2048) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if panic::catch_unwind(|| fencelock_core_fuzz::run(&data)).is_err() {
            std::fs::create_dir_all("artifacts").ok();
            let path = format!("artifacts/stable-crash-{n}");
            std::fs::write(&path, &data).expect("write artifact");
            eprintln!("violation on input {n}; saved to {path}");
            std::process::exit(1);
        }
        n += 1;
    }
    println!("stable_loop: {n} inputs, no violation");
}
