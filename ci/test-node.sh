#!/usr/bin/env bash
# Node suite (`make test` calls it through ci/test.sh; runs alone too):
#  1. npm ci in node/ (dev tools: @napi-rs/cli, typescript) when node_modules
#     is missing or older than package-lock.json;
#  2. build the napi addon, release (`napi build --release --platform`),
#     and check the regenerated native.d.ts equals the committed one;
#  3. tsc --noEmit over the typed usage example;
#  4. node --test (real redis: FENCELOCK_TEST_REDIS_URL /
#     FENCELOCK_TEST_REDLOCK_URLS when exported, else private redis-servers).
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/../node"

cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"
command -v node >/dev/null || { echo "test-node: node is not installed" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "test-node: redis-server is not installed" >&2; exit 1; }

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # The package's own install script would build the addon; step 2 does that.
  FENCELOCK_SKIP_ADDON_BUILD=1 npm ci --no-audit --no-fund
fi

echo "test-node: napi build --release --platform"
# napi regenerates native.d.ts (the addon's types, deterministic output) on
# every build: the committed copy must be what the Rust source generates.
committed_dts=$(mktemp)
trap 'rm -f "$committed_dts"' EXIT
cp native.d.ts "$committed_dts" 2>/dev/null || : >"$committed_dts"
npm run --silent build
if ! cmp -s native.d.ts "$committed_dts"; then
  diff -u "$committed_dts" native.d.ts >&2 || true
  echo "test-node: node/native.d.ts is stale: run npm run build in node/ and commit native.d.ts" >&2
  exit 1
fi

echo "test-node: tsc --noEmit -p test/tsconfig.json"
npx --no-install tsc --noEmit -p test/tsconfig.json

echo "test-node: node --test"
node --test --test-concurrency=1 test/*.test.js test/*.test.mjs
