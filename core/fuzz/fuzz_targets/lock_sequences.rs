//! libFuzzer target: bytes -> a config and a sequence of application calls,
//! replies (to outstanding, stale or unknown command ids), timeouts,
//! wake-ups and cancels, fed to `fencelock_core::Lock`. The invariants are
//! asserted in `fencelock_core_fuzz::run` (a panic is a finding).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fencelock_core_fuzz::run(data);
});
