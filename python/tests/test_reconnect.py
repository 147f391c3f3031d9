"""A Redis restart is invisible to the next call: a command that provably
never reached the server is sent on a fresh connection, retried with a short
backoff within the call's bounds (the wait for acquire)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Optional

import pytest

import fencelock
from conftest import Redis, Server, lock_keys


def _until_known_down(client: fencelock.Client, name: str) -> None:
    # A call written before the client hears of the crash (broken pipe, EOF)
    # has an unknown outcome and fails at once, never resent; a try-once call
    # fails either way and leaves the connection known dead, so the next call
    # waits for the server instead.
    with pytest.raises(fencelock.RedisError):
        client.acquire(name + "-probe", ttl=5, wait=0)


async def _until_known_down_async(client: fencelock.AsyncClient, name: str) -> None:
    with pytest.raises(fencelock.RedisError):  # see _until_known_down
        await client.acquire(name + "-probe", ttl=5, wait=0)


def test_the_first_call_after_a_restart_succeeds(redis_server: Callable[..., Server], name: str) -> None:
    server = redis_server()
    with fencelock.Client(server.url) as client:
        client.acquire(name, ttl=5, wait=0).release()
        waits: tuple[Optional[float], ...] = (0, 2.0, None)
        for wait in waits:
            server.kill()
            server.start()
            t = time.monotonic()
            lease = client.acquire(name, ttl=5, wait=wait)
            assert time.monotonic() - t < 0.5
            assert Redis(server.url).get(lock_keys(name)[0]) == lease.token.encode()
            lease.release()


def test_the_first_async_call_after_a_restart_succeeds(
    redis_server: Callable[..., Server], name: str
) -> None:
    server = redis_server()

    async def main() -> None:
        client = fencelock.AsyncClient(server.url)
        await (await client.acquire(name, ttl=5, wait=0)).release()
        server.kill()
        server.start()
        t = time.monotonic()
        lease = await client.acquire(name, ttl=5, wait=2.0)
        assert time.monotonic() - t < 0.5
        await lease.release()
        await client.close()

    asyncio.run(main())


def _restart_after(server: Server, seconds: float) -> threading.Thread:
    def later() -> None:
        time.sleep(seconds)  # the outage the test is about
        server.start()

    thread = threading.Thread(target=later)
    thread.start()
    return thread


def test_a_blocking_acquire_succeeds_once_the_server_is_back(
    redis_server: Callable[..., Server], name: str
) -> None:
    server = redis_server()
    with fencelock.Client(server.url) as client:
        client.acquire(name, ttl=5, wait=0).release()
        server.kill()
        _until_known_down(client, name)
        thread = _restart_after(server, 1.0)
        t = time.monotonic()
        lease = client.acquire(name, ttl=5, wait=10)
        thread.join()
        assert 0.9 < time.monotonic() - t < 3.0
        assert Redis(server.url).get(lock_keys(name)[0]) == lease.token.encode()
        lease.release()


def test_a_blocking_async_acquire_succeeds_once_the_server_is_back(
    redis_server: Callable[..., Server], name: str
) -> None:
    server = redis_server()

    async def main() -> None:
        client = fencelock.AsyncClient(server.url)
        await (await client.acquire(name, ttl=5, wait=0)).release()
        server.kill()
        await _until_known_down_async(client, name)
        thread = _restart_after(server, 1.0)
        lease = await client.acquire(name, ttl=5, wait=10)
        thread.join()
        await lease.release()
        await client.close()

    asyncio.run(main())


def test_a_down_server_is_a_redis_error_at_the_end_of_the_wait(
    redis_server: Callable[..., Server], name: str
) -> None:
    server = redis_server()
    with fencelock.Client(server.url) as client:
        client.acquire(name, ttl=5, wait=0).release()
        server.kill()
        _until_known_down(client, name)
        t = time.monotonic()
        try:
            client.acquire(name, ttl=5, wait=0.5)
        except fencelock.RedisError as e:
            assert "refused" in str(e)
        else:
            raise AssertionError("acquire on a down server succeeded")
        assert 0.2 < time.monotonic() - t < 1.5
