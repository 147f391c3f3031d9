#!/usr/bin/env bash
# Cross-language suite (`make test` runs it through ci/test.sh; runs alone too):
#  1. the conformance vectors (tests/vectors/*.json) through Python's and
#     Node's public APIs, Node both native and fencelock/wasm (Rust checks
#     them in `cargo test`: tests/conformance);
#  2. interop: one lock shared by Rust, Python, Node and wasm agents, every
#     direction;
#  3. wire-level sameness: the same scenario from Rust, Python, Node and wasm
#     under MONITOR, the four masked command streams compared.
# Uses FENCELOCK_TEST_REDIS_URL when the harness set it, else private
# redis-servers. Needs the Python package in .build/venv and the Node addon
# (ci/test-python.sh, ci/test-node.sh build them); builds them if missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

bash demo/build.sh
venv="${FENCELOCK_PY_VENV:-$root/.build/venv}"

echo "test-interop: cargo build -p fencelock-conformance (Rust agent)"
cargo build --quiet --locked -p fencelock-conformance --bins
export FENCELOCK_RUST_AGENT="$root/target/debug/fencelock-agent"
export FENCELOCK_WIRE_DIR="$root/.build/wire"
rm -rf "$FENCELOCK_WIRE_DIR" && mkdir -p "$FENCELOCK_WIRE_DIR"

rc=0
echo "test-interop: pytest tests/python"
"$venv/bin/pytest" -q -p no:cacheprovider --timeout 120 tests/python || rc=1
echo "test-interop: node --test tests/node"
node --test --test-concurrency=1 tests/node/*.test.js || rc=1
for flavour in wasm wasm-node-redis; do  # fencelock/wasm over ioredis, over node-redis
  echo "test-interop: node --test tests/node, FENCELOCK_NODE_FLAVOUR=$flavour"
  FENCELOCK_NODE_FLAVOUR=$flavour FENCELOCK_FORCE_WASM=1 node --test --test-concurrency=1 tests/node/*.test.js || rc=1
done

echo "test-interop: the four MONITOR streams (Rust, Python, Node, wasm) are identical"
for lang in python node wasm; do
  if ! cmp -s "$FENCELOCK_WIRE_DIR/rust.txt" "$FENCELOCK_WIRE_DIR/$lang.txt"; then
    echo "test-interop: $lang's command stream differs from Rust's:" >&2
    diff "$FENCELOCK_WIRE_DIR/rust.txt" "$FENCELOCK_WIRE_DIR/$lang.txt" >&2 || true
    rc=1
  fi
done
[ $rc -eq 0 ] && echo "test-interop: ok ($(wc -l <"$FENCELOCK_WIRE_DIR/rust.txt") identical commands)"
exit $rc
