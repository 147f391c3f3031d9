#!/usr/bin/env bash
# Build what is missing for the cross-language runs (make demo, ci/test-interop.sh),
# through the projects' own build entry points:
#  - Python: ci/test-python.sh (venv .build/venv + `pip install ./python`) with
#    pytest in --collect-only mode, i.e. build only;
#  - Node: node/scripts/build-addon.js --if-missing (the package's install step).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"
venv="${FENCELOCK_PY_VENV:-$root/.build/venv}"

if ! "$venv/bin/python" -c 'import fencelock' 2>/dev/null; then
  echo "build: the Python package is missing; building it (ci/test-python.sh --collect-only)"
  bash "$root/ci/test-python.sh" --collect-only -q >/dev/null
fi
if ! node -e "require('$root/node')" 2>/dev/null; then
  echo "build: the Node addon is missing; building it (node/scripts/build-addon.js)"
  node "$root/node/scripts/build-addon.js" --if-missing
fi
