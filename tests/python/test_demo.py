"""`make demo`'s job, checked: with fenced writes (`fenced_hset` /
`fencedHSet` to each resource's ledger) the run ends with every job done once
and the paused holder's late write refused (exit 0); with plain writes
instead (DEMO_UNFENCED=1) the same run must fail (exit 1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from fltest import ROOT


def run_demo(redis_url: str, **env: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, str(ROOT / "demo" / "orchestrator.py")],
        env={**os.environ, "REDIS_URL": redis_url, "DEMO_JOBS": "150", **env},
        capture_output=True,
        text=True,
        timeout=90,
    )


def field(out: str, name: str) -> str:
    m = re.search(rf"^{name}\s+(\S+)", out, re.M)
    assert m, f"no '{name}' in the summary:\n{out}"
    return m.group(1)


def test_demo_keeps_its_invariants(redis_url: str) -> None:
    run = run_demo(redis_url)
    assert run.returncode == 0, run.stdout + run.stderr
    assert field(run.stdout, "double-processed jobs") == "0"
    assert int(field(run.stdout, "stale writes rejected")) >= 1
    assert field(run.stdout, r"jobs done \(ledger\)") == "150/150"
    assert int(field(run.stdout, "lock handoffs")) > 0
    for worker in ("py-1", "py-2", "py-3", "node-1", "node-2", "node-3"):
        assert re.search(rf"^{worker}\s+(python|node)\s+\d+", run.stdout, re.M), worker
    assert "SIGKILL" in run.stdout and "SIGSTOP+SIGCONT" in run.stdout


def test_demo_fails_without_fencing(redis_url: str) -> None:
    run = run_demo(redis_url, DEMO_UNFENCED="1")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "INVARIANT BROKEN: the paused holder's late write was not rejected" in run.stdout


def test_demo_with_a_wasm_worker_keeps_its_invariants(redis_url: str) -> None:
    """DEMO_WASM=1: node-1 runs on fencelock/wasm among the native workers."""
    run = run_demo(redis_url, DEMO_WASM="1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert field(run.stdout, "double-processed jobs") == "0"
    assert field(run.stdout, r"jobs done \(ledger\)") == "150/150"
    assert re.search(r"^node-1\s+wasm\s+\d+", run.stdout, re.M), run.stdout
    assert int(field(run.stdout, r"all\s+wasm")) > 0
