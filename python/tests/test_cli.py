"""The `fencelock` console script (fencelock.cli), run as a subprocess the
way an operator runs it, against the harness's servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import pytest

import fencelock
from conftest import Redis, Server, lock_keys

# The installed entry point (pip puts it beside the interpreter).
SCRIPT = shutil.which("fencelock", path=str(Path(sys.executable).parent))


def cli(*args: str, url: Optional[str] = None, stdin: str = "", timeout: float = 60,
        env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    assert SCRIPT, "the fencelock console script is not installed next to python"
    environment = {k: v for k, v in os.environ.items() if k not in ("FENCELOCK_URL", "REDIS_URL")}
    environment.update(env or {})
    urls: List[str] = ["--url", url] if url else []
    return subprocess.run([SCRIPT, *urls, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=environment)


@pytest.fixture
def prefix() -> str:
    """A key space of this test's own: list sees only its locks."""
    return f"py-cli:{uuid.uuid4().hex[:12]}:"


def test_inspect_free_and_held_with_exit_status_and_json(redis_url: str, name: str) -> None:
    free = cli("inspect", name, url=redis_url)
    assert free.returncode == 1, free.stderr
    assert free.stdout == f"{name}  free  fence=-\n"
    with fencelock.Client(redis_url) as client:
        lease = client.acquire(name, ttl=30.0)
        held = cli("inspect", name, url=redis_url)
        assert held.returncode == 0, held.stderr
        assert held.stdout.startswith(f"{name}  held  fence={lease.fence}  ttl=")
        as_json = json.loads(cli("--json", "inspect", name, url=redis_url).stdout)
        assert as_json["held"] is True and as_json["fence"] == lease.fence and as_json["name"] == name
        assert 0 < as_json["ttl"] <= 30
        # --json after the command, and the URL from the environment.
        late = cli("inspect", name, "--json", env={"FENCELOCK_URL": redis_url})
        assert json.loads(late.stdout)["fence"] == lease.fence
        from_redis_url = cli("inspect", name, env={"REDIS_URL": redis_url})
        assert from_redis_url.returncode == 0
        lease.release()


def test_list_with_patterns_json_and_exit_status(redis_url: str, prefix: str) -> None:
    with fencelock.Client(redis_url, prefix=prefix) as client:
        leases = [client.acquire(n, ttl=30.0) for n in ("job:2", "job:1", "job:{x}", "other")]
        listed = cli("--prefix", prefix, "list", "job:*", url=redis_url)
        assert listed.returncode == 0, listed.stderr
        assert [line.split("  ")[0] for line in listed.stdout.splitlines()] == ["job:1", "job:2", "job:{x}"]
        everything = cli("--prefix", prefix, "--json", "list", url=redis_url)
        records = [json.loads(line) for line in everything.stdout.splitlines()]
        assert [r["name"] for r in records] == ["job:1", "job:2", "job:{x}", "other"]
        assert all(r["held"] for r in records)
        assert {r["name"]: r["fence"] for r in records}["other"] == leases[3].fence
        none = cli("--prefix", prefix, "list", "nothing:*", url=redis_url)
        assert (none.returncode, none.stdout) == (1, "")
        for lease in leases:
            lease.release()


def test_force_release_asks_first_and_logs_the_audit_line(redis_url: str, r: Redis, name: str) -> None:
    with fencelock.Client(redis_url) as client:
        lease = client.acquire(name, ttl=30.0)
        declined = cli("force-release", name, url=redis_url, stdin="n\n")
        assert declined.returncode == 1
        assert f"force-release {name}  held" in declined.stderr and "not confirmed" in declined.stderr
        assert client.inspect(name).held
        no_answer = cli("force-release", name, url=redis_url, stdin="")
        assert no_answer.returncode == 1 and client.inspect(name).held

        forced = cli("force-release", name, url=redis_url, stdin="y\n")
        assert forced.returncode == 0, forced.stderr
        fence = int(forced.stdout.strip().rsplit("fence=", 1)[1])
        assert fence > lease.fence and not client.inspect(name).held
        assert "force-released" in forced.stderr and "pid=" in forced.stderr  # the audit line
        assert lease.token not in forced.stderr + forced.stdout
        with pytest.raises(fencelock.LockLost):
            lease.release()

        again = cli("--json", "force-release", name, "--yes", url=redis_url)
        record = json.loads(again.stdout)
        assert again.returncode == 0 and record["force_released"] and record["fence"] > fence
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0


