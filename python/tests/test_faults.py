"""Servers that refuse, vanish or disagree: private redis-servers only."""

from __future__ import annotations

import time
from typing import Callable, List

import pytest

import fencelock
from conftest import Redis, Server, lock_keys, run


def test_wrong_password_sync_and_async(redis_server: Callable[..., Server], name: str) -> None:
    server = redis_server(password="s3cret-right")
    bad_url = f"redis://:s3cret-WRONG@127.0.0.1:{server.port}/0"
    no_url = f"redis://127.0.0.1:{server.port}/0"
    for url in (bad_url, no_url):
        c = fencelock.Client(url)
        t0 = time.monotonic()
        with pytest.raises(fencelock.RedisError) as info:
            c.acquire(name, ttl=1.0)
        assert time.monotonic() - t0 < 5
        assert "s3cret" not in str(info.value) and "s3cret" not in repr(c)

        async def main() -> None:
            ac = fencelock.AsyncClient(url)
            with pytest.raises(fencelock.RedisError) as ainfo:
                await ac.acquire(name, ttl=1.0)
            assert "s3cret" not in str(ainfo.value)

        run(main())
    good = fencelock.Client(server.url)
    lease = good.acquire(name, ttl=5.0)
    assert Redis(server.url).get(lock_keys(name)[0]) == lease.token.encode()
    lease.release()
    good.close()


def test_server_down_fails_within_seconds(redis_server: Callable[..., Server], name: str) -> None:
    server = redis_server()
    server.kill()  # a port where nothing listens
    c = fencelock.Client(server.url, connect_timeout=1.0)
    for kwargs in ({"wait": None}, {"wait": 0}, {}):
        t0 = time.monotonic()
        with pytest.raises(fencelock.RedisError) as info:
            c.acquire(name, ttl=1.0, **kwargs)
        assert time.monotonic() - t0 < 5, kwargs
        assert isinstance(info.value, fencelock.LockError)

    async def main() -> None:
        ac = fencelock.AsyncClient(server.url, connect_timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(fencelock.RedisError):
            await ac.acquire(name, ttl=1.0)
        assert time.monotonic() - t0 < 5

    run(main())


def test_server_killed_mid_run_then_restarted(redis_server: Callable[..., Server], name: str) -> None:
    server = redis_server()
    c = fencelock.Client(server.url, connect_timeout=1.0, response_timeout=1.0)
    lease = c.acquire(name, ttl=10.0)
    server.kill()
    t0 = time.monotonic()
    with pytest.raises(fencelock.RedisError):
        lease.extend()
    with pytest.raises(fencelock.LockError):  # RedisError, or LockLost once validity is judged gone
        lease.release()
    # An acquire keeps trying to reach the server until its wait is over.
    with pytest.raises(fencelock.RedisError):
        c.acquire(name + "2", ttl=1.0, wait=0.5)
    assert time.monotonic() - t0 < 10
    server.start()  # same port, empty data
    # The client reconnects by itself.
    deadline = time.monotonic() + 10
    while True:
        try:
            c.acquire(name, ttl=1.0, wait=0).release()
            break
        except fencelock.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    c.close()


def test_redlock_majority(redlock_urls: List[str], name: str) -> None:
    c = fencelock.Client(redlock_urls)
    assert "nodes=5" in repr(c)
    lease = c.acquire(name, ttl=10.0)
    holders = sum(Redis(u).get(lock_keys(name)[0]) == lease.token.encode() for u in redlock_urls)
    assert holders >= 3
    assert c.try_acquire(name, ttl=1.0) is None
    lease.release()
    assert all(Redis(u).execute("EXISTS", lock_keys(name)[0]) == 0 for u in redlock_urls)
    again = c.acquire(name, ttl=10.0)
    assert again.fence > lease.fence
    again.release()
    c.close()


def test_redlock_acquire_and_release_do_not_wait_for_a_stalled_node(
        redis_server: Callable[..., Server], name: str) -> None:
    """A node that stalls without refusing (writes paused: it takes commands
    and answers none) is left to the other two. With a response timeout
    longer than the TTL, a call that waited for it would end with no
    validity left (NotAcquired)."""
    servers = [redis_server() for _ in range(3)]
    urls = [s.url for s in servers]
    nodes = [Redis(u) for u in urls]
    key, fence_key, _ = lock_keys(name)
    # The two live nodes' counters agree and run ahead of the clocks, so they
    # issue the same fence: a majority that needs no write-back.
    ahead = 9_000_000_000_000_000
    for node in nodes[:2]:
        node.execute("SET", fence_key, str(ahead))
    c = fencelock.Client(urls, response_timeout=60.0)
    nodes[2].execute("CLIENT", "PAUSE", "60000", "WRITE")
    try:
        lease = c.acquire(name, ttl=10.0, wait=5.0)
        assert lease.fence == ahead + 1
        assert [n.get(key) for n in nodes] == [lease.token.encode()] * 2 + [None]
        lease.release()
        assert [n.execute("EXISTS", key) for n in nodes[:2]] == [0, 0]
    finally:
        nodes[2].execute("CLIENT", "UNPAUSE")
    # close waits for the stalled node's acquire, then its release.
    c.close()
    assert nodes[2].execute("EXISTS", key) == 0


def test_redlock_survives_a_minority_down_and_fails_without_majority(
        redis_server: Callable[..., Server], name: str) -> None:
    servers = [redis_server() for _ in range(5)]
    c = fencelock.Client([s.url for s in servers], connect_timeout=1.0, response_timeout=1.0)
    c.acquire(name, ttl=5.0).release()
    servers[0].kill()
    servers[1].kill()
    lease = c.acquire(name, ttl=5.0, wait=2.0)
    lease.release()
    servers[2].kill()
    with pytest.raises(fencelock.LockError):
        c.acquire(name, ttl=5.0, wait=1.0)
    c.close()
    alive = [Redis(s.url) for s in servers[3:]]
    assert all(a.execute("EXISTS", lock_keys(name)[0]) == 0 for a in alive)

    async def main() -> None:
        ac = fencelock.AsyncClient([s.url for s in servers[2:]], connect_timeout=1.0)
        lease = await ac.acquire(name, ttl=5.0)  # 2 of 3 up
        await lease.release()
        await ac.close()

    run(main())
