#!/usr/bin/env bash
# WebAssembly suite (`make test` runs it through ci/test.sh; runs alone too):
#  1. the core stays sans-IO: no IO/RNG crates in its dependency tree;
#  2. the npm package's fencelock/wasm: npm ci when needed, `npm run
#     build:wasm` (the core and bindings/wasm built for wasm32-unknown-unknown
#     -> node/wasm/pkg, wasm-bindgen-cli into .build/tools), its size reported;
#  3. its tests against real redis-servers, with FENCELOCK_FORCE_WASM=1 so
#     the native addon is never used: node:test under Node 20
#     (node/test/wasm/*.test.js), then the same runtime check
#     (node/test/wasm/runtimes.mjs) under Node, Bun and Deno, each through
#     ioredis and node-redis.
# Uses the harness's servers (FENCELOCK_TEST_REDIS_URL, _REDLOCK_URLS,
# _CLUSTER_URLS, _SENTINEL_URLS) when ci/test.sh exported them, else starts
# its own with ci/redis.sh and stops them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

# 1. No tokio/redis/rand/uuid (nor getrandom/mio) in the core, on any target.
#    rustup's cargo reads the tree; dev-dependencies (proptest) are excluded.
forbidden='^(tokio|redis|rand|rand_core|uuid|getrandom|mio)$'
deps=$(cargo tree --locked -p fencelock-core -e normal --target all --prefix none | awk '{print $1}' | sort -u)
if bad=$(grep -E "$forbidden" <<<"$deps"); then
  echo "test-wasm: fencelock-core depends on forbidden crates: ${bad//$'\n'/ }" >&2
  exit 1
fi
echo "test-wasm: fencelock-core normal deps: ${deps//$'\n'/ }"

# 2. The npm package's WebAssembly flavour. Building it builds the core for
#    wasm32-unknown-unknown too (bindings/wasm is the core plus wasm-bindgen),
#    with Debian's toolchain: see node/scripts/build-wasm.sh.
cd "$root/node"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  FENCELOCK_SKIP_ADDON_BUILD=1 npm ci --no-audit --no-fund
fi
npm run --silent build:wasm

# 3. The tests.
if [ -z "${FENCELOCK_TEST_REDIS_URL:-}" ]; then
  export FENCELOCK_REDIS_RUN_DIR=$root/.build/wasm-redis
  trap 'bash "$root/ci/redis.sh" stop' EXIT
  bash "$root/ci/redis.sh" start
  set -a; . "$FENCELOCK_REDIS_RUN_DIR/env"; set +a
fi
export FENCELOCK_FORCE_WASM=1

echo "test-wasm: node --test test/wasm"
node --test --test-concurrency=1 test/wasm/*.test.js
for runtime in node node_modules/.bin/bun "node_modules/.bin/deno run --allow-all"; do
  echo "test-wasm: $runtime test/wasm/runtimes.mjs"
  $runtime test/wasm/runtimes.mjs
done
echo "test-wasm: ok"
