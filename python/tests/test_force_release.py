"""Client.force_release / AsyncClient.force_release: an operator removes a
lock whoever holds it and advances its fence."""

from __future__ import annotations

import logging
import threading
from typing import List

import pytest

import fencelock
from conftest import Redis, lock_keys, run, subscribers, wait_until


def test_force_release_fences_off_the_holder_and_wakes_a_waiter(
    client: fencelock.Client, redis_url: str, r: Redis, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    with fencelock.Client(redis_url) as holder, fencelock.Client(redis_url) as other:
        zombie = holder.acquire(name, ttl=30.0)
        got: List[fencelock.Lease] = []
        waiter = threading.Thread(target=lambda: got.append(other.acquire(name, ttl=30.0, wait=20.0)))
        waiter.start()
        wait_until(lambda: subscribers(r, name) == 1, timeout=20.0, what="the waiter subscribed")

        with caplog.at_level(logging.WARNING, logger="fencelock"):
            fence = client.force_release(name)
            client.close()  # flushes the log queue into the handlers
        assert isinstance(fence, int) and fence > zombie.fence
        waiter.join(10.0)  # woken by the release notification, not its 30 s TTL
        assert not waiter.is_alive() and got[0].fence > fence
        with pytest.raises(fencelock.LockLost):
            zombie.extend()
        with pytest.raises(fencelock.LockLost):
            zombie.release()
        got[0].release()

    audit = [rec.getMessage() for rec in caplog.records if "force-released" in rec.getMessage()]
    assert len(audit) == 1 and "was_held=true" in audit[0], audit
    assert zombie.token not in audit[0]


def test_force_release_of_a_free_lock_still_advances_the_fence(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=5.0)
    lease.release()
    fence = client.force_release(name)
    assert fence > lease.fence
    lock, fence_key, _ = lock_keys(name)
    assert r.execute("EXISTS", lock) == 0
    assert r.execute("GET", fence_key) == str(fence).encode()


def test_force_release_bad_names_and_closed_clients(redis_url: str, r: Redis, name: str) -> None:
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    c = fencelock.Client(redis_url)
    with pytest.raises(ValueError):
        c.force_release("")
    with pytest.raises(TypeError):
        c.force_release(42)  # type: ignore[arg-type]
    c.close()
    with pytest.raises(fencelock.ClientClosed) as caught:
        c.force_release(name)
    assert caught.value.name == name
    assert set(r.keys(b"*")) - before == set()


def test_async_force_release(aclient: fencelock.AsyncClient, redis_url: str, name: str) -> None:
    async def body() -> None:
        with fencelock.Client(redis_url) as holder:
            zombie = holder.acquire(name, ttl=30.0)
            fence = await aclient.force_release(name)
            assert fence > zombie.fence
            assert not (await aclient.inspect(name)).held
            with pytest.raises(fencelock.LockLost):
                zombie.release()

    run(body())


def test_force_release_redlock(redlock_urls: List[str], name: str) -> None:
    with fencelock.Client(redlock_urls) as c, fencelock.Client(redlock_urls) as holder:
        zombie = holder.acquire(name, ttl=30.0)
        fence = c.force_release(name)
        assert fence > zombie.fence
        lock = lock_keys(name)[0]
        for url in redlock_urls:
            conn = Redis(url)
            assert conn.execute("EXISTS", lock) == 0
            conn.close()
        nxt = c.try_acquire(name, ttl=5.0)
        assert nxt is not None and nxt.fence > fence
        nxt.release()
