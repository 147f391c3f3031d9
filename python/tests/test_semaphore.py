"""client.semaphore(name, permits): permits are leases, handed out in arrival
order across processes; bad inputs write nothing; crashed and cancelled
waiters do not block the line (sync and asyncio, single node and Redlock)."""

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


def sem_keys(name: str) -> "tuple[bytes, bytes, bytes, bytes]":
    """holders, line, line expiries, fence (README "Key layout")."""
    base = lock_keys(name)[0] + b":semaphore"
    return base, base + b":waiting", base + b":waiting:until", base + b":fence"


def test_permits_are_leases_with_increasing_fences(client: fencelock.Client, r: Redis, name: str) -> None:
    sem = client.semaphore(name, permits=2)
    assert (sem.name, sem.permits) == (name, 2) and "permits=2" in repr(sem)
    a = sem.acquire(ttl=5.0)
    b = sem.acquire(ttl=5.0, wait=0)
    assert b.fence > a.fence and a.name == name
    holders, waiting, _, fence_key = sem_keys(name)
    assert r.execute("TYPE", holders) == "zset"
    assert sorted(r.execute("ZRANGE", holders, 0, -1)) == sorted([a.token.encode(), b.token.encode()])
    assert 0 < r.execute("PTTL", holders) <= 5000
    assert r.execute("GET", fence_key) == str(b.fence).encode()
    assert sem.try_acquire(ttl=5.0) is None
    assert r.execute("EXISTS", waiting) == 0, "a try-once takes no place in line"
    assert a.held() and sem.inspect().held_by_me
    a.release()
    a.release()  # a second release is a no-op
    assert not a.held()
    with sem.lock(ttl=5.0, wait=1.0) as c:
        assert c.fence > b.fence and not c.lost
    b.release()
    assert r.execute("EXISTS", holders) == 0
    info = sem.inspect()
    assert not info.held and info.fence == c.fence


def test_never_more_holders_than_permits_across_threads(redis_url: str, name: str) -> None:
    clients = [fencelock.Client(redis_url) for _ in range(3)]
    lock = threading.Lock()
    state = {"now": 0, "most": 0}
    fences: List[int] = []
    errors: List[BaseException] = []

    def worker(i: int) -> None:
        sem = clients[i % 3].semaphore(name, permits=3)
        try:
            for _ in range(3):
                with sem.lock(ttl=10.0, wait=30.0) as permit:
                    with lock:
                        state["now"] += 1
                        state["most"] = max(state["most"], state["now"])
                        assert state["now"] <= 3
                        fences.append(permit.fence)
                    time.sleep(0.002)
                    with lock:
                        state["now"] -= 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert not errors, errors
    assert len(set(fences)) == 27 and state["most"] >= 2


def test_waiters_of_other_clients_are_served_in_arrival_order(redis_url: str, r: Redis, name: str) -> None:
    _, waiting, _, _ = sem_keys(name)
    with fencelock.Client(redis_url) as holder, fencelock.Client(redis_url) as c1, fencelock.Client(redis_url) as c2:
        held = holder.semaphore(name, 1).acquire(ttl=10.0)
        order: List[str] = []

        def wait_for(c: fencelock.Client, who: str) -> None:
            with c.semaphore(name, 1).lock(ttl=10.0, wait=30.0):
                order.append(who)
                time.sleep(0.02)

        first = threading.Thread(target=wait_for, args=(c1, "first"))
        first.start()
        wait_until(lambda: r.execute("ZCARD", waiting) == 1, what="first in line")
        second = threading.Thread(target=wait_for, args=(c2, "second"))
        second.start()
        wait_until(lambda: r.execute("ZCARD", waiting) == 2, what="second in line")
        held.release()
        first.join(10)
        second.join(10)
        assert order == ["first", "second"]


WAITER = """
import sys, fencelock
client = fencelock.Client(sys.argv[1])
print("waiting", flush=True)
client.semaphore(sys.argv[2], 1).acquire(ttl=10.0)
"""


