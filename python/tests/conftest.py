"""Fixtures: real redis-servers (the harness's, or private ones) and a tiny
RESP client to look at what the library wrote.

FENCELOCK_TEST_REDIS_URL / FENCELOCK_TEST_REDLOCK_URLS are used when set;
otherwise private `redis-server`s are started on ports from the harness's
allocator (ci/ports.sh) and killed at the end, so `pytest` alone works.
Tests that stop, kill or password-protect a server always start their own
(`redis_server` factory).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Coroutine, Iterator, List, Optional, TypeVar

import pytest

import fencelock

T = TypeVar("T")

PREFIX = b"fencelock:"


# The one RESP client and redis-server launcher of every Python suite.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
from fltest import Redis, RespError, Server, harness_env  # noqa: E402

__all__ = ["Redis", "RespError", "Server"]


def lock_keys(name: "str | bytes | bytearray", prefix: bytes = PREFIX) -> "tuple[bytes, bytes, bytes]":
    """The documented key layout (README, core/src/keys.rs)."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    if b"{" in raw or b"}" in raw:
        escaped = raw.replace(b"%", b"%25").replace(b"{", b"%7B").replace(b"}", b"%7D")
        base = prefix + b"#{" + escaped + b"}"
    else:
        base = prefix + b"{" + raw + b"}"
    return base, base + b":fence", base + b":released"


@pytest.fixture
def redis_server() -> Iterator[Callable[..., Server]]:
    """Factory for private servers (killed after the test)."""
    servers: List[Server] = []

    def make(password: Optional[str] = None) -> Server:
        server = Server(password=password)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("FENCELOCK_TEST_REDIS_URL")
    if url:
        yield url
        return
    server = Server()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redlock_urls() -> Iterator[List[str]]:
    urls = os.environ.get("FENCELOCK_TEST_REDLOCK_URLS")
    if urls:
        yield [u.strip() for u in urls.split(",") if u.strip()]
        return
    servers = [Server() for _ in range(5)]
    try:
        yield [s.url for s in servers]
    finally:
        for s in servers:
            s.stop()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The harness's PostgreSQL (FENCELOCK_TEST_PG_URL), else a private one
    started with ci/postgres.sh and stopped at the end of the session."""
    url = os.environ.get("FENCELOCK_TEST_PG_URL")
    if url:
        yield url
        return
    script = str(Path(__file__).resolve().parents[2] / "ci" / "postgres.sh")
    with tempfile.TemporaryDirectory(prefix="fencelock-pg-run-") as run_dir:
        env = dict(os.environ, FENCELOCK_PG_RUN_DIR=run_dir)
        subprocess.run(["bash", script, "start"], env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            line = (Path(run_dir) / "env").read_text().strip()
            yield line.partition("=")[2]
        finally:
            subprocess.run(["bash", script, "stop"], env=env, check=True, stdout=subprocess.DEVNULL)


@pytest.fixture
def r(redis_url: str) -> Iterator[Redis]:
    conn = Redis(redis_url)
    yield conn
    conn.close()


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"py-test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(redis_url: str) -> Iterator[fencelock.Client]:
    c = fencelock.Client(redis_url)
    yield c
    c.close()


@pytest.fixture
def aclient(redis_url: str) -> Iterator[fencelock.AsyncClient]:
    c = fencelock.AsyncClient(redis_url)
    yield c
    asyncio.run(_close(c))


async def _close(c: fencelock.AsyncClient) -> None:
    await c.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll a condition (not a sleep to paper over a race: the condition is
    what the test waits for, and it fails if it never holds)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def subscribers(r: Redis, name: "str | bytes") -> int:
    """How many connections listen for this lock's release notifications."""
    channel = lock_keys(name)[2]
    reply = r.execute("PUBSUB", "NUMSUB", channel)
    return int(reply[1])


# --------------------------------------------------------------------------
# Topologies the harness provides (a Redis Cluster, Sentinels).


@pytest.fixture(scope="session")
def cluster_urls() -> List[str]:
    return harness_env("FENCELOCK_TEST_CLUSTER_URLS").split(",")


@pytest.fixture(scope="session")
def sentinel() -> "tuple[List[str], str]":
    return (
        harness_env("FENCELOCK_TEST_SENTINEL_URLS").split(","),
        harness_env("FENCELOCK_TEST_SENTINEL_SERVICE"),
    )


def cluster_get(urls: List[str], key: bytes) -> Optional[bytes]:
    """GET from the primary that owns the key's slot (the others say MOVED)."""
    for url in urls:
        conn = Redis(url)
        try:
            return conn.execute("GET", key)  # type: ignore[no-any-return]
        except RespError:
            continue
        finally:
            conn.close()
    raise AssertionError("no cluster node owns the key")


def sentinel_primary(sentinel: "tuple[List[str], str]") -> str:
    urls, service = sentinel
    conn = Redis(urls[0])
    try:
        host, port = conn.execute("SENTINEL", "get-master-addr-by-name", service)
    finally:
        conn.close()
    return f"redis://{host.decode()}:{port.decode()}/0"
