"""The Python worker for tests/safety (see src/worker.rs for the Rust twin).

Loop: acquire -> work -> fenced write to the resource -> release, recording
every step as one JSON line (CLOCK_MONOTONIC ns via time.monotonic_ns(),
sha256 of the token, never the token). Bounded by --iterations and
--seconds; every acquire is bounded by --wait-ms.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import time

import fencelock


def main() -> None:
    p = argparse.ArgumentParser()
    for flag in ("--id", "--urls", "--lock", "--history", "--stop-file", "--topology", "--primitive"):
        p.add_argument(flag, required=True)
    for flag in ("--ttl-ms", "--wait-ms", "--work-ms", "--think-ms", "--auto-renew", "--iterations", "--resource", "--replicas"):
        p.add_argument(flag, required=True, type=int)
    p.add_argument("--seconds", required=True, type=float)
    a = p.parse_args()

    fd = os.open(a.history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def rec(ev: str, t: int | None = None, **fields: object) -> None:
        r = {"t": t if t is not None else time.monotonic_ns(), "w": a.id, "ev": ev}
        r.update({k: v for k, v in fields.items() if v is not None})
        os.write(fd, (json.dumps(r) + "\n").encode())  # one write(2) per line

    rec("start", pid=os.getpid(), lang="python")
    deadline = time.monotonic_ns() + int(a.seconds * 1e9)
    urls = a.urls.split(",")
    url = urls[0] if len(urls) == 1 else urls
    kind, _, service = a.topology.partition(":")
    topology = {} if kind == "standalone" else {"topology": kind, "service": service or None}
    while True:
        try:
            client = fencelock.Client(
                url, connect_timeout=0.5, response_timeout=1.0, replicas=a.replicas, **topology
            )
            break
        except fencelock.RedisError:
            if time.monotonic_ns() >= deadline:
                raise
            rec("connect_failed", err="redis")
            time.sleep(0.05)

    res = socket.create_connection(("127.0.0.1", a.resource))
    res.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    res_file = res.makefile("r")

    def write(op: str, fence: int, lease: str) -> bool:
        res.sendall(f"{op} {fence} {lease} {a.id}\n".encode())
        return res_file.readline().strip() == "1"

    ttl = a.ttl_ms / 1000.0
    wait = a.wait_ms / 1000.0
    # --primitive (see src/worker.rs): mutex, semaphore:N, or rw (write when i % 3 == 0).
    primitive, _, permits = a.primitive.partition(":")
    i = 0
    while i < a.iterations and time.monotonic_ns() < deadline and not os.path.exists(a.stop_file):
        role, op = {"semaphore": ("permit", "P"), "rw": ("write", "W") if i % 3 == 0 else ("read", "R")}.get(
            primitive, (None, "W")
        )
        i += 1
        t0 = time.monotonic_ns()
        rec("acquire_start", t=t0)
        renew = a.auto_renew == 1
        try:
            if primitive == "semaphore":
                lease = client.semaphore(a.lock, int(permits)).acquire(ttl=ttl, wait=wait, auto_renew=renew)
            elif primitive == "rw":
                side = client.rw_lock(a.lock).writer if role == "write" else client.rw_lock(a.lock).reader
                lease = side.acquire(ttl=ttl, wait=wait, auto_renew=renew)
            else:
                lease = client.acquire(a.lock, ttl=ttl, wait=wait, auto_renew=renew)
        except fencelock.NotAcquired:
            rec("acquire_failed", err="not_acquired")
            continue
        except fencelock.RedisError:
            rec("acquire_failed", err="redis")
            time.sleep(0.02)  # Redis is down (a fault): do not spin
            continue
        t = time.monotonic_ns()  # timestamp first, then validity
        h = hashlib.sha256(lease.token.encode()).hexdigest()
        fence = lease.fence
        rec("acquired", t=t, lease=h, fence=fence, valid_ms=lease.valid_for * 1000.0, t0=t0, role=role)
        time.sleep(a.work_ms / 1000.0)
        t = time.monotonic_ns()
        rec("write_start", t=t, lease=h, fence=fence, valid_ms=lease.valid_for * 1000.0)
        accepted = write(op, fence, h)
        rec("write_end", lease=h, fence=fence, accepted=accepted)
        t = time.monotonic_ns()
        rec("release_start", t=t, lease=h, valid_ms=lease.valid_for * 1000.0)
        try:
            lease.release()
            rec("released", lease=h)
        except fencelock.LockLost:
            rec("release_lost", lease=h)
        except fencelock.RedisError:
            rec("release_error", lease=h, err="redis")
        if a.think_ms > 0:
            time.sleep(a.think_ms / 1000.0)
    client.close()
    rec("done")


if __name__ == "__main__":
    main()