def test_a_killed_waiter_blocks_the_line_only_until_its_place_expires(
    client: fencelock.Client, redis_url: str, r: Redis, name: str
) -> None:
    """A waiter process killed with SIGKILL (no clean-up at all) leaves its
    place; the permit it was first in line for goes on once the place
    expires (3 s after its last attempt)."""
    _, waiting, _, _ = sem_keys(name)
    sem = client.semaphore(name, 1)
    held = sem.acquire(ttl=30.0)
    proc = subprocess.Popen([sys.executable, "-c", WAITER, redis_url, name], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "waiting\n"
        wait_until(lambda: r.execute("ZCARD", waiting) == 1, timeout=10.0, what="the child in line")
    finally:
        proc.kill()
        proc.wait()
    got: List[fencelock.Lease] = []
    later = threading.Thread(target=lambda: got.append(sem.acquire(ttl=5.0, wait=10.0)))
    later.start()
    wait_until(lambda: r.execute("ZCARD", waiting) == 2, what="second in line")
    started = time.monotonic()
    held.release()
    later.join(10.0)
    assert got, "the permit never came"
    waited = time.monotonic() - started
    assert 0.5 < waited < 5.0, f"served after the dead waiter's place expired ({waited:.2f} s)"
    assert r.execute("ZCARD", waiting) == 0
    got[0].release()


def test_bad_inputs_are_typed_errors_and_write_nothing(redis_url: str, r: Redis, name: str) -> None:
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    with fencelock.Client(redis_url) as c:
        for bad in (0, -1, 1_000_001, 2**70):
            with pytest.raises(ValueError):
                c.semaphore(name, bad)
        for wrong in (1.5, "3", None, True):
            with pytest.raises(TypeError):
                c.semaphore(name, wrong)  # type: ignore[arg-type]
        sem = c.semaphore(name, 2)
        for ttl in (0, -1.0, float("nan"), float("inf")):
            with pytest.raises(ValueError):
                sem.acquire(ttl=ttl)
            with pytest.raises(ValueError):
                sem.try_acquire(ttl=ttl)
        with pytest.raises(TypeError):
            sem.acquire(ttl="1")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            sem.acquire(ttl=1.0, wait=-1.0)
        with pytest.raises(ValueError):
            c.semaphore("", 2).acquire(ttl=1.0)
        with pytest.raises(TypeError):
            c.semaphore(42, 2).acquire(ttl=1.0)  # type: ignore[arg-type]
    assert set(r.keys(b"*")) - before == set()
    # A holders key of the wrong type: RedisError, and nothing changes.
    holders = sem_keys(name)[0]
    r.execute("SET", holders, "x")
    with fencelock.Client(redis_url) as c:
        with pytest.raises(fencelock.RedisError):
            c.semaphore(name, 2).acquire(ttl=1.0)
    assert r.execute("GET", holders) == b"x" and len(set(r.keys(b"*")) - before) == 1
    r.execute("DEL", holders)
    c.close()
    with pytest.raises(fencelock.ClientClosed):
        c.semaphore(name, 2).acquire(ttl=1.0)


def test_asyncio_cancel_leaves_the_line_and_holds_nothing(
    aclient: fencelock.AsyncClient, r: Redis, name: str
) -> None:
    holders, waiting, _, _ = sem_keys(name)

    async def main() -> None:
        sem = aclient.semaphore(name, permits=1)
        held = await sem.acquire(ttl=10.0)
        task = asyncio.ensure_future(sem.acquire(ttl=10.0))
        while r.execute("ZCARD", waiting) != 1:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while r.execute("ZCARD", waiting) != 0:
            await asyncio.sleep(0.005)
        with pytest.raises(fencelock.NotAcquired):
            await sem.acquire(ttl=10.0, wait=0.1)
        while r.execute("ZCARD", waiting) != 0:  # left the line (sent, maybe not answered yet)
            await asyncio.sleep(0.005)
        assert r.execute("ZRANGE", holders, 0, -1) == [held.token.encode()]
        assert await sem.try_acquire(ttl=1.0) is None
        await held.release()
        async with sem.lock(ttl=5.0) as permit:
            assert permit.fence > held.fence
            assert (await sem.inspect()).held_by_me
        assert r.execute("EXISTS", holders) == 0

    run(main())


def test_auto_renew_keeps_a_permit_and_on_lost_fires_when_it_is_removed(
    client: fencelock.Client, r: Redis, name: str
) -> None:
    lost: List[fencelock.Lease] = []
    permit = client.semaphore(name, 3).acquire(ttl=0.3, auto_renew=True, on_lost=lost.append)
    time.sleep(0.7)
    assert not permit.lost and permit.held()
    r.execute("ZREM", sem_keys(name)[0], permit.token)
    wait_until(lambda: bool(lost), timeout=3.0, what="on_lost")
    assert lost[0] is permit and permit.lost
    with pytest.raises(fencelock.LockLost):
        permit.release()


def test_redlock_permits(redlock_urls: List[str], name: str) -> None:
    with fencelock.Client(redlock_urls) as c:
        sem = c.semaphore(name, 2)
        a = sem.acquire(ttl=5.0)
        b = sem.acquire(ttl=5.0)
        assert sem.try_acquire(ttl=5.0) is None
        for url in redlock_urls:
            node = Redis(url)
            try:
                assert node.execute("ZCARD", sem_keys(name)[0]) == 2
            finally:
                node.close()
        a.release()
        b.release()
