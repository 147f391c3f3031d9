#!/usr/bin/env bash
# `make bench` / `make bench QUICK=1`: fencelock (Rust, Python threads,
# Python asyncio, Node) against the libraries users would pick instead, in
# one run, on redis-servers of its own. See bench/README.md.
#
#   bash bench/run.sh            full run (a few minutes) -> bench/results.md
#                                and the README's Performance summary
#   QUICK=1 bash bench/run.sh    smoke run (< 2 min)      -> .build/bench/results-quick.md
#   BENCH_ONLY=s1,mem ...        only some scenarios (s1 s2 s3 s3p s1r s4 sem rw mem)
#   BENCH_OUT=path ...           write the table elsewhere
#
# Everything it installs goes OUTSIDE the source tree (gitignored .build/):
#   .build/bench-venv   redis-py + hiredis, pottery, maturin, and fencelock
#                       built from ./python (release)
#   .build/bench-node   ioredis, node-redis, redlock (node-redlock v5),
#                       redis-semaphore, and fencelock = node/*.js + a release
#                       build of the addon + fencelock/wasm
# It starts the harness's redis-servers (ci/redis.sh: single, 5 Redlock nodes,
# the Sentinel group for S1r, ...) on loopback and stops exactly those on
# every exit path.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ -d "$pyenv_root/shims" ] && export PATH="$pyenv_root/bin:$pyenv_root/shims:$PATH"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

QUICK=${QUICK:-}
[ "$QUICK" = 0 ] && QUICK=
BUILD=$ROOT/.build
VENV=${BENCH_VENV:-$BUILD/bench-venv}
NODE_DIR=${BENCH_NODE_DIR:-$BUILD/bench-node}
RUN_DIR=$BUILD/bench-redis
mkdir -p "$BUILD/bench"
if [ -n "$QUICK" ]; then OUT=${BENCH_OUT:-$BUILD/bench/results-quick.md}; else OUT=${BENCH_OUT:-$ROOT/bench/results.md}; fi
log() { echo "bench: $*" >&2; }
t0=$(date +%s)

for tool in redis-server redis-benchmark redis-cli node npm cargo python3; do
  command -v "$tool" >/dev/null || { log "$tool is not installed (make setup)"; exit 1; }
done

# ---------------------------------------------------------------- builds
# Release builds for the host target, in target/<host>/release: where
# `napi build --platform` (ci/test-node.sh) and maturin under ci/test.sh
# (CARGO_BUILD_TARGET) put theirs, so all of them share one build of tokio,
# redis and rustls. One package per cargo call: building them together would
# unify their dependencies' features and invalidate each other's artifacts.
host=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_BUILD_TARGET=$host
rel=${CARGO_TARGET_DIR:-$ROOT/target}/$host/release
log "cargo build --release --target $host -p fencelock-bench; -p fencelock-node"
cargo build --release --quiet -p fencelock-bench
cargo build --release --quiet -p fencelock-node

# Python: the peers (pinned majors) and fencelock from ./python, release.
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  python3 -m venv "$VENV"
fi
py=$VENV/bin/python
if ! "$py" -c 'import redis, hiredis, pottery, maturin' 2>/dev/null; then
  log "installing Python peers into $VENV"
  "$py" -m pip install --quiet --disable-pip-version-check \
    'redis[hiredis]==8.*' 'pottery==3.*' 'maturin==1.16.*'
fi
# fencelock itself: reuse what ci/test-python.sh just installed into the test
# venv when it is newer than every source it is built from (the same PEP 517
# release build; an abi3 module, so it runs on this venv's Python). Otherwise
# build ./python here (no build isolation: maturin comes from this venv).
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
test_pkg=$(ls -d "$BUILD"/venv/lib/python3*/site-packages/fencelock 2>/dev/null | head -1 || true)
newest_src=$(find "$ROOT/core/src" "$ROOT/bindings/driver/src" "$ROOT/bindings/python/src" \
  "$ROOT/python/fencelock" "$ROOT/Cargo.lock" -type f -printf '%T@\n' | sort -n | tail -1)
if [ -n "$test_pkg" ] && [ -f "$test_pkg/_native.abi3.so" ] &&
   [ "$(stat -c %Y "$test_pkg/_native.abi3.so")" -ge "${newest_src%.*}" ]; then
  log "fencelock (Python): reusing the build in $BUILD/venv"
  rm -rf "$site/fencelock"
  cp -r "$test_pkg" "$site/fencelock"
