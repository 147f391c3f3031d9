"""Fixtures: real redis-servers (the harness's, or private ones) and a tiny
RESP client to look at what the library wrote.

FENCELOCK_TEST_REDIS_URL / FENCELOCK_TEST_REDLOCK_URLS are used when set;
otherwise private `redis-server`s are started on free loopback ports and
killed at the end, so `pytest` alone works. Tests that stop, kill or
password-protect a server always start their own (`redis_server` factory).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any, Callable, Coroutine, Iterator, List, Optional, TypeVar
from urllib.parse import urlparse

import pytest

import fencelock

T = TypeVar("T")

PREFIX = b"fencelock:"


# --------------------------------------------------------------------------
# A minimal RESP2 client (tests only: to inspect and poke at Redis directly).


class RespError(Exception):
    pass


class Redis:
    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 6379
        self.db = int((parsed.path or "/0").lstrip("/") or 0)
        self.password = parsed.password
        self.sock = socket.create_connection((self.host, self.port), timeout=5)
        self.buf = self.sock.makefile("rb")
        if self.password:
            self.execute("AUTH", self.password)
        if self.db:
            self.execute("SELECT", self.db)

    def close(self) -> None:
        try:
            self.buf.close()
            self.sock.close()
        except OSError:
            pass

    def execute(self, *args: Any) -> Any:
        out = [b"*%d\r\n" % len(args)]
        for arg in args:
            if isinstance(arg, str):
                arg = arg.encode()
            elif isinstance(arg, int):
                arg = str(arg).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self) -> Any:
        line = self.buf.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.buf.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self._read() for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    # conveniences
    def keys(self, pattern: bytes = b"*") -> List[bytes]:
        return sorted(self.execute("KEYS", pattern))

    def get(self, key: bytes) -> Optional[bytes]:
        value: Optional[bytes] = self.execute("GET", key)
        return value


def lock_keys(name: "str | bytes | bytearray", prefix: bytes = PREFIX) -> "tuple[bytes, bytes, bytes]":
    """The documented key layout (README, core/src/keys.rs)."""
    raw = name.encode() if isinstance(name, str) else bytes(name)
    if b"{" in raw or b"}" in raw:
        escaped = raw.replace(b"%", b"%25").replace(b"{", b"%7B").replace(b"}", b"%7D")
        base = prefix + b"#{" + escaped + b"}"
    else:
        base = prefix + b"{" + raw + b"}"
    return base, base + b":fence", base + b":released"


# --------------------------------------------------------------------------
# redis-server processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, password: Optional[str] = None) -> None:
        self.password = password
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="fencelock-py-redis-")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.start()

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        args = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.dir]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                r = Redis(self.url)
                r.execute("PING")
                r.close()
                return
            except (OSError, RespError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start")
                time.sleep(0.02)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_server() -> Iterator[Callable[..., Server]]:
    """Factory for private servers (killed after the test)."""
    servers: List[Server] = []

    def make(password: Optional[str] = None) -> Server:
        server = Server(password)
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
