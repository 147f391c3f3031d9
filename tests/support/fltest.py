"""Shared helpers of the cross-language tests and the demo (Python side),
stdlib only: the vectors' byte strings, a tiny RESP client, MONITOR capture
and normalisation (the same rules as tests/support/fltest.js), and private
redis-servers on ports from ci/ports.sh. The Python package's tests use it too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import quote, unquote, urlparse

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"


def vectors(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def as_bytes(v: Any) -> bytes:
    """The vectors' byte strings: "text", {"hex"}, {"repeat", "count"}."""
    if isinstance(v, str):
        return v.encode()
    if "hex" in v:
        return bytes.fromhex(v["hex"])
    text: str = v["repeat"] * v["count"]
    return text.encode()


def as_name(v: Any) -> Union[str, bytes]:
    """A lock name as a Python user passes it: str for text, bytes for raw."""
    if isinstance(v, dict) and "hex" in v:
        return bytes.fromhex(v["hex"])
    return as_bytes(v).decode()


def number(v: Any) -> float:
    return float(v) if isinstance(v, str) else v  # "NaN", "Infinity", "-Infinity"


# --------------------------------------------------------------------------
# RESP


class RespError(Exception):
    pass


class Redis:
    """Blocking RESP2 client, enough for setup commands, checks and MONITOR."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        u = urlparse(url)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 6379
        self.db = int((u.path or "/0").lstrip("/") or 0)
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        if u.password:
            self.execute("AUTH", *([unquote(u.username)] if u.username else []), unquote(u.password))
        if self.db:
            self.execute("SELECT", self.db)

    def send(self, *args: Any) -> None:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def execute(self, *args: Any) -> Any:
        self.send(*args)
        return self.read()

    def read(self) -> Any:
        line = self.file.readline()
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
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    def keys(self, pattern: bytes = b"*") -> List[bytes]:
        return sorted(self.execute("KEYS", pattern))

    def get(self, key: bytes) -> Optional[bytes]:
        value: Optional[bytes] = self.execute("GET", key)
        return value

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# MONITOR

_ESC = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}


def parse_monitor_line(line: bytes) -> Optional[Tuple[str, List[bytes]]]:
    """b'1700000000.1 [0 127.0.0.1:5000] "EVALSHA" "ab" ...' -> (client, args)."""
    m = re.match(rb"^\+?[\d.]+ \[\d+ ([^\]]+)\] (.*)$", line)
    if not m:
        return None
    client, rest = m.group(1).decode(), m.group(2)
    args: List[bytes] = []
    i = 0
    while i < len(rest):
        if rest[i : i + 1] != b'"':
            i += 1
            continue
        i += 1
        arg = bytearray()
        while i < len(rest) and rest[i : i + 1] != b'"':
            c = rest[i : i + 1]
            if c == b"\\":
                i += 1
                e = rest[i : i + 1]
                if e == b"x":
                    arg += bytes.fromhex(rest[i + 1 : i + 3].decode())
                    i += 2
                else:
                    arg += _ESC.get(e, e)
            else:
                arg += c
            i += 1
        i += 1
        args.append(bytes(arg))
    return client, args


class Monitor:
    """MONITOR on its own connection, read by a thread; `sync()` makes sure
    everything the server ran before it is in `seen`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seen: List[Tuple[str, List[bytes]]] = []
        self.cond = threading.Condition()
        self.conn = Redis(url)
        assert self.conn.execute("MONITOR") == "OK"
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        self.sync()

    def _read(self) -> None:
        while True:
            try:
                line = self.conn.file.readline()
            except (OSError, ValueError):
                return
            if not line:
                return
            parsed = parse_monitor_line(line.rstrip(b"\r\n"))
            if parsed:
                with self.cond:
                    self.seen.append(parsed)
                    self.cond.notify_all()

    def wait_for(self, pred: Callable[[List[Tuple[str, List[bytes]]]], bool], timeout: float = 10.0) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: pred(self.seen), timeout):
                tail = "\n".join(f"{c} {a!r}"[:300] for c, a in self.seen[-30:])
                raise AssertionError(f"MONITOR never showed the expected command; last seen:\n{tail}")

    def sync(self) -> None:
        marker = ("monitor-sync-" + uuid.uuid4().hex).encode()
        r = Redis(self.url)
        r.execute("ECHO", marker)
        r.close()
        self.wait_for(lambda seen: any(len(a) == 2 and a[1] == marker for _, a in seen))

    def close(self) -> None:
        try:  # wakes the reader thread first (closing its file would block)
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
        self.conn.close()