else
  log "pip install ./python (release build of the PyO3 module)"
  PATH="$VENV/bin:$PATH" "$py" -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-build-isolation --force-reinstall "$ROOT/python"
fi

# Node: the peers (pinned majors), and the fencelock package with a release
# addon (node/ itself may hold a developer's debug build; we never touch it).
mkdir -p "$NODE_DIR"
cmp -s "$ROOT/bench/node/package.json" "$NODE_DIR/package.json" || cp "$ROOT/bench/node/package.json" "$NODE_DIR/package.json"
if [ ! -f "$NODE_DIR/.installed" ] || [ "$ROOT/bench/node/package.json" -nt "$NODE_DIR/.installed" ]; then
  log "installing Node peers into $NODE_DIR"
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --silent)
  touch "$NODE_DIR/.installed"
fi
pkg=$NODE_DIR/fencelock
mkdir -p "$pkg"
cp "$ROOT"/node/index.js "$ROOT"/node/index.mjs "$ROOT"/node/native.js "$ROOT"/node/calls.js "$ROOT"/node/errors.js \
  "$ROOT"/node/client.js "$ROOT"/node/primitives.js "$ROOT"/node/metrics.js "$ROOT"/node/package.json "$pkg/"
cp "$rel/libfencelock_node.so" "$pkg/fencelock.linux-x64-gnu.node"
# fencelock/wasm: its release build (size-optimised wasm, wasm-bindgen glue).
log "npm run build:wasm (fencelock/wasm)"
bash "$ROOT/node/scripts/build-wasm.sh" >&2
rm -rf "$pkg/wasm"
cp -r "$ROOT/node/wasm" "$pkg/wasm"
export BENCH_FENCELOCK_NODE=$pkg BENCH_NODE_MODULES=$NODE_DIR/node_modules

# ------------------------------------------------------------ redis-servers
# ci/redis.sh starts its servers under its run dir and stops exactly
# those; our own run dir keeps them apart from the test harness's.
export FENCELOCK_REDIS_RUN_DIR=$RUN_DIR
trap 'bash "$ROOT/ci/redis.sh" stop >/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bash "$ROOT/ci/redis.sh" stop >/dev/null 2>&1 || true
bash "$ROOT/ci/redis.sh" start >/dev/null
# shellcheck disable=SC1091
. "$RUN_DIR/env"
# S1r runs on the Sentinel group's primary (it has one replica).
sentinel_port=${FENCELOCK_TEST_SENTINEL_URLS%%,*}
sentinel_port=${sentinel_port##*:}
replica_url="redis://$(redis-cli -p "$sentinel_port" SENTINEL get-master-addr-by-name \
  "$FENCELOCK_TEST_SENTINEL_SERVICE" | paste -sd:)/0"

versions=$(
  "$py" - <<'EOF'
import importlib.metadata as m
print(", ".join(f"{p} {m.version(p)}" for p in ("redis", "hiredis", "pottery")), end="")
EOF
)
versions="$(redis-server --version | sed -E 's/.*v=([0-9.]+).*/redis-server \1/'); $(rustc --version | cut -d' ' -f1-2); Python $("$py" -c 'import platform; print(platform.python_version())') with $versions; Node $(node --version) with $(cd "$NODE_DIR" && node -e 'for (const p of ["ioredis","redis","redlock","redis-semaphore"]) process.stdout.write(`${p} ${JSON.parse(require("fs").readFileSync("node_modules/" + p + "/package.json")).version}, `)' | sed 's/, $//')"

# Only a whole full run into the committed table also rewrites the
# README's summary (a smoke run, a partial one or another --out does not).
readme=()
[ -z "$QUICK" ] && [ -z "${BENCH_ONLY:-}" ] && [ -z "${BENCH_OUT:-}" ] && readme=(--readme "$ROOT/README.md")
log "setup took $(( $(date +%s) - t0 ))s; running${QUICK:+ (QUICK)}"
"$py" "$ROOT/bench/bench.py" \
  --url "$FENCELOCK_TEST_REDIS_URL" --urls "$FENCELOCK_TEST_REDLOCK_URLS" \
  --rust-bin "$rel/fencelock-bench" --replica-url "$replica_url" \
  --out "$OUT" --raw "$BUILD/bench/raw${QUICK:+-quick}.jsonl" \
  --versions "$versions" ${QUICK:+--quick} ${BENCH_ONLY:+--only "$BENCH_ONLY"} ${readme[@]+"${readme[@]}"}
log "total $(( $(date +%s) - t0 ))s; table: $OUT"
