#!/usr/bin/env bash
# Rust suite: the workspace's default members (core + driver). Plain
# `cargo test` at the root tests default-members; `--workspace` would also
# build the PyO3/napi binding crates as test executables, which cannot link
# outside Python/Node (those are tested by ci/test-python.sh / test-node.sh).
# Uses FENCELOCK_TEST_REDIS_URL / FENCELOCK_TEST_REDLOCK_URLS when exported;
# otherwise the driver's fixtures start private redis-servers.
set -euo pipefail
cd "$(dirname "$0")/.."
# --no-fail-fast: a failing test binary must not hide the results of the rest.
cargo test --locked --no-fail-fast "$@"
