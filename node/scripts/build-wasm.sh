#!/usr/bin/env bash
# `npm run build:wasm`: compile bindings/wasm (fencelock-core + wasm-bindgen
# glue) to WebAssembly and generate wasm/pkg/ for fencelock/wasm. Nothing it
# makes is committed.
#  - Debian's toolchain (rustc-web + rust-web-src + lld, ci/setup.sh installs
#    them): rustup cannot add the wasm32 target on this machine, so std is
#    rebuilt from source (-Zbuild-std, RUSTC_BOOTSTRAP on a stable compiler)
#    and linked by wasm-ld, in target/wasm apart from rustup's artifacts.
#  - wasm-bindgen-cli 0.2.106 (must match the crate's =0.2.106), installed
#    once into the project-local .build/tools.
set -euo pipefail
node_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=$(cd "$node_dir/.." && pwd)
tools=$root/.build/tools
bindgen=$tools/bin/wasm-bindgen
version=0.2.106

if [ "$("$bindgen" --version 2>/dev/null)" != "wasm-bindgen $version" ]; then
  cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
  echo "build-wasm: cargo install wasm-bindgen-cli $version into $tools (a few minutes, once)"
  PATH="$cargo_bin:$PATH" cargo install --quiet --locked wasm-bindgen-cli --version "$version" --root "$tools"
fi

export CARGO_TARGET_DIR=$root/target/wasm
wasm=$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/fencelock_wasm.wasm
rm -f "$wasm" # a stale artifact must never stand in for a failed build
(
  cd "$root/bindings/wasm"
  PATH=/usr/bin:$PATH RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld \
    /usr/bin/cargo build --quiet --locked -Zbuild-std=std,panic_abort \
    --target wasm32-unknown-unknown --release
)
out=$node_dir/wasm/pkg
rm -rf "$out"
"$bindgen" --target nodejs --out-dir "$out" "$wasm"
raw=$(wc -c <"$out/fencelock_wasm_bg.wasm")
gz=$(gzip -9c "$out/fencelock_wasm_bg.wasm" | wc -c)
echo "build-wasm: $out/fencelock_wasm_bg.wasm: $raw bytes ($gz gzipped)"
