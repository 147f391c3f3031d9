"""What production Redis does to a lock, through the Python API: restarts
without persistence, Redlock nodes lost and found, rolling restarts, names
used once, tiny TTLs, the `lost` flag and why an acquire failed. Private
redis-servers that the tests kill and start again (empty)."""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Callable, List

import pytest

import fencelock
from conftest import Redis, Server, lock_keys, wait_until


def unique(what: str) -> str:
    return f"py-restart:{what}:{uuid.uuid4().hex[:12]}"


def restart(server: Server) -> None:
    """Kill (no goodbye) and start again on the same port, empty."""
    server.kill()
    server.start()


def scan_count(url: str, pattern: bytes) -> int:
    r = Redis(url)
    try:
        cursor, n = b"0", 0
        while True:
            cursor, batch = r.execute("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            n += len(batch)
            if cursor == b"0":
                return n
    finally:
        r.close()


def script_calls(r: Redis) -> int:
    """EVAL + EVALSHA calls since the last CONFIG RESETSTAT."""
    info: bytes = r.execute("INFO", "commandstats")
    calls = 0
    for line in info.decode().splitlines():
        if line.startswith(("cmdstat_eval:", "cmdstat_evalsha:")):
            calls += int(line.split("calls=")[1].split(",")[0])
    return calls


def test_fence_after_a_restart_without_persistence_is_above_every_earlier_fence(
    redis_server: Callable[..., Server],
) -> None:
    server = redis_server()
    name = unique("fence")
    with fencelock.Client(server.url) as client:
        before = []
        for _ in range(50):
            lease = client.acquire(name, ttl=10.0, wait=0)
            before.append(lease.fence)
            lease.release()
    assert before == sorted(set(before))
    restart(server)
    r = Redis(server.url)
    assert r.get(lock_keys(name)[1]) is None, "the counter is gone"
    r.close()
    with fencelock.Client(server.url) as client:
        lease = client.acquire(name, ttl=10.0, wait=0)
        assert lease.fence > max(before)
        lease.release()


def test_twenty_thousand_names_used_once_leave_no_key_once_the_grace_has_passed(
    redis_server: Callable[..., Server],
) -> None:
    server = redis_server()
    run = unique("once")
    with fencelock.Client(server.url, fence_grace=0.3) as client:
        for i in range(20_000):
            lease = client.acquire(f"{run}:{i}", ttl=1.0, wait=0)
            # A machine stalled past the 1 s ttl makes this LockLost (the key
            # expired first): keys must leave Redis either way.
            with contextlib.suppress(fencelock.LockLost):
                lease.release()
    pattern = f"fencelock:{{{run}:*".encode()
    deadline = time.monotonic() + 30
    while (left := scan_count(server.url, pattern)) > 0:
        assert time.monotonic() < deadline, f"{left} keys left after 30 s"
        time.sleep(0.1)
    r = Redis(server.url)
    assert r.execute("DBSIZE") == 0
    r.close()


def test_redlock_3_of_5_with_2_restarted_empty_and_2_down_acquires_within_the_wait(
    redis_server: Callable[..., Server],
) -> None:
    servers = [redis_server() for _ in range(5)]
    name = unique("redlock")
    with fencelock.Client([s.url for s in servers], connect_timeout=0.5, response_timeout=0.5) as client:
        first = client.acquire(name, ttl=10.0, wait=5.0)
        first.release()
        restart(servers[0])
        restart(servers[1])
        servers[2].kill()
        servers[3].kill()
        # For the wait=0 check below: a second client, connected while a
        # quorum is up (nothing left in flight: a release answers on all 3).
        probe = fencelock.Client([s.url for s in servers], connect_timeout=0.5, response_timeout=0.5)
        probe.acquire(f"{name}:probe", ttl=10.0, wait=5.0).release()
        t = time.monotonic()
        lease = client.acquire(name, ttl=10.0, wait=5.0)
        assert time.monotonic() - t < 5.0
        assert lease.fence > first.fence
        lease.release()

        servers[4].kill()
        t = time.monotonic()
        with pytest.raises(fencelock.NotAcquired) as info:
            client.acquire(name, ttl=10.0, wait=0.4)
        assert time.monotonic() - t >= 0.4, "retried until the wait ran out"
        assert info.value.reason == "unreachable"
        assert "3 of 5 nodes unreachable" in str(info.value)
        assert info.value.name == name

    # The first client is closed: its background releases are over. wait=0
    # fails at once: one round (an acquire on each reachable node, then its
    # compensating release), no retry, no backoff.
    r = Redis(servers[0].url)
    r.execute("CONFIG", "RESETSTAT")
    try:
        t = time.monotonic()
        with pytest.raises(fencelock.NotAcquired) as info:
            probe.acquire(name, ttl=10.0, wait=0)
        took = time.monotonic() - t
        assert info.value.reason == "unreachable"
        assert "3 of 5 nodes unreachable" in str(info.value)
        # Refused connections answer in milliseconds: far below the 0.5 s
        # connect/response timeouts and the retry backoff's 1 s cap.
        assert took < 0.5, f"{took:.3f} s"
    finally:
        probe.close()  # awaits the compensating release
    assert script_calls(r) == 2, "one round on node 0: acquire + compensating release, no retry"
    r.close()


def test_a_rolling_restart_of_all_3_nodes_keeps_an_auto_renewed_lease(
    redis_server: Callable[..., Server],
) -> None:
    servers = [redis_server() for _ in range(3)]
    name = unique("rolling")
    lock_key = lock_keys(name)[0]
    with fencelock.Client([s.url for s in servers], connect_timeout=0.5, response_timeout=0.5) as client:
        # TTL and outage scaled together (were 0.3 s and 1 s): a 1 s TTL lets a
        # renewal run ~0.65 s late under load; the 2 s outage is still two TTLs,
        # so the restarted node comes back empty and only a renewal refills it.
        lease = client.acquire(name, ttl=1.0, wait=0, auto_renew=True)
        for n, server in enumerate(servers):
            server.kill()
            time.sleep(2.0)  # the outage itself: longer than the TTL
            assert not lease.lost, f"lost while node {n} was down"
            server.start()
            r = Redis(server.url)
            try:
                wait_until(lambda: r.get(lock_key) == lease.token.encode(), 5.0,
                           "a renewal put the key back on the restarted node")
            finally:
                r.close()
        assert not lease.lost and lease.valid_for > 0
        lease.release()


@pytest.mark.parametrize("nodes", [1, 3])
def test_a_tiny_ttl_is_a_value_error_in_every_topology_and_writes_nothing(
    redis_server: Callable[..., Server], nodes: int,
) -> None:
    servers = [redis_server() for _ in range(nodes)]
    urls: List[str] = [s.url for s in servers]
    with fencelock.Client(urls if nodes > 1 else urls[0]) as client:
        for ttl in (0.001, 0.002, 0.0015):
            with pytest.raises(ValueError, match="drift"):
                client.acquire(unique("tiny"), ttl=ttl, wait=0)
            with pytest.raises(ValueError):
                client.try_acquire(unique("tiny"), ttl=ttl)
    for url in urls:
        r = Redis(url)
        assert r.execute("DBSIZE") == 0
        r.close()


def test_lost_is_true_once_release_or_extend_raised_lock_lost(client: fencelock.Client, r: Redis) -> None:
    for op in ("release", "extend"):
        name = unique("lost")
        lease = client.acquire(name, ttl=0.05, wait=0)
        wait_until(lambda: r.execute("PTTL", lock_keys(name)[0]) == -2, 5.0, "the lock key expired")
        with pytest.raises(fencelock.LockLost) as info:
            getattr(lease, op)()
        assert lease.lost, op
        assert info.value.name == name


def test_not_acquired_reason_held_and_the_name_attribute(redis_url: str) -> None:
    name = unique("held")
    with fencelock.Client(redis_url) as holder, fencelock.Client(redis_url) as other:
        lease = holder.acquire(name, ttl=10.0)
        for wait in (0, 0.1):
            with pytest.raises(fencelock.NotAcquired) as info:
                other.acquire(name, ttl=10.0, wait=wait)
            assert info.value.reason == "held"
            assert info.value.name == name
            assert lease.token not in str(info.value)
        lease.release()
    raw = b"py-restart:\xff" + uuid.uuid4().hex.encode()
    with fencelock.Client(redis_url) as holder, fencelock.Client(redis_url) as other:
        lease = holder.acquire(raw, ttl=10.0)
        with pytest.raises(fencelock.NotAcquired) as info:
            other.acquire(raw, ttl=10.0, wait=0)
        assert info.value.name == raw  # not UTF-8: bytes
        lease.release()
