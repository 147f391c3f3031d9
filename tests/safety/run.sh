#!/usr/bin/env bash
# make safety (full) and the `make test` subset (--quick):
#   tests/safety/run.sh          fuzz the core for FUZZ_SECONDS (default 60;
#                                installs nightly and cargo-fuzz if missing),
#                                then every scenario (SAFETY_SECONDS each,
#                                default 20), write docs/safety.md
#   tests/safety/run.sh --quick  no fuzzing, 5 s per scenario, no docs
# Extra arguments go to `fencelock-safety run` (e.g. --only pause-holder,
# --langs rust). The checker starts and stops its own redis-servers and
# workers; the trap below stops any it left behind (pidfiles under
# .build/safety), so an interrupted run leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ -d "$pyenv_root/shims" ] && export PATH="$pyenv_root/bin:$pyenv_root/shims:$PATH"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

quick=0
args=()
for a in "$@"; do
  if [ "$a" = --quick ]; then quick=1; else args+=("$a"); fi
done
# Separate run directories, so `make test` and `make safety` never touch
# each other's processes.
RUN_DIR=$ROOT/.build/safety
[ $quick = 1 ] && RUN_DIR=$ROOT/.build/safety-quick
mkdir -p "$RUN_DIR"
cleanup() {
  # Only processes we started: pids recorded in our own run directory.
  local f pid
  for f in "$RUN_DIR"/*/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
      tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qE 'redis-server|fencelock-safety|worker\.(py|js)' &&
      kill -KILL "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Workers in three languages plus fencelock/wasm: Python, Node and wasm come
# from their own build scripts (ci/test-python.sh, ci/test-node.sh,
# ci/test-wasm.sh); without them, Rust only.
langs=rust,python,wasm,node
py_ok=0; node_ok=0; wasm_ok=0
"$ROOT/.build/venv/bin/python" -c 'import fencelock' 2>/dev/null && py_ok=1
node -e "require('$ROOT/node')" 2>/dev/null && node_ok=1
node -e "require('$ROOT/node/wasm')" 2>/dev/null && wasm_ok=1
if [ $py_ok = 0 ] || [ $node_ok = 0 ] || [ $wasm_ok = 0 ]; then
  langs=rust
  [ $py_ok = 1 ] && langs=$langs,python
  [ $node_ok = 1 ] && langs=$langs,node
  [ $wasm_ok = 1 ] && langs=$langs,wasm
  echo "safety: python package built: $py_ok, node package built: $node_ok, wasm built: $wasm_ok -> workers: $langs" >&2
fi

cargo build -q -p fencelock-safety
BIN=$ROOT/target/debug/fencelock-safety
# The checker's own tests first: each property must be able to fail. Then
# the fuzz harness's regression sequences (stable Rust, no libFuzzer).
cargo test -q -p fencelock-safety 2>&1 | tail -2
(cd core/fuzz && cargo test -q --no-default-features 2>&1 | tail -2)

if [ $quick = 1 ]; then
  "$BIN" run --quick --langs "$langs" --run-dir "$RUN_DIR" ${args[@]+"${args[@]}"}
  exit
fi

# 1. Fuzz the core: libFuzzer through cargo-fuzz on nightly Rust. Both are
# installed here when missing (nightly by rustup, cargo-fuzz from crates.io
# into .build/tools), so a fresh machine fuzzes too. SAFETY_FUZZ=stable (or
# no rustup) runs the stable loop instead.
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
fuzz_summary=""
TOOLS=$ROOT/.build/tools
export PATH="$TOOLS/bin:$PATH"
if [ "${SAFETY_FUZZ:-}" != stable ] && command -v rustup >/dev/null; then
  rustup toolchain list | grep -q '^nightly' ||
    rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null || {
    echo "===== installing cargo-fuzz into $TOOLS (once)"
    cargo install --locked --root "$TOOLS" cargo-fuzz
  }
fi
if [ "${SAFETY_FUZZ:-}" != stable ] &&
   rustup toolchain list 2>/dev/null | grep -q '^nightly' && command -v cargo-fuzz >/dev/null; then
  echo "===== fuzz: cargo +nightly fuzz run lock_sequences (${FUZZ_SECONDS}s)"
  log=$RUN_DIR/fuzz.log
  (cd core && cargo +nightly fuzz run lock_sequences -- \
      -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048) >"$log" 2>&1 || {
    tail -40 "$log"; echo "FUZZ: FAILED (crash input under core/fuzz/artifacts/)"; exit 1; }
  runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
  fuzz_summary="\`cargo +nightly fuzz run lock_sequences -- -max_total_time=$FUZZ_SECONDS\`: $runs(s), $cov, no invariant violated."
else
  echo "===== fuzz: nightly or cargo-fuzz missing -> stable loop (${FUZZ_SECONDS}s)"
  out=$(cd core/fuzz && cargo run -q --release --no-default-features --bin stable_loop -- --seconds "$FUZZ_SECONDS")
  echo "$out"
  fuzz_summary="nightly/cargo-fuzz unavailable; stable loop: $out"
fi
echo "$fuzz_summary"

# 2. Every scenario, the report table, docs/safety.md.
echo "===== scenarios"
# A partial run (extra arguments such as --only) does not overwrite the report.
out=(--out docs/safety.md)
[ ${#args[@]} -gt 0 ] && out=()
"$BIN" run --seconds "${SAFETY_SECONDS:-20}" --langs "$langs" ${out[@]+"${out[@]}"} \
  --run-dir "$RUN_DIR" --fuzz-summary "$fuzz_summary" ${args[@]+"${args[@]}"}
