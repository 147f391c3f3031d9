#!/usr/bin/env bash
# Formatting of every crate; clippy (warnings are errors) for the core, the
# driver and both bindings (their lib targets: PyO3/napi test binaries can't
# link outside Python/Node).
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
cargo fmt --all --check || rc=1
cargo clippy --locked -p fencelock-core -p fencelock --all-targets -- -D warnings || rc=1
cargo clippy --locked -p fencelock-python -p fencelock-node -- -D warnings || rc=1
exit $rc