def script_calls(seen: List[Tuple[str, List[bytes]]], scripts: Dict[str, str]) -> List[Dict[str, Any]]:
    """Client script calls (not what scripts run), EVAL mapped to its SHA1,
    the NOSCRIPT fallback (an EVAL repeating that client's previous call, an
    EVALSHA) dropped. `scripts` maps name -> SHA1."""
    by_sha = {sha: name for name, sha in scripts.items()}
    out: List[Dict[str, Any]] = []
    last_evalsha: Dict[str, Dict[str, Any]] = {}  # per client
    for client, args in seen:
        if client == "lua" or len(args) < 3:
            continue
        verb = args[0].upper()
        if verb == b"EVALSHA":
            sha = args[1].decode().lower()
        elif verb == b"EVAL":
            sha = hashlib.sha1(args[1]).hexdigest()
        else:
            continue
        if sha not in by_sha:
            continue
        n = int(args[2])
        call = {"client": client, "script": by_sha[sha], "keys": args[3 : 3 + n], "args": args[3 + n :]}
        if verb == b"EVAL" and call == last_evalsha.pop(client, None):
            continue
        if verb == b"EVALSHA":
            last_evalsha[client] = call
        else:
            last_evalsha.pop(client, None)
        out.append(call)
    return out


def start_in_line(name: Union[str, bytes], start: Callable[[], None], timeout: float = 30) -> None:
    """Run `start` (which starts an acquire of `name` on another thread) and
    return once that acquire waits in its client's local line: fencelock logs
    "in line behind ..." (logger "fencelock", DEBUG) after the place is
    taken, inside the acquire call, so the line's order is fixed by then."""
    in_line = threading.Event()
    shown = name if isinstance(name, str) else repr(name)

    class InLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("in line behind") and shown in message:
                in_line.set()

    logger = logging.getLogger("fencelock")
    handler, level = InLine(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        start()
        assert in_line.wait(timeout), "the acquire never lined up"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


TOKEN = re.compile(rb"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# --------------------------------------------------------------------------
# redis-server


PORTS = ROOT / "ci" / "ports.sh"


def claim_ports(n: int = 1) -> List[int]:
    """Ports from the harness's allocator (ci/ports.sh, tests/README.md),
    claimed for this process until released or until it exits; P + 10000
    is free too (a cluster bus port)."""
    out = subprocess.run(["bash", str(PORTS), "claim", str(n), "--owner", str(os.getpid())],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return [int(p) for p in out.split()]


def release_ports(*ports: int) -> None:
    subprocess.run(["bash", str(PORTS), "release", *map(str, ports)], check=True)


class Server:
    """A private redis-server (no persistence) on a claimed loopback port,
    killed by `kill()` (the port stays ours: `start()` restarts on it) or
    `stop()` (the port is released). `extra` are redis-server arguments."""

    def __init__(self, *extra: str, password: Optional[str] = None) -> None:
        self.extra = list(extra)
        self.password = password
        self.dir = tempfile.mkdtemp(prefix="fencelock-redis-")
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        for attempt in range(3):
            self.port = claim_ports()[0]
            try:
                self.start()
                return
            except RuntimeError:
                # Only a process outside the allocator can hold a claimed
                # port; leave it to that process and try another.
                release_ports(self.port)
                if attempt == 2:
                    shutil.rmtree(self.dir, ignore_errors=True)
                    raise

    @property
    def url(self) -> str:
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (again) on our port; returns once PING is answered by this
        process (not by a stranger on the port)."""
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed (make setup)"
        args = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.dir]
        if self.password:
            args += ["--requirepass", self.password]
        proc = subprocess.Popen(args + self.extra, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proc = proc
        deadline = time.monotonic() + 10
        while True:
            try:
                r = Redis(self.url, timeout=2)
                try:
                    info = r.execute("INFO", "server")
                finally:
                    r.close()
                if f"process_id:{proc.pid}\r".encode() in info:
                    return
            except (OSError, RespError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL (no goodbye to clients); the port stays claimed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self.kill()
        release_ports(self.port)
        shutil.rmtree(self.dir, ignore_errors=True)


def harness_env(var: str) -> str:
    """A topology the harness provides (FENCELOCK_TEST_CLUSTER_URLS, ...):
    from the environment under `make test`, else from `ci/redis.sh start`
    (what `make redis-start` runs; idempotent, stopped by `make redis-stop`)."""
    value = os.environ.get(var)
    if value:
        return value
    root = Path(__file__).resolve().parents[2]
    run_dir = Path(os.environ.get("FENCELOCK_REDIS_RUN_DIR") or root / ".build" / "redis")
    subprocess.run(
        ["bash", str(root / "ci" / "redis.sh"), "start"],
        env={**os.environ, "FENCELOCK_REDIS_RUN_DIR": str(run_dir)},
        stdout=subprocess.DEVNULL,
        check=True,
    )
    for line in (run_dir / "env").read_text().splitlines():
        key, _, val = line.strip().partition("=")
        if key == var:
            return val
    raise AssertionError(f"{var} missing from {run_dir}/env")


def redis_url_or_server() -> Tuple[str, Optional[Server]]:
    """The harness's FENCELOCK_TEST_REDIS_URL, or a private server."""
    url = os.environ.get("FENCELOCK_TEST_REDIS_URL")
    if url:
        return url, None
    server = Server()
    return server.url, server
