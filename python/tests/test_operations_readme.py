"""The README's "Operations: CLI and metrics" examples run as written: the
```sh block through the installed `fencelock` console script, the ```python
blocks with the installed package. ci/test-dist.sh runs this file against
the wheel too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import fencelock
from conftest import Redis

ROOT = Path(__file__).resolve().parents[2]


def operations(lang: str) -> List[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Operations: CLI and metrics\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no 'Operations: CLI and metrics' section"
    blocks = re.findall(rf"^```{lang}\n(.*?)^```", match.group(1), re.S | re.M)
    assert blocks, f"no ```{lang} block in the Operations section"
    return blocks


def test_readme_cli_block_runs(redis_url: str) -> None:
    [block] = operations("sh")
    # The console script next to this interpreter comes first on PATH.
    env = dict(os.environ, FENCELOCK_URL=redis_url,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("REDIS_URL", None)
    with fencelock.Client(redis_url) as holder:
        lease = holder.acquire("invoice:50", ttl=30.0)
        done = subprocess.run(["bash", "-e", "-c", block], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"invoice:50  held  fence={lease.fence}  ttl=")
        assert f'"fence": {lease.fence}' in lines[1]
        assert re.match(rf"^\S+Z  invoice:50  held  fence={lease.fence}  ttl=", lines[2]), lines[2]
        assert lines[3].startswith("invoice:50  force-released  fence=")
        assert lines[4] == "invoice:50  free  fence=" + lines[3].rsplit("=", 1)[1]
        assert lines[5] == "free: exit status 1"
        assert "force-released" in done.stderr and lease.token not in done.stderr
        assert not holder.inspect("invoice:50").held


def test_readme_python_blocks_run(redis_url: str, r: Redis) -> None:
    listing, metrics = operations("python")
    env = dict(os.environ, FENCELOCK_REDIS_URL=redis_url)
    done = subprocess.run([sys.executable, "-c", listing], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^invoice:51 held True fence \d+$", done.stdout, re.M), done.stdout
    assert "now: held True" in done.stdout and "then: held False" in done.stdout
    done = subprocess.run([sys.executable, "-c", metrics], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert 'fencelock_acquires_total{outcome="acquired"} 1.0' in done.stdout, done.stdout
    assert "fencelock_wait_seconds_count 1.0" in done.stdout
    assert r.execute("EXISTS", "fencelock:{invoice:51}", "fencelock:{invoice:52}") == 0
