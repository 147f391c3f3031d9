"""fencelock.metrics: the driver's counters exported to a real
prometheus_client registry, and the per-event lines on the `fencelock`
logger. Each scenario runs in a fresh process: the counters are per
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Tuple

import pytest

import fencelock.metrics

SCENARIO = r"""
import json, logging, os, time
import fencelock, fencelock.metrics
from prometheus_client import CollectorRegistry, generate_latest

class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []
    def emit(self, record):
        self.lines.append(record.getMessage())

lines = Lines()
logger = logging.getLogger("fencelock")
logger.addHandler(lines)
logger.setLevel(5)  # TRACE: the per-event metric lines

url, name = os.environ["URL"], os.environ["NAME"]
registry = CollectorRegistry()
with fencelock.Client(url) as a, fencelock.Client(url) as b:
    a.acquire(name, ttl=10.0).release()  # before install: not counted
    fencelock.metrics.install(registry)
    lease = a.acquire(name, ttl=10.0)
    assert b.try_acquire(name, ttl=1.0) is None  # found it held
    lease.release()
    renewed = a.acquire(name, ttl=0.15, auto_renew=True)
    deadline = time.monotonic() + 10
    while fencelock.metrics.snapshot()["fencelock_renewals"]["ok"] < 2:
        assert time.monotonic() < deadline, "no renewals"
        time.sleep(0.01)
    b.force_release(name)
    deadline = time.monotonic() + 10
    while not renewed.lost:
        assert time.monotonic() < deadline, "never lost"
        time.sleep(0.01)
    try:
        renewed.release()
    except fencelock.LockLost:
        pass
try:
    fencelock.metrics.install(registry)
except ValueError:
    twice = "refused"
else:
    twice = "accepted"
print(json.dumps({"exposition": generate_latest(registry).decode(), "lines": lines.lines,
                  "snapshot": fencelock.metrics.snapshot(), "twice": twice}))
"""


def scenario(redis_url: str, name: str) -> Dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCENARIO], env=dict(os.environ, URL=redis_url, NAME=name),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: Dict[str, object] = json.loads(done.stdout)
    return result


def samples(exposition: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    found: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_prometheus_registry_counts_acquires_contention_renewals_losses_releases(redis_url: str, name: str) -> None:
    result = scenario(redis_url, name)
    got = samples(str(result["exposition"]))

    def value(metric: str, **labels: str) -> float:
        return got[(metric, tuple(sorted(labels.items())))]

    assert value("fencelock_acquires_total", outcome="acquired") == 2
    assert value("fencelock_acquires_total", outcome="not_acquired") == 1
    assert value("fencelock_acquires_total", outcome="error") == 0
    assert value("fencelock_contended_attempts_total") == 1
    assert value("fencelock_renewals_total", outcome="ok") >= 2
    assert value("fencelock_renewals_total", outcome="failed") == 1
    assert value("fencelock_losses_total") == 1
    assert value("fencelock_releases_total", outcome="ok") == 1
    assert value("fencelock_releases_total", outcome="lost") == 1
    for histogram in ("fencelock_acquire_latency_seconds", "fencelock_wait_seconds"):
        assert value(f"{histogram}_count") == 2
        assert value(f"{histogram}_bucket", le="+Inf") == 2
        assert value(f"{histogram}_bucket", le="10.0") == 2
        assert 0 < value(f"{histogram}_sum") < 5
    assert result["twice"] == "refused"
    snapshot = result["snapshot"]
    assert isinstance(snapshot, dict)
    assert snapshot["fencelock_acquires"]["acquired"] == 2
    assert snapshot["fencelock_wait_seconds"]["count"] == 2

    # The logging channel: one line per event, with the lock's name.
    lines = [str(line) for line in result["lines"]]  # type: ignore[attr-defined]
    assert any(line.startswith("acquired") and "wait_us=" in line and name in line for line in lines), lines
    for event in ("found the lock held", "renewed", "renewal failed", "lost", "released"):
        assert any(line.startswith(event) for line in lines), (event, lines)


def test_install_needs_prometheus_client_only_when_called() -> None:
    # Importing fencelock.metrics never imports prometheus_client.
    done = subprocess.run(
        [sys.executable, "-c", "import sys, fencelock.metrics; print('prometheus_client' in sys.modules)"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.stdout.strip() == "False", done.stderr
    assert callable(fencelock.metrics.install)


@pytest.mark.parametrize("bad", ["not a registry", 42])
def test_install_on_something_that_is_not_a_registry_raises(bad: object) -> None:
    with pytest.raises(TypeError, match="CollectorRegistry"):
        fencelock.metrics.install(bad)
