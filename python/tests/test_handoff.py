"""The one-round-trip handoff: a release while a waiter of the same client is
in line hands it the lock inside the release script (MONITOR: one EVALSHA of
the handoff script, no acquire of the waiter's), with a greater fence; a
waiter cancelled while that is in flight leaves nothing held; Redlock; and a
waiter of another client still gets its turn. Sync and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, Iterator, List, Optional

import pytest

import fencelock
from conftest import Redis, lock_keys, run, wait_until
from fltest import Monitor, script_calls, start_in_line, vectors

SCRIPTS: Dict[str, str] = vectors("commands.json")["scripts"]


def scripts_on(monitor: Monitor, name: str) -> List[Dict[str, Any]]:
    monitor.sync()
    lock = lock_keys(name)[0]
    return [c for c in script_calls(monitor.seen, SCRIPTS) if c["keys"][0] == lock]


def blocked_clients(r: Redis) -> int:
    """Clients whose command waits at the server (here: under CLIENT PAUSE)."""
    info = r.execute("INFO", "clients").decode()
    return int(next(line for line in info.splitlines() if line.startswith("blocked_clients:")).split(":")[1])


@pytest.fixture
def monitor(redis_url: str) -> Iterator[Monitor]:
    m = Monitor(redis_url)
    yield m
    m.close()


def test_a_release_hands_the_lock_to_a_waiting_thread_in_one_round_trip(
    client: fencelock.Client, r: Redis, monitor: Monitor, name: str
) -> None:
    holder = client.acquire(name, ttl=60)
    got: List[fencelock.Lease] = []
    waiter = threading.Thread(target=lambda: got.append(client.acquire(name, ttl=5, wait=30)))
    start_in_line(name, waiter.start)
    holder.release()
    waiter.join(30)
    (lease,) = got
    calls = scripts_on(monitor, name)
    assert [c["script"] for c in calls] == ["acquire", "handoff"]
    handoff = calls[1]["args"]
    assert handoff[:3] == [holder.token.encode(), lease.token.encode(), b"5000"]  # the waiter's ttl
    assert lease.fence > holder.fence
    lock, fence, _ = lock_keys(name)
    assert r.execute("GET", lock) == lease.token.encode()
    assert r.execute("GET", fence) == str(lease.fence).encode()
    assert 0 < lease.valid_for <= 5
    lease.release()
    assert r.execute("EXISTS", lock) == 0


def test_asyncio_waiters_are_handed_the_lock_in_turn(aclient: fencelock.AsyncClient, monitor: Monitor,
                                                     name: str) -> None:
    async def main() -> List[int]:
        holder = await aclient.acquire(name, ttl=60)
        fences: List[int] = [holder.fence]

        async def waiter() -> None:
            lease = await aclient.acquire(name, ttl=60)
            fences.append(lease.fence)
            await lease.release()

        # Tasks start in creation order, each lining up in its acquire call.
        tasks = [asyncio.create_task(waiter()) for _ in range(5)]
        await asyncio.sleep(0)
        await holder.release()
        await asyncio.gather(*tasks)
        return fences

    fences = run(main())
    assert fences == sorted(set(fences)), "strictly increasing"
    calls = [c["script"] for c in scripts_on(monitor, name)]
    # Each release hands over to the next; the last one has nobody to.
    assert calls == ["acquire"] + ["handoff"] * 5 + ["release"]


def test_an_asyncio_waiter_cancelled_while_the_handoff_is_in_flight_leaves_nothing_held(
    aclient: fencelock.AsyncClient, r: Redis, monitor: Monitor, name: str
) -> None:
    lock = lock_keys(name)[0]

    async def main() -> None:
        holder = await aclient.acquire(name, ttl=60)
        waiter = asyncio.create_task(aclient.acquire(name, ttl=60))
        await asyncio.sleep(0)  # the task runs: in line
        # Hold the server's writes: the release and its handoff wait there
        # while the waiter is cancelled.
        r.execute("CLIENT", "PAUSE", 10_000, "WRITE")
        try:
            release = asyncio.ensure_future(holder.release())
            deadline = time.monotonic() + 10
            while blocked_clients(r) == 0:
                assert time.monotonic() < deadline, "the release never reached the server"
                await asyncio.sleep(0.001)
            waiter.cancel()
        finally:
            # A shared server: never leave it paused for the next test.
            r.execute("CLIENT", "UNPAUSE")
        await release
        with pytest.raises(asyncio.CancelledError):
            await waiter

    run(main())
    wait_until(lambda: r.execute("EXISTS", lock) == 0, what="the waiter gave the lock back")
    calls = scripts_on(monitor, name)
    assert [c["script"] for c in calls] == ["acquire", "handoff", "release"]
    assert calls[2]["args"][0] == calls[1]["args"][1], "given back by the waiter"

    async def nothing_held() -> None:
        again = await aclient.try_acquire(name, ttl=60)
        assert again is not None
        await again.release()

    run(nothing_held())


def test_redlock_hands_the_lock_over_on_every_node(redlock_urls: List[str], name: str) -> None:
    monitors = [Monitor(u) for u in redlock_urls]
    try:
        with fencelock.Client(redlock_urls) as client:
            holder = client.acquire(name, ttl=60)
            got: List[fencelock.Lease] = []
            waiter = threading.Thread(target=lambda: got.append(client.acquire(name, ttl=60, wait=30)))
            start_in_line(name, waiter.start)
            holder.release()
            waiter.join(30)
            (lease,) = got
            assert lease.fence > holder.fence
            for m in monitors:
                calls = [c["script"] for c in scripts_on(m, name)]
                # A node a millisecond behind may be raised to the fence.
                assert calls[:2] == ["acquire", "handoff"] and "acquire" not in calls[2:], calls
            lease.release()
    finally:
        for m in monitors:
            m.close()
    for url in redlock_urls:
        check = Redis(url)
        assert check.execute("EXISTS", lock_keys(name)[0]) == 0
        check.close()


def test_a_waiter_of_another_client_still_gets_its_turn_from_asyncio_workers(redis_url: str, name: str) -> None:
    """Client A's tasks hand the lock round among themselves; client B's
    waiter listens, so A's releases free the lock for it (the handoff script
    hands over only while nobody else listens)."""

    async def main() -> None:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        stop = asyncio.Event()
        rounds = [0]

        async def hammer() -> None:
            while not stop.is_set():
                async with a.lock(name, ttl=10, wait=30):
                    rounds[0] += 1

        workers = [asyncio.create_task(hammer()) for _ in range(4)]
        while rounds[0] < 50:
            await asyncio.sleep(0.001)
        for _ in range(3):
            lease: Optional[fencelock.AsyncLease] = await b.acquire(name, ttl=10, wait=30)
            assert lease is not None
            await lease.release()
        stop.set()
        await asyncio.gather(*workers)
        await a.close()
        await b.close()

    run(main())
