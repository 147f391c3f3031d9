"""fair=True: the mutex's waiters from different clients and processes are
served in arrival order through a line in Redis; the same lock (key, token,
fence) as without it; a killed or cancelled waiter does not block the line;
bad inputs write nothing (sync and asyncio, single node and Redlock)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import List

import pytest

import fencelock
from conftest import Redis, lock_keys, run, wait_until


def line(name: str) -> "tuple[bytes, bytes]":
    """The fair line and its expiries (README "Key layout")."""
    base = lock_keys(name)[0]
    return base + b":waiting", base + b":waiting:until"


def test_waiters_of_other_clients_are_served_in_arrival_order(redis_url: str, r: Redis, name: str) -> None:
    waiting, _ = line(name)
    clients = [fencelock.Client(redis_url) for _ in range(4)]
    try:
        # A plain holder: fair and plain leases are the same lock.
        held = clients[0].acquire(name, ttl=10.0)
        order: List[str] = []

        def wait_for(c: fencelock.Client, who: str) -> None:
            with c.lock(name, ttl=10.0, wait=30.0, fair=True) as lease:
                assert r.execute("GET", lock_keys(name)[0]) == lease.token.encode()
                order.append(who)
                time.sleep(0.02)

        threads = []
        for i, who in enumerate(["first", "second", "third"], start=1):
            t = threading.Thread(target=wait_for, args=(clients[i], who))
            t.start()
            threads.append(t)
            wait_until(lambda: r.execute("ZCARD", waiting) == i, what=f"{who} in line")
        held.release()
        for t in threads:
            t.join(10)
        assert order == ["first", "second", "third"]
        assert r.execute("EXISTS", waiting) == 0
    finally:
        for c in clients:
            c.close()


def test_fair_and_plain_exclude_each_other_and_a_fair_try_once_does_not_jump(
    client: fencelock.Client, redis_url: str, r: Redis, name: str
) -> None:
    lease = client.acquire(name, ttl=5.0, fair=True)
    with fencelock.Client(redis_url) as other:
        assert other.try_acquire(name, ttl=5.0) is None
        info = other.inspect(name)
        assert info.held and info.fence == lease.fence
        lease.extend()
        lease.release()
        plain = other.acquire(name, ttl=5.0)
        assert client.try_acquire(name, ttl=5.0, fair=True) is None
        plain.release()
        # Free, but someone waits: a fair try-once does not jump the line.
        waiting, until = line(name)
        now_s, now_us = (int(x) for x in r.execute("TIME"))
        r.execute("ZADD", waiting, now_s * 1_000_000 + now_us, "someone")
        r.execute("ZADD", until, now_s * 1000 + now_us // 1000 + 5000, "someone")
        assert client.try_acquire(name, ttl=5.0, fair=True) is None
        # A plain acquire does (documented).
        other.acquire(name, ttl=5.0, wait=0).release()
        r.execute("DEL", waiting, until)


WAITER = """
import sys, fencelock
client = fencelock.Client(sys.argv[1])
print("waiting", flush=True)
client.acquire(sys.argv[2], ttl=10.0, fair=True)
"""


def test_a_killed_waiter_blocks_the_line_only_until_its_place_expires(
    client: fencelock.Client, redis_url: str, r: Redis, name: str
) -> None:
    """A waiter process killed with SIGKILL (no clean-up at all) leaves its
    place; the lock it was first in line for goes on once the place expires
    (3 s after its last attempt)."""
    waiting, _ = line(name)
    held = client.acquire(name, ttl=30.0, fair=True)
    proc = subprocess.Popen([sys.executable, "-c", WAITER, redis_url, name], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
        wait_until(lambda: r.execute("ZCARD", waiting) == 1, timeout=10.0, what="the child in line")
    finally:
        proc.kill()
        proc.wait()
    got: List[fencelock.Lease] = []
    later = threading.Thread(target=lambda: got.append(client.acquire(name, ttl=5.0, wait=10.0, fair=True)))
    later.start()
    wait_until(lambda: r.execute("ZCARD", waiting) == 2, what="second in line")
    started = time.monotonic()
    held.release()
    later.join(10.0)
    assert got, "the lock never came"
    waited = time.monotonic() - started
    assert 0.5 < waited < 5.0, f"served after the dead waiter's place expired ({waited:.2f} s)"
    assert r.execute("ZCARD", waiting) == 0
    got[0].release()


def test_bad_inputs_are_typed_errors_and_write_nothing(redis_url: str, r: Redis, name: str) -> None:
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    with fencelock.Client(redis_url) as c:
        for ttl in (0, -1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError):
                c.acquire(name, ttl=ttl, fair=True)
            with pytest.raises(ValueError):
                c.try_acquire(name, ttl=ttl, fair=True)
        with pytest.raises(ValueError):
            c.acquire(name, ttl=1.0, wait=-1.0, fair=True)
        with pytest.raises(ValueError):
            c.acquire("", ttl=1.0, fair=True)
        for wrong in ("yes", 1, None):
            with pytest.raises(TypeError):
                c.acquire(name, ttl=1.0, fair=wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            c.semaphore(name, 2).acquire(ttl=1.0, fair=True)  # type: ignore[call-arg]
    assert set(r.keys(b"*")) - before == set()
    # A lock key of the wrong type: RedisError, and nothing changes.
    key = lock_keys(name)[0]
    r.execute("LPUSH", key, "x")
    with fencelock.Client(redis_url) as c:
        with pytest.raises(fencelock.RedisError):
            c.acquire(name, ttl=1.0, fair=True)
    assert len(set(r.keys(b"*")) - before) == 1
    r.execute("DEL", key)


def test_asyncio_fifo_and_cancel_leaves_the_line(redis_url: str, r: Redis, name: str) -> None:
    waiting, _ = line(name)

    async def main() -> None:
        a, b, c = (fencelock.AsyncClient(redis_url) for _ in range(3))
        held = await a.acquire(name, ttl=10.0, fair=True)
        # Cancelled while waiting: out of the line at once.
        task = asyncio.ensure_future(b.acquire(name, ttl=10.0, fair=True))
        while r.execute("ZCARD", waiting) != 1:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while r.execute("ZCARD", waiting) != 0:
            await asyncio.sleep(0.005)
        with pytest.raises(fencelock.NotAcquired):
            await b.acquire(name, ttl=10.0, wait=0.1, fair=True)
        assert await b.try_acquire(name, ttl=1.0, fair=True) is None
        # Two clients line up; served in that order.
        order: List[str] = []

        async def wait_for(cl: fencelock.AsyncClient, who: str) -> None:
            async with cl.lock(name, ttl=10.0, wait=30.0, fair=True):
                order.append(who)
                await asyncio.sleep(0.02)

        first = asyncio.ensure_future(wait_for(c, "first"))
        while r.execute("ZCARD", waiting) != 1:
            await asyncio.sleep(0.005)
        second = asyncio.ensure_future(wait_for(b, "second"))
        while r.execute("ZCARD", waiting) != 2:
            await asyncio.sleep(0.005)
        await held.release()
        await asyncio.gather(first, second)
        assert order == ["first", "second"]
        assert r.execute("EXISTS", waiting) == 0 and r.execute("EXISTS", lock_keys(name)[0]) == 0
        for cl in (a, b, c):
            await cl.close()

    run(main())


def test_redlock_fair(redlock_urls: List[str], name: str) -> None:
    with fencelock.Client(redlock_urls) as c, fencelock.Client(redlock_urls) as d:
        a = c.acquire(name, ttl=5.0, fair=True)
        assert d.try_acquire(name, ttl=5.0, fair=True) is None
        got: List[fencelock.Lease] = []
        t = threading.Thread(target=lambda: got.append(d.acquire(name, ttl=5.0, wait=10.0, fair=True)))
        t.start()
        waiting, _ = line(name)

        def queued() -> bool:
            nodes = [Redis(u) for u in redlock_urls]
            try:
                return sum(int(n.execute("ZCARD", waiting)) for n in nodes) >= 3
            finally:
                for n in nodes:
                    n.close()

        wait_until(queued, what="in line on a majority")
        a.release()
        t.join(10)
        assert got and got[0].fence > a.fence
        got[0].release()
