"""Client.inspect / AsyncClient.inspect and Lease.held: read-only views."""

from __future__ import annotations

import time
from typing import List

import pytest

import fencelock
from conftest import Redis, lock_keys, run


def test_inspect_free_held_mine_released_expired(client: fencelock.Client, redis_url: str, name: str) -> None:
    free = client.inspect(name)
    assert isinstance(free, fencelock.LockInfo)
    assert (free.held, free.ttl, free.fence, free.held_by_me) == (False, None, None, False)

    with fencelock.Client(redis_url) as other:
        lease = other.acquire(name, ttl=10.0)
        info = client.inspect(name)
        assert info.held and not info.held_by_me
        assert info.ttl is not None and 8.0 < info.ttl <= 10.0
        assert info.fence == lease.fence
        assert other.inspect(name).held_by_me
        assert lease.held() is True
        assert lease.token not in repr(info)
        assert "token" not in repr(info)
        lease.release()
        assert lease.held() is False

    after = client.inspect(name)
    assert not after.held and after.ttl is None and not after.held_by_me
    assert after.fence == lease.fence  # the fence key outlives the lock

    mine = client.acquire(name.encode(), ttl=0.3)
    info = client.inspect(name)
    assert info.held and info.held_by_me
    assert info.fence == mine.fence
    time.sleep(0.45)
    assert not client.inspect(name).held
    assert mine.held() is False


def test_inspect_bad_names_write_nothing(client: fencelock.Client, r: Redis) -> None:
    with pytest.raises(ValueError):
        client.inspect("")
    with pytest.raises(TypeError):
        client.inspect(42)  # type: ignore[arg-type]


def test_inspect_closed_client_names_the_lock(redis_url: str, name: str) -> None:
    c = fencelock.Client(redis_url)
    lease = c.acquire(name, ttl=5.0)
    c.close()
    with pytest.raises(fencelock.ClientClosed) as caught:
        c.inspect(name)
    assert caught.value.name == name
    with pytest.raises(fencelock.ClientClosed):
        lease.held()


def test_async_inspect_and_held(aclient: fencelock.AsyncClient, redis_url: str, name: str) -> None:
    async def body() -> None:
        assert not (await aclient.inspect(name)).held
        lease = await aclient.acquire(name, ttl=10.0)
        info = await aclient.inspect(name)
        assert info.held and info.held_by_me and info.fence == lease.fence
        assert info.ttl is not None and 0 < info.ttl <= 10.0
        assert await lease.held() is True
        with fencelock.Client(redis_url) as other:
            seen = other.inspect(name)
            assert seen.held and not seen.held_by_me
        await lease.release()
        assert await lease.held() is False
        assert not (await aclient.inspect(name)).held

    run(body())


def test_inspect_redlock_majority(redlock_urls: List[str], name: str) -> None:
    with fencelock.Client(redlock_urls) as c:
        lease = c.acquire(name, ttl=10.0)
        lock = lock_keys(name)[0]
        for url in redlock_urls[:2]:
            conn = Redis(url)
            conn.execute("DEL", lock)
            conn.close()
        info = c.inspect(name)
        assert info.held and info.held_by_me and info.fence == lease.fence
        assert lease.held()
        conn = Redis(redlock_urls[2])
        conn.execute("DEL", lock)
        conn.close()
        info = c.inspect(name)
        assert not info.held and not info.held_by_me and info.ttl is None
        assert not lease.held()
