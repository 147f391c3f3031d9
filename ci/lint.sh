#!/usr/bin/env bash
# Formatting of every crate; clippy (warnings are errors) for the core, the
# driver and the bindings (their lib targets: PyO3/napi test binaries can't
# link outside Python/Node). bindings/wasm is its own workspace, linted for
# the host (wasm-bindgen compiles there too) in its own target dir.
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
cargo fmt --all --check || rc=1
cargo clippy --locked -p fencelock-core -p fencelock -p fencelock-testkit --all-targets -- -D warnings || rc=1
cargo clippy --locked -p fencelock-python -p fencelock-node -- -D warnings || rc=1
cargo fmt --manifest-path bindings/wasm/Cargo.toml --check || rc=1
CARGO_TARGET_DIR=target/wasm-lint cargo clippy --locked --manifest-path bindings/wasm/Cargo.toml -- -D warnings || rc=1
exit $rc
