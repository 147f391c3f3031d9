"""Shared helpers of the cross-language tests and the demo (Python side),
stdlib only: the vectors' byte strings, a tiny RESP client, MONITOR capture
and normalisation (the same rules as tests/support/fltest.js), and a private redis-server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from urllib.parse import urlparse

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
    return (v["repeat"] * v["count"]).encode()


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
    """Blocking RESP2 client, enough for setup commands and MONITOR."""

    def __init__(self, url: str) -> None:
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        if u.password:
            self.execute("AUTH", u.password)
        db = (u.path or "/0").lstrip("/")
        if db and db != "0":
            self.execute("SELECT", db)

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


TOKEN = re.compile(rb"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# --------------------------------------------------------------------------
# redis-server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A private redis-server on a free loopback port."""

    def __init__(self, *extra: str) -> None:
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed (make setup)"
        self.port = free_port()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *extra],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.01)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def redis_url_or_server() -> Tuple[str, Optional[Server]]:
    """The harness's FENCELOCK_TEST_REDIS_URL, or a private server."""
    url = os.environ.get("FENCELOCK_TEST_REDIS_URL")
    if url:
        return url, None
    server = Server()
    return server.url, server
