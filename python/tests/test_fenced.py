"""Lease.fenced_set / fenced_hset (and the AsyncLease forms): the protected
Redis key refuses a stale holder, against a real Redis."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterator, List

import pytest

import fencelock
from conftest import Redis, run


@pytest.fixture
def key() -> str:
    return f"py-test-data:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def stuck(redis_url: str) -> Iterator[fencelock.Client]:
    """The stale holder's own client: a later acquire of the same name in the
    same client would find out its lease is gone (it waits in line behind it)."""
    c = fencelock.Client(redis_url)
    yield c
    c.close()


def test_a_stale_holder_is_refused(
    client: fencelock.Client, stuck: fencelock.Client, r: Redis, name: str, key: str
) -> None:
    zombie = stuck.acquire(name, ttl=30.0)
    zombie.fenced_set(key, "first")
    zombie.fenced_set(key, b"second")  # equal fences pass: the same holder again
    assert r.execute("HGET", key, "value") == b"second"
    assert r.execute("HGET", key, "fence") == str(zombie.fence).encode()

    client.force_release(name)  # the zombie hung; an operator took the lock back
    nxt = client.acquire(name, ttl=30.0)
    nxt.fenced_hset(key, "note", "taken over")

    with pytest.raises(fencelock.StaleFence) as info:
        zombie.fenced_set(key, "late")
    err = info.value
    assert isinstance(err, fencelock.LockLost)
    assert (err.name, err.resource, err.fence, err.accepted) == (name, key, zombie.fence, nxt.fence)
    assert zombie.token not in str(err) and key in str(err)
    with pytest.raises(fencelock.StaleFence):
        zombie.fenced_hset(key, "note", "late")
    assert r.execute("HGET", key, "value") == b"second"
    assert r.execute("HGET", key, "note") == b"taken over"
    nxt.release()


def test_bad_calls_write_nothing(client: fencelock.Client, r: Redis, name: str, key: str) -> None:
    lease = client.acquire(name, ttl=30.0)
    invalid: List[Callable[[], None]] = [
        lambda: lease.fenced_set("", "v"),
        lambda: lease.fenced_hset(key, "", "v"),
        lambda: lease.fenced_hset(key, "fence", "v"),
    ]
    for call in invalid:
        with pytest.raises(ValueError):
            call()
    bad: List[Any] = [42, None, 1.5, ["k"]]
    for value in bad:
        with pytest.raises(TypeError):
            lease.fenced_set(value, "v")
        with pytest.raises(TypeError):
            lease.fenced_set(key, value)
        with pytest.raises(TypeError):
            lease.fenced_hset(key, value, "v")
    assert r.execute("EXISTS", key) == 0

    r.execute("SET", key, "plain")  # not a hash: WRONGTYPE, untouched
    with pytest.raises(fencelock.RedisError, match="WRONGTYPE"):
        lease.fenced_set(key, "v")
    assert r.execute("GET", key) == b"plain"

    lease.release()
    fresh = key + ":fresh"
    with pytest.raises(fencelock.LockLost) as lost:
        lease.fenced_set(fresh, "v")
    assert type(lost.value) is fencelock.LockLost
    assert r.execute("EXISTS", fresh) == 0


def test_closed_client_and_redlock(redis_url: str, redlock_urls: List[str], r: Redis, name: str, key: str) -> None:
    c = fencelock.Client(redis_url)
    lease = c.acquire(name, ttl=30.0)
    c.close()
    with pytest.raises(fencelock.ClientClosed) as info:
        lease.fenced_set(key, "v")
    assert info.value.name == name
    assert r.execute("EXISTS", key) == 0

    with fencelock.Client(redlock_urls) as redlock:
        lease = redlock.acquire(name, ttl=30.0)
        with pytest.raises(ValueError, match="Redlock"):
            lease.fenced_set(key, "v")
        lease.release()
    for url in redlock_urls:
        node = Redis(url)
        assert node.execute("EXISTS", key) == 0
        node.close()


def test_asyncio(aclient: fencelock.AsyncClient, redis_url: str, r: Redis, name: str, key: str) -> None:
    async def main() -> None:
        stuck = fencelock.AsyncClient(redis_url)
        zombie = await stuck.acquire(name, ttl=30.0)
        await zombie.fenced_set(key, "first")
        await aclient.force_release(name)
        nxt = await aclient.acquire(name, ttl=30.0)
        await nxt.fenced_hset(key, b"value", b"second")
        with pytest.raises(fencelock.StaleFence) as info:
            await zombie.fenced_set(key, "late")
        assert info.value.accepted == nxt.fence
        with pytest.raises(ValueError):
            await nxt.fenced_hset(key, "fence", "v")
        with pytest.raises(TypeError):
            nxt.fenced_set(key, 1)  # type: ignore[arg-type]
        await nxt.release()
        await stuck.close()

    run(main())
    assert r.execute("HGET", key, "value") == b"second"