def watching(*args: str, url: str) -> "subprocess.Popen[str]":
    assert SCRIPT
    return subprocess.Popen([SCRIPT, "--url", url, "watch", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def read_line(proc: "subprocess.Popen[str]") -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "watch ended"
    return line


def test_watch_prints_one_line_per_change_until_count(redis_url: str, name: str) -> None:
    proc = watching(name, "--count", "3", "--interval", "0.1", url=redis_url)
    try:
        assert "  free  fence=-" in read_line(proc)
        with fencelock.Client(redis_url) as client:
            lease = client.acquire(name, ttl=30.0)
            assert f"  held  fence={lease.fence}  ttl=" in read_line(proc)
            lease.release()
            assert f"  free  fence={lease.fence}" in read_line(proc)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.communicate()


def test_watch_ends_on_ctrl_c_and_json_lines_have_times(redis_url: str, name: str) -> None:
    assert SCRIPT
    # Ctrl-C reaches a terminal's foreground process with SIGINT at its
    # default. A suite started in the background (`make test &`, CI) hands
    # its children SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the child the terminal's default.
    proc = subprocess.Popen([SCRIPT, "--url", redis_url, "--json", "watch", name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        record = json.loads(read_line(proc))
        assert record["name"] == name and record["held"] is False and record["time"].endswith("Z")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.communicate()


def test_usage_errors_exit_2_and_redis_errors_exit_3(redis_url: str, redis_server: Callable[..., Server]) -> None:
    no_url = cli("inspect", "x")
    assert no_url.returncode == 2 and "FENCELOCK_URL" in no_url.stderr
    assert cli("list", "a[b", url=redis_url).returncode == 2
    assert cli("inspect", "", url=redis_url).returncode == 2
    assert cli("watch", "x", "--count", "0", url=redis_url).returncode == 2
    assert cli("watch", "x", "--interval", "0", url=redis_url).returncode == 2
    assert cli("--url", "http://nope", "inspect", "x").returncode == 2
    assert cli("frobnicate").returncode == 2

    secret = "s3cr3t/pa:ss@word"
    server = redis_server(password=secret)
    wrong = server.url.replace("s3cr3t", "wrong")
    refused = cli("--verbose", "inspect", "x", url=wrong)
    assert refused.returncode == 3, refused.stderr
    assert "pa:ss" not in refused.stderr + refused.stdout
    server.stop()
    down = cli("list", url=server.url)
    assert down.returncode == 3 and secret not in down.stderr


def test_redlock_cluster_and_sentinel(redlock_urls: List[str], cluster_urls: List[str],
                                      sentinel: "tuple[List[str], str]", prefix: str) -> None:
    with fencelock.Client(redlock_urls, prefix=prefix) as client:
        lease = client.acquire("job:a", ttl=30.0)
        urls: Sequence[str] = [a for url in redlock_urls for a in ("--url", url)]
        listed = cli(*urls, "--prefix", prefix, "list")
        assert listed.returncode == 0 and listed.stdout.startswith(f"job:a  held  fence={lease.fence}")
        several = cli("--prefix", prefix, "list", env={"FENCELOCK_URL": ",".join(redlock_urls)})
        assert several.stdout.split("  ttl=")[0] == listed.stdout.split("  ttl=")[0]
        lease.release()
    with fencelock.Client(cluster_urls, topology="cluster", prefix=prefix) as client:
        leases = [client.acquire(f"shard:{i}", ttl=30.0) for i in range(6)]
        listed = cli("--cluster", "--prefix", prefix, "list", url=cluster_urls[0])
        assert [line.split("  ")[0] for line in listed.stdout.splitlines()] == [f"shard:{i}" for i in range(6)]
        for lease in leases:
            lease.release()
    sentinels, service = sentinel
    with fencelock.Client(sentinels, topology="sentinel", service=service, prefix=prefix) as client:
        lease = client.acquire("primary:1", ttl=30.0)
        urls = [a for url in sentinels for a in ("--url", url)]
        listed = cli(*urls, "--sentinel", service, "--prefix", prefix, "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.startswith(f"primary:1  held  fence={lease.fence}")
        lease.release()
