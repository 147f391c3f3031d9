"""The README's Python quick start runs as written, and the typed API
example of the README's API passes `mypy --strict` with the shipped stubs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import Redis

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def python_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Python\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Python' section"
    return match.group(1)


def test_readme_quick_start_runs(redis_url: str, r: Redis) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", python_section(), re.S | re.M)
    assert blocks, "no ```python block in the README's Python section"
    env = dict(os.environ, FENCELOCK_REDIS_URL=redis_url)
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "fence" in done.stdout
    # It cleaned up after itself.
    assert r.execute("EXISTS", "fencelock:{invoice:42}") == 0


def test_readme_sql_recipe_runs(redis_url: str, pg_url: str) -> None:
    """The Python block of the README's "Fenced writes" section, against
    PostgreSQL (the harness's, or a private one)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Fenced writes\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no '## Fenced writes' section"
    blocks = re.findall(r"^```python\n(.*?)^```", match.group(1), re.S | re.M)
    assert len(blocks) == 1, "one ```python block in the Fenced writes section"
    env = dict(os.environ, FENCELOCK_REDIS_URL=redis_url, FENCELOCK_PG_URL=pg_url)
    done = subprocess.run([sys.executable, "-c", blocks[0]], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"refused: fence \d+ is older than \d+ in invoices", done.stdout), done.stdout


def mypy(*files: Path) -> "subprocess.CompletedProcess[str]":
    cache = ROOT / ".build" / "mypy-cache"
    # conftest imports the shared test support (checked strictly too).
    env = dict(os.environ, MYPYPATH=str(ROOT / "tests" / "support"))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(cache),
         *map(str, files)],
        capture_output=True, text=True, timeout=300, cwd=str(HERE.parent / "tests"), env=env,
    )


def test_typed_example_passes_mypy_strict() -> None:
    # The example of the whole public API, the package itself and this suite.
    done = mypy(HERE.parent / "fencelock", *sorted(HERE.glob("*.py")))
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_catches_misuse(tmp_path: Path) -> None:
    bad = tmp_path / "bad_example.py"
    bad.write_text(
        "import fencelock\n"
        "client = fencelock.Client('redis://127.0.0.1:6379/0')\n"
        "lease = client.acquire('x', ttl='10')\n"  # ttl must be a number
        "fence: str = lease.fence\n"  # fence is an int
        "async def f(a: fencelock.AsyncClient) -> None:\n"
        "    lease = a.acquire('x', ttl=1.0)\n"
        "    lease.release()\n",  # not awaited: a Future has no release()
        encoding="utf-8",
    )
    done = mypy(bad)
    assert done.returncode != 0
    assert done.stdout.count("error:") >= 3, done.stdout
