#!/usr/bin/env bash
# Build what is missing for the cross-language runs (make demo, ci/test-interop.sh),
# through the projects' own build entry points:
#  - Python: ci/test-python.sh (venv .build/venv + `pip install ./python`) with
#    pytest in --collect-only mode, i.e. build only;
#  - Node: `npm run build` in node/ (napi build --release --platform), after
#    `npm ci` if node_modules is missing — as ci/test-node.sh does;
#  - fencelock/wasm: `npm run build:wasm` in node/ (as ci/test-wasm.sh does).
# Both build for the host triple (napi always passes --target; maturin reads
# CARGO_BUILD_TARGET), so they share one release build of the dependencies
# in target/<host>/release, as ci/test.sh arranges for `make test`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"
venv="${FENCELOCK_PY_VENV:-$root/.build/venv}"

host=$(rustc -vV | sed -n 's/^host: //p')

if ! "$venv/bin/python" -c 'import fencelock' 2>/dev/null; then
  echo "build: the Python package is missing; building it (ci/test-python.sh --collect-only)"
  CARGO_BUILD_TARGET=$host bash "$root/ci/test-python.sh" --collect-only -q >/dev/null
fi
if ! node -e "require('$root/node')" 2>/dev/null; then
  echo "build: the Node addon is missing; building it (npm run build in node/)"
  cd "$root/node"
  [ -d node_modules ] || FENCELOCK_SKIP_ADDON_BUILD=1 npm ci --no-audit --no-fund
  npm run --silent build
fi
if ! node -e "require('$root/node/wasm')" 2>/dev/null; then
  echo "build: fencelock/wasm is missing; building it (npm run build:wasm in node/)"
  cd "$root/node"
  [ -d node_modules ] || FENCELOCK_SKIP_ADDON_BUILD=1 npm ci --no-audit --no-fund
  npm run --silent build:wasm
fi
