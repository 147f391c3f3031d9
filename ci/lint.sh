#!/usr/bin/env bash
# Formatting of every crate; clippy (warnings are errors) for the core, the
# driver and the bindings (their lib targets: PyO3/napi test binaries can't
# link outside Python/Node). bindings/wasm and core/fuzz are workspaces of
# their own, so nothing else builds them when the core's API changes: each
# is linted here in its own target dir (wasm for the host, where
# wasm-bindgen compiles too; the fuzz harness without libFuzzer, as its
# tests run).
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
cargo fmt --all --check || rc=1
cargo clippy --locked -p fencelock-core -p fencelock -p fencelock-testkit --all-targets -- -D warnings || rc=1
cargo clippy --locked -p fencelock-python -p fencelock-node -- -D warnings || rc=1
cargo fmt --manifest-path bindings/wasm/Cargo.toml --check || rc=1
CARGO_TARGET_DIR=target/wasm-lint cargo clippy --locked --manifest-path bindings/wasm/Cargo.toml -- -D warnings || rc=1
cargo fmt --manifest-path core/fuzz/Cargo.toml --check || rc=1
CARGO_TARGET_DIR=target/fuzz-lint cargo clippy --locked --manifest-path core/fuzz/Cargo.toml \
    --no-default-features --all-targets -- -D warnings || rc=1
exit $rc
