"""Honest timeouts: an acquire whose reply does not come reports within the
response timeout, not twice it (its compensating release goes on in the
background), and close() waits for that release. A private server stalled
by DEBUG SLEEP (the same scenario as bindings/driver/tests/timeouts.rs).

Timing: with response_timeout T the fix reports after T, the bug after 2T
(the release waited out its own timeout first); the server sleeps S > 2T so
that it answers neither in time. T = 2 s, S = 6 s: the bound 3 s leaves a
second of scheduling delay either way, enough on a loaded 2-core machine.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from typing import Iterator, Tuple

import pytest

import fencelock
from conftest import Redis, Server, lock_keys, wait_until

TIMEOUT = 2.0
SLEEP = 6


def stall(server: Server, secs: int) -> Redis:
    """DEBUG SLEEP on a connection of its own; returns once a PING on
    another connection goes unanswered (the server is asleep)."""
    sleeper = Redis(server.url)
    sleeper.send("DEBUG", "SLEEP", secs)
    deadline = time.monotonic() + 5
    while True:
        ping = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        try:
            ping.settimeout(0.1)
            ping.sendall(b"PING\r\n")
            ping.recv(16)
        except socket.timeout:
            return sleeper
        finally:
            ping.close()
        assert time.monotonic() < deadline, "the server never stalled"


@pytest.fixture
def debug_server() -> Iterator[Server]:
    """A private server of this test's (it is put to sleep) that accepts
    DEBUG (Redis 7 refuses it unless enabled)."""
    server = Server("--enable-debug-command", "yes")
    yield server
    server.stop()


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_timed_out_acquire_reports_within_the_response_timeout_and_close_waits_for_its_release(
        debug_server: Server, flavour: str) -> None:
    server = debug_server
    name = f"py-timeout:{uuid.uuid4().hex[:12]}"
    warm = f"{name}:warm-up"

    async def scenario() -> Tuple[float, BaseException, float]:
        client = fencelock.AsyncClient(server.url, response_timeout=TIMEOUT)
        await (await client.acquire(warm, ttl=5, wait=0)).release()  # connected, scripts loaded
        sleeper = stall(server, SLEEP)
        t = time.monotonic()
        try:
            await client.acquire(name, ttl=30, wait=0)
            raise AssertionError("acquired from a sleeping server")
        except fencelock.RedisError as e:
            error: BaseException = e
        reported = time.monotonic() - t
        await client.close()
        closed = time.monotonic() - t
        sleeper.close()
        return reported, error, closed

    if flavour == "sync":
        client = fencelock.Client(server.url, response_timeout=TIMEOUT)
        client.acquire(warm, ttl=5, wait=0).release()  # connected, scripts loaded
        sleeper = stall(server, SLEEP)
        t = time.monotonic()
        with pytest.raises(fencelock.RedisError) as info:
            client.acquire(name, ttl=30, wait=0)
        reported = time.monotonic() - t
        client.close()
        closed = time.monotonic() - t
        sleeper.close()
        error: BaseException = info.value
    else:
        reported, error, closed = asyncio.run(scenario())

    assert isinstance(error, fencelock.RedisError)
    assert reported >= TIMEOUT - 0.1, f"reported after {reported:.3f} s"
    # Not doubled by the compensating release's own timeout (2T = 4 s).
    assert reported < 1.5 * TIMEOUT, f"reported after {reported:.3f} s"
    # close() waited for the compensating release (timed out at about 2T;
    # without the wait close() returns right after the report).
    assert closed >= 2 * TIMEOUT - 0.1, f"closed after {closed:.3f} s"
    # Once awake, the server runs the acquire and then its release: the
    # lock is not left held (its TTL is 30 s).
    r = Redis(server.url)
    try:
        wait_until(lambda: r.execute("EXISTS", lock_keys(name)[0]) == 0, SLEEP + 10,
                   "the compensating release ran")
    finally:
        r.close()
