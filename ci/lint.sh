#!/usr/bin/env bash
# Formatting and clippy for core + driver (warnings are errors).
set -euo pipefail
cd "$(dirname "$0")/.."
rc=0
cargo fmt --check -p fencelock-core -p fencelock || rc=1
cargo clippy --locked -p fencelock-core -p fencelock --all-targets -- -D warnings || rc=1
exit $rc
