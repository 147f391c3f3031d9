//! The one clock every worker (Rust, Python, Node) and the orchestrator
//! share: Linux CLOCK_MONOTONIC, in nanoseconds. Python's
//! `time.monotonic_ns()` and Node's `process.hrtime.bigint()` read the same
//! clock, so timestamps from different processes are comparable.

pub fn mono_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
