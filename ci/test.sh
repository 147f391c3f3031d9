#!/usr/bin/env bash
# The whole test run (`make test`, `.ci/run`): install what is missing, start
# the harness's redis-servers, run every suite to the end, stop the servers
# whatever happens, and exit non-zero if any suite failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# CI may run us from a non-interactive shell that never read ~/.bashrc, so
# put the stock toolchains on PATH the way the login shell does: pyenv's
# Python 3.11 before Debian's python3, and rustup's cargo before Debian's
# /usr/bin/cargo (installed by setup.sh for the wasm build only).
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ -d "$pyenv_root/shims" ] && export PATH="$pyenv_root/bin:$pyenv_root/shims:$PATH"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

t0=$(date +%s)
bash ci/setup.sh

# Our own run directory, so a developer's `make redis-start` servers are
# neither reused nor stopped by this run.
export FENCELOCK_REDIS_RUN_DIR=$PWD/.build/test-redis
export FENCELOCK_PG_RUN_DIR=$PWD/.build/test-postgres
# Stop the servers on every exit path; turn Ctrl-C/TERM into an exit so the
# EXIT trap runs (bash waits for the running suite to end first).
trap 'bash ci/redis.sh stop; bash ci/postgres.sh stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
bash ci/redis.sh start
# One PostgreSQL for the SQL recipe's tests (FENCELOCK_TEST_PG_URL).
bash ci/postgres.sh start
set -a; . "$FENCELOCK_REDIS_RUN_DIR/env"; . "$FENCELOCK_PG_RUN_DIR/env"; set +a

summary=()
failed=()
# Each suite's output is kept, so a failure's own explanation can be repeated
# after the summary: CI shows only the tail of a run.
logs=$PWD/.build/test-logs
rm -rf "$logs"; mkdir -p "$logs"
suite() {  # suite NAME COMMAND...: run it, record status and duration
  local name=$1 start rc
  shift
  echo; echo "===== $name: $*"
  start=$(date +%s)
  if "$@" 2>&1 | tee "$logs/$name.log"; then rc=0; else rc=${PIPESTATUS[0]}; fi
  local took=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    summary+=("$(printf '%-8s ok     %4ds' "$name" "$took")")
  else
    summary+=("$(printf '%-8s FAILED %4ds (exit %d)' "$name" "$took" "$rc")")
    failed+=("$name")
  fi
}

# `napi build --platform` (node) always passes --target <host>, so its release
# artifacts live in target/<host>/release. Point maturin (python) there too
# (it reads CARGO_BUILD_TARGET) so both reuse one release build of tokio,
# redis and rustls instead of compiling them twice (minutes on 2 cores).
host=$(rustc -vV | sed -n 's/^host: //p')

# A fresh clone builds everything once: incremental caches and full debug info
# would only fill the disk (a whole run left 6-11 GB behind, now about 5 GB).
# Line tables keep file:line in a failing test's backtrace.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi

suite rust bash ci/test-rust.sh
suite wasm bash ci/test-wasm.sh
CARGO_BUILD_TARGET=$host suite python bash ci/test-python.sh
suite node bash ci/test-node.sh
# make dist, then the wheel and npm tarballs installed and run without cargo.
suite dist bash ci/test-dist.sh
# Cross-language: vectors, interop agents, MONITOR sameness, the demo.
suite interop bash ci/test-interop.sh
# The 1-2 minute subset of `make safety` (own servers, no fuzzing).
suite safety bash tests/safety/run.sh --quick
# `make bench QUICK=1`, once, to keep the benchmark harness working; the
# numbers are not asserted here.
QUICK=1 suite bench bash bench/run.sh
suite lint bash ci/lint.sh

echo; echo "===== summary"
printf '%s\n' "${summary[@]}"
echo "total $(( $(date +%s) - t0 ))s"
[ ${#failed[@]} -eq 0 ] && echo "ALL PASSED" && exit 0
# Last, so that even a short tail of the run shows why.
for name in "${failed[@]}"; do
  echo "===== $name failed; the end of $logs/$name.log:"
  tail -n 12 "$logs/$name.log"
done
echo "SOME SUITES FAILED: ${failed[*]}"
exit 1
