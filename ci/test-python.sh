#!/usr/bin/env bash
# Build the Python package with `pip install ./python` and run its pytest
# suite (plus mypy --strict over the typed API example) against real Redis.
#
# Uses FENCELOCK_TEST_REDIS_URL / FENCELOCK_TEST_REDLOCK_URLS (and
# FENCELOCK_TEST_PG_URL) when the harness set them; otherwise the test
# fixtures start private redis-servers (and a PostgreSQL, ci/postgres.sh).
# Idempotent: the venv at .build/venv is created once and reused.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${FENCELOCK_PY_VENV:-$root/.build/venv}"
python="${PYTHON:-python3}"

# The acquire keyword lists in _native.pyi, __init__.py and the PyO3
# signatures are generated from one table: stale copies fail here, first.
"$python" "$root/python/tools/gen_stubs.py" --check

if [ ! -x "$venv/bin/python" ]; then
    echo "test-python: creating $venv"
    "$python" -m venv "$venv"
fi
py="$venv/bin/python"

# Tools, once (pinned majors; pip is quiet when they are already there).
# psycopg: the SQL recipe's tests run fencelock.sql against PostgreSQL;
# prometheus_client: the metrics hook's tests export to a real registry.
if ! "$py" -c 'import maturin, pytest, pytest_timeout, mypy, psycopg, prometheus_client' 2>/dev/null \
    || ! "$venv/bin/maturin" --version 2>/dev/null | grep -q '^maturin 1\.16\.'; then
    "$py" -m pip install --quiet --disable-pip-version-check 'maturin==1.16.*' pytest pytest-timeout mypy \
        'psycopg[binary]==3.*' prometheus_client
fi

# The real install path users take: a PEP 517 build of ./python from source
# (cargo only; maturin comes from pip's isolated build env), kept as a wheel
# so the same abi3 file can be installed into an older Python below. Cargo's
# release build is incremental in the shared target dir.
wheels="$root/.build/wheels"
rm -rf "$wheels"
echo "test-python: pip wheel ./python (= pip install ./python)"
"$py" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$wheels" "$root/python"
wheel=$(ls "$wheels"/fencelock-*-abi3-*.whl)
"$py" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"

# Run from tests/, never from python/: there `import fencelock` (in pytest or
# in the `python -c` subprocesses some tests start) would find the source
# package without its compiled module instead of the installed wheel.
cd "$root/python/tests"
echo "test-python: pytest ($("$py" -V))"
rc=0
"$venv/bin/pytest" -q -p no:cacheprovider . "$@" || rc=$?

# One abi3 wheel serves every Python >= 3.9: run the suite (mypy aside) with
# the oldest supported Python too, when the machine has one (pyenv).
py39=""
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python python3.9; do
    if command -v "$candidate" >/dev/null 2>&1; then py39=$(command -v "$candidate"); break; fi
done
if [ -n "$py39" ] && [ $rc -eq 0 ] && [ $# -eq 0 ]; then
    venv39="$root/.build/venv39"
    [ -x "$venv39/bin/python" ] || "$py39" -m venv "$venv39"
    "$venv39/bin/python" -c 'import pytest, pytest_timeout, psycopg, prometheus_client' 2>/dev/null \
        || "$venv39/bin/python" -m pip install --quiet --disable-pip-version-check pytest pytest-timeout \
            'psycopg[binary]==3.*' prometheus_client
    "$venv39/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
    echo "test-python: pytest ($("$venv39/bin/python" -V), same wheel)"
    "$venv39/bin/pytest" -q -p no:cacheprovider . --deselect tests/test_docs.py::test_typed_example_passes_mypy_strict \
        --deselect tests/test_docs.py::test_mypy_catches_misuse || rc=$?
fi
exit $rc
