#!/usr/bin/env bash
# Build the Python package with `pip install ./python` and run its pytest
# suite (plus mypy --strict over the typed API example) against real Redis.
#
# Uses FENCELOCK_TEST_REDIS_URL / FENCELOCK_TEST_REDLOCK_URLS when the harness
# set them; otherwise the test fixtures start private redis-servers.
# Idempotent: the venv at .build/venv is created once and reused.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FENCELOCK_PY_VENV:-$root/.build/venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "test-python: creating $venv"
    "$python" -m venv "$venv"
fi
py="$venv/bin/python"

# Tools, once (pinned majors; pip is quiet when they are already there).
if ! "$py" -c 'import maturin, pytest, pytest_timeout, mypy' 2>/dev/null \
    || ! "$venv/bin/maturin" --version 2>/dev/null | grep -q '^maturin 1\.16\.'; then
    "$py" -m pip install --quiet --disable-pip-version-check 'maturin==1.16.*' pytest pytest-timeout mypy
fi

# The real install path users take: a PEP 517 build of ./python from source
# (cargo only; maturin comes from the isolated build env). Cargo's release
# build is incremental in the shared target dir, so a rebuild is cheap.
echo "test-python: pip install ./python"
"$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$root/python"

cd "$root/python"
echo "test-python: pytest"
# The pytest script, not `python -m pytest`: the latter would put ./python
# (the uninstalled source, without the compiled module) first on sys.path.
"$venv/bin/pytest" -q -p no:cacheprovider tests "$@"
