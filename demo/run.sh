#!/usr/bin/env bash
# `make demo`: build what is missing, then run demo/orchestrator.py (it starts
# its own redis-server unless REDIS_URL is set). Exit status: the demo's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Non-interactive shells: the toolchains' PATH as ci/test.sh sets it.
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ -d "$pyenv_root/shims" ] && export PATH="$pyenv_root/bin:$pyenv_root/shims:$PATH"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"
command -v redis-server >/dev/null || [ -n "${REDIS_URL:-}" ] || bash ci/setup.sh

bash demo/build.sh
exec "${FENCELOCK_PY_VENV:-$root/.build/venv}/bin/python" demo/orchestrator.py "$@"
