#!/usr/bin/env bash
# Dist suite (`make test` runs it after the python and node suites, whose
# release builds `make dist` reuses; runs alone too): `make dist`, then the
# proof that its artifacts install and work with no Rust toolchain at all:
#  1. the wheel into fresh venvs of Python 3.9 (pyenv, when present) and
#     of the newest Python here, the npm tarballs into a fresh directory,
#     all with a PATH holding only python/node/npm/redis (no cargo, rustc);
#  2. the README quick starts (and the Operations examples: the wheel's
#     `fencelock` console script, metrics) against a real redis-server,
#     through the same tests that run them in the python and node suites
#     (python/tests/test_docs.py, test_operations_readme.py,
#     node/test/readme.test.js), pointed at the installed packages instead
#     of the checkout.
# Uses the harness's servers when ci/test.sh exported them, else starts its
# own with ci/redis.sh and stops them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}

bash ci/dist.sh
version=$(bash ci/check-versions.sh)

if [ -z "${FENCELOCK_TEST_REDIS_URL:-}" ]; then
  export FENCELOCK_REDIS_RUN_DIR=$root/.build/dist-redis
  trap 'bash "$root/ci/redis.sh" stop' EXIT
  bash ci/redis.sh start
  set -a; . "$FENCELOCK_REDIS_RUN_DIR/env"; set +a
fi

# A PATH of symlinks to just the tools the installs and tests run.
work=$root/.build/dist-test
rm -rf "$work"
bin=$work/bin
mkdir -p "$bin"
link() { ln -s "$(command -v "$1")" "$bin/$2"; }
link node node
link npm npm
link redis-server redis-server
link redis-cli redis-cli
for tool in sh bash env cat grep sed awk mkdir rm ls uname tar gzip flock sleep kill ps; do
  p=$(command -v "$tool") && ln -s "$p" "$bin/$tool"
done
bare=$bin
if PATH=$bare command -v cargo >/dev/null || PATH=$bare command -v rustc >/dev/null; then
  echo "test-dist: cargo/rustc still reachable on the bare PATH" >&2; exit 1
fi

pythons=()
for candidate in "$pyenv_root"/versions/3.9*/bin/python3; do [ -x "$candidate" ] && pythons+=("$candidate") && break; done
# The oldest Python the abi3 wheel supports is part of the proof, not optional.
[ ${#pythons[@]} -eq 1 ] || { echo "test-dist: no Python 3.9 (pyenv) to install the wheel into" >&2; exit 1; }
newest=$(ls -d "$pyenv_root"/versions/3.*/bin/python3 2>/dev/null | sort -V | tail -1)
[ -n "$newest" ] || newest=$(command -v python3)
pythons+=("$newest")

wheel=$(ls "$root"/dist/fencelock-"$version"-cp39-abi3-manylinux*.whl)
for py in "${pythons[@]}"; do
  name=$(basename "$(dirname "$(dirname "$py")")")
  venv=$work/venv-$name
  "$py" -m venv "$venv"
  # pytest and pytest-timeout run the tests; fencelock comes from the wheel
  # only (prometheus_client: the README's metrics example exports to it).
  PATH=$bare "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: \
    "$wheel" pytest pytest-timeout prometheus_client
  echo "test-dist: $("$venv/bin/python" -V) with $(basename "$wheel"), no cargo on PATH"
  # The quick start, and the Operations examples through the wheel's own
  # `fencelock` console script.
  (cd python/tests && PATH=$venv/bin:$bare "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    test_docs.py::test_readme_quick_start_runs test_operations_readme.py)
done

# npm: both tarballs into an empty project, as `npm install fencelock` from a
# registry would (offline: nothing but these two files may be fetched).
app=$work/node-app
mkdir -p "$app"
(
  cd "$app"
  echo '{ "name": "app", "private": true }' >package.json
  PATH=$bare npm install --offline --no-audit --no-fund --loglevel=error \
    "$root/dist/fencelock-$version.tgz" "$root/dist/fencelock-linux-x64-gnu-$version.tgz"
  test -f node_modules/fencelock-linux-x64-gnu/fencelock.linux-x64-gnu.node
  test -f node_modules/fencelock/wasm/pkg/fencelock_wasm_bg.wasm
  test -f node_modules/fencelock/sql.js   # fencelock/sql, the SQL recipe
  ! ls node_modules/fencelock/*.node 2>/dev/null
)
# The fencelock/wasm quick start drives the app's own ioredis client: the app
# installs it as a user would (the version node/'s lockfile pins).
# The metrics example exports to the app's own prom-client, the same way.
ioredis=$(node -p 'require("./node/package-lock.json").packages["node_modules/ioredis"].version')
promclient=$(node -p 'require("./node/package-lock.json").packages["node_modules/prom-client"].version')
(cd "$app" && PATH=$bare npm install --prefer-offline --no-audit --no-fund --loglevel=error "ioredis@$ioredis" "prom-client@$promclient")
echo "test-dist: node $(node -v) with the npm tarballs, no cargo on PATH"
(cd node && PATH=$bare FENCELOCK_README_DIR=$app node --test test/readme.test.js test/wasm/readme.test.js)
echo "test-dist: ok"
