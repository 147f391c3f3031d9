"""Renewal controls: ``max_hold=``, ``lease.stop_renewing()`` and the
``synchronized`` decorators, against a real Redis. MONITOR (filtered by
the test's own lock key) shows which renewals reached it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Iterator, List

import pytest

import fencelock
from conftest import Redis, lock_keys, run, wait_until
from fltest import Monitor


@pytest.fixture
def monitor(redis_url: str) -> Iterator[Monitor]:
    m = Monitor(redis_url)
    yield m
    m.close()


def pexpires(monitor: Monitor, key: bytes) -> int:
    """How many times a script PEXPIREd ``key`` (what renewals and extends do)."""
    monitor.sync()
    with monitor.cond:
        return sum(1 for client, args in monitor.seen
                   if client == "lua" and len(args) >= 2 and args[0].upper() == b"PEXPIRE" and args[1] == key)


def test_max_hold_stops_renewal_and_the_lease_is_lost(client: fencelock.Client, r: Redis, name: str,
                                                       monitor: Monitor) -> None:
    lost = threading.Event()
    key = lock_keys(name)[0]
    started = time.monotonic()
    lease = client.acquire(name, ttl=1.0, auto_renew=True, max_hold=2.0, on_lost=lambda _: lost.set())
    assert lost.wait(15), "on_lost was not called"
    elapsed = time.monotonic() - started
    # Renewed past its first ttl, then left to run out: about max_hold + ttl.
    assert 2.0 <= elapsed <= 2.0 + 1.0 + 3.0, elapsed
    assert lease.lost
    assert lease.valid_for == 0
    wait_until(lambda: r.execute("EXISTS", key) == 0, 3, "the key expired in Redis")
    renewals = pexpires(monitor, key)
    assert 1 <= renewals <= 6, renewals  # every ttl/3 until max_hold, never more often
    # Nothing renews it after the loss either.
    with pytest.raises(fencelock.LockLost):
        lease.release()
    assert pexpires(monitor, key) == renewals


def test_async_max_hold_stops_renewal(aclient: fencelock.AsyncClient, r: Redis, name: str,
                                      monitor: Monitor) -> None:
    key = lock_keys(name)[0]

    async def main() -> float:
        lost = asyncio.Event()
        started = time.monotonic()
        lease = await aclient.acquire(name, ttl=1.0, auto_renew=True, max_hold=1.5,
                                      on_lost=lambda _: lost.set())
        await asyncio.wait_for(lost.wait(), 15)
        elapsed = time.monotonic() - started
        assert lease.lost
        with pytest.raises(fencelock.LockLost):
            await lease.release()
        return elapsed

    elapsed = run(main())
    assert 1.5 <= elapsed <= 1.5 + 1.0 + 3.0, elapsed
    wait_until(lambda: r.execute("EXISTS", key) == 0, 3, "the key expired in Redis")
    assert 1 <= pexpires(monitor, key) <= 5


def test_stop_renewing_lets_the_lease_run_out(client: fencelock.Client, r: Redis, name: str,
                                              monitor: Monitor) -> None:
    lost = threading.Event()
    key = lock_keys(name)[0]
    started = time.monotonic()
    lease = client.acquire(name, ttl=1.0, auto_renew=True, on_lost=lambda _: lost.set())
    # The first renewal is ttl/3 away: stopped long before it. Idempotent.
    lease.stop_renewing()
    lease.stop_renewing()
    assert not lease.lost
    assert lease.valid_for > 0
    assert lost.wait(15), "on_lost was not called"
    assert time.monotonic() - started <= 1.0 + 3.0
    assert lease.lost
    wait_until(lambda: r.execute("EXISTS", key) == 0, 3, "the key expired in Redis")
    assert pexpires(monitor, key) == 0, "renewed after stop_renewing"
    lease.stop_renewing()  # still a no-op once lost
    with pytest.raises(fencelock.LockLost):
        lease.release()


def test_an_explicit_extend_after_stop_renewing_extends_once(client: fencelock.Client, r: Redis, name: str,
                                                             monitor: Monitor) -> None:
    lost = threading.Event()
    key = lock_keys(name)[0]
    lease = client.acquire(name, ttl=1.0, auto_renew=True, on_lost=lambda _: lost.set())
    lease.stop_renewing()
    extended = time.monotonic()
    lease.extend(2.0)
    assert lease.valid_for > 1.0
    assert lost.wait(15), "on_lost was not called"
    assert 1.0 <= time.monotonic() - extended <= 2.0 + 3.0
    wait_until(lambda: r.execute("EXISTS", key) == 0, 3, "the key expired in Redis")
    assert pexpires(monitor, key) == 1, "only the caller's extend"


def test_async_stop_renewing_is_a_plain_method(aclient: fencelock.AsyncClient, r: Redis, name: str,
                                               monitor: Monitor) -> None:
    key = lock_keys(name)[0]

    async def main() -> None:
        lost = asyncio.Event()
        lease = await aclient.acquire(name, ttl=1.0, auto_renew=True, on_lost=lambda _: lost.set())
        lease.stop_renewing()  # a plain call: nothing to await
        lease.stop_renewing()
        await asyncio.wait_for(lost.wait(), 15)
        assert lease.lost

    run(main())
    wait_until(lambda: r.execute("EXISTS", key) == 0, 3, "the key expired in Redis")
    assert pexpires(monitor, key) == 0


def test_renewal_controls_change_nothing_without_auto_renew(client: fencelock.Client, r: Redis,
                                                            name: str) -> None:
    lease = client.acquire(name, ttl=5.0, max_hold=0.001)
    lease.stop_renewing()
    lease.extend()
    assert not lease.lost
    assert lease.valid_for > 4.0
    lease.release()
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0


def test_synchronized_holds_the_lock_during_the_call_and_releases_it(client: fencelock.Client, r: Redis,
                                                                     name: str) -> None:
    key = lock_keys(name)[0]
    calls: List[int] = []

    @client.synchronized(name, ttl=10.0, wait=5.0)
    def work(x: int, *, y: int = 0) -> int:
        """Adds."""
        assert r.get(key) is not None, "held during the call"
        calls.append(x)
        return x + y

    assert work.__name__ == "work" and work.__doc__ == "Adds."
    assert work(1, y=2) == 3
    assert r.execute("EXISTS", key) == 0, "released on return"
    assert work(5) == 5
    assert calls == [1, 5]

    @client.synchronized(name, ttl=10.0, auto_renew=True)
    def fail() -> None:
        assert r.get(key) is not None
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fail()
    assert r.execute("EXISTS", key) == 0, "released on exception"


def test_synchronized_refuses_the_wrong_kind_of_function(client: fencelock.Client,
                                                         aclient: fencelock.AsyncClient, name: str) -> None:
    async def coro() -> None:
        pass

    def plain() -> None:
        pass

    with pytest.raises(TypeError):
        client.synchronized(name, ttl=1.0)(coro)
    with pytest.raises(TypeError):
        aclient.synchronized(name, ttl=1.0)(plain)  # type: ignore[type-var]


def test_async_synchronized_releases_on_return_and_exception(aclient: fencelock.AsyncClient, r: Redis,
                                                             name: str) -> None:
    key = lock_keys(name)[0]

    @aclient.synchronized(name, ttl=10.0, wait=5.0, auto_renew=True, max_hold=60.0)
    async def work(x: int) -> int:
        """Doubles."""
        assert r.get(key) is not None, "held during the call"
        await asyncio.sleep(0)
        return 2 * x

    @aclient.synchronized(name, ttl=10.0)
    async def fail() -> None:
        assert r.get(key) is not None
        raise KeyError("boom")

    async def main() -> None:
        assert work.__name__ == "work" and work.__doc__ == "Doubles."
        assert await work(21) == 42
        assert r.execute("EXISTS", key) == 0, "released on return"
        with pytest.raises(KeyError):
            await fail()
        assert r.execute("EXISTS", key) == 0, "released on exception"
        # Concurrent calls take turns.
        assert list(await asyncio.gather(work(1), work(2))) == [2, 4]

    run(main())
    assert r.execute("EXISTS", key) == 0


def test_synchronized_with_bad_arguments_raises_at_the_call(client: fencelock.Client, r: Redis,
                                                            name: str) -> None:
    @client.synchronized(name, ttl=1.0, auto_renew=True, max_hold=-1.0)
    def work() -> None:  # pragma: no cover
        raise AssertionError("not called")

    with pytest.raises(ValueError):
        work()
    assert r.keys(b"fencelock:*" + name.encode() + b"*") == []
