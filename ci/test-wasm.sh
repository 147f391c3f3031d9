#!/usr/bin/env bash
# The core must stay sans-IO and portable: build it for wasm32-unknown-unknown
# and check its normal dependency tree has no IO/RNG crates.
set -euo pipefail
cd "$(dirname "$0")/.."

# 1. No tokio/redis/rand/uuid (nor getrandom/mio) in the core, on any target.
#    rustup's cargo reads the tree; dev-dependencies (proptest) are excluded.
forbidden='^(tokio|redis|rand|rand_core|uuid|getrandom|mio)$'
deps=$(cargo tree --locked -p fencelock-core -e normal --target all --prefix none | awk '{print $1}' | sort -u)
if bad=$(grep -E "$forbidden" <<<"$deps"); then
  echo "test-wasm: fencelock-core depends on forbidden crates: ${bad//$'\n'/ }" >&2
  exit 1
fi
echo "test-wasm: fencelock-core normal deps: ${deps//$'\n'/ }"

# 2. Build with Debian's toolchain (rustc-web + rust-web-src), because rustup
#    cannot add the wasm32 target here. std is rebuilt from source
#    (-Zbuild-std, hence RUSTC_BOOTSTRAP on a stable compiler) and linked by
#    lld's wasm-ld. A separate target dir keeps Debian's artifacts away from
#    rustup's in target/ (mixing compilers there would force rebuilds).
export CARGO_TARGET_DIR=$PWD/target/wasm
rlib=$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/libfencelock_core.rlib
rm -f "$rlib"   # so a stale artifact can never pass the check below
PATH=/usr/bin:$PATH RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld \
  /usr/bin/cargo build -p fencelock-core -Zbuild-std=std,panic_abort \
  --target wasm32-unknown-unknown --release

[ -s "$rlib" ] || { echo "test-wasm: $rlib missing" >&2; exit 1; }
echo "test-wasm: ok, $(du -h "$rlib" | cut -f1) $rlib"
