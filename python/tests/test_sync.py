"""Lock semantics through the blocking `fencelock.Client`."""

from __future__ import annotations

import re
import threading
import time
from typing import List

import pytest

import fencelock
from conftest import Redis, lock_keys, subscribers, wait_until


def test_acquire_writes_token_and_fence_under_documented_keys(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=10.0)
    lock_key, fence_key, _ = lock_keys(name)
    assert r.get(lock_key) == lease.token.encode()
    assert int(r.get(fence_key) or 0) == lease.fence
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", lease.token)
    assert isinstance(lease.fence, int) and lease.fence >= 1
    assert lease.name == name and lease.ttl == 10.0
    assert 9.0 < lease.valid_for <= 10.0
    assert 9000 < r.execute("PTTL", lock_key) <= 10000
    assert lease.lost is False
    lease.release()
    assert r.execute("EXISTS", lock_key) == 0
    # The fence key outlives the lock (by the fence grace).
    assert int(r.get(fence_key) or 0) == lease.fence


def test_fences_strictly_increase_even_across_expiry(client: fencelock.Client, r: Redis, name: str) -> None:
    fences = []
    for _ in range(3):
        lease = client.acquire(name, ttl=5.0)
        fences.append(lease.fence)
        lease.release()
    short = client.acquire(name, ttl=0.02)
    fences.append(short.fence)
    # Wait for expiry by waiting for the lock itself (no sleep).
    after = client.acquire(name, ttl=5.0, wait=5.0)
    fences.append(after.fence)
    after.release()
    assert fences == sorted(set(fences)) and len(fences) == 5


def test_mutual_exclusion_8_threads(redis_url: str, name: str) -> None:
    client = fencelock.Client(redis_url)
    other = fencelock.Client(redis_url)  # two clients: local queue and Redis both exercised
    inside = 0
    overlaps = 0
    fences: List[int] = []
    guard = threading.Lock()
    errors: List[BaseException] = []

    def worker(i: int) -> None:
        nonlocal inside, overlaps
        c = client if i % 2 else other
        try:
            for _ in range(15):
                with c.lock(name, ttl=10.0, wait=30.0) as lease:
                    with guard:
                        inside += 1
                        if inside != 1:
                            overlaps += 1
                        fences.append(lease.fence)
                    time.sleep(0.0005)
                    with guard:
                        inside -= 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert overlaps == 0
    assert len(fences) == 8 * 15
    assert all(a < b for a, b in zip(fences, fences[1:])), "fences must strictly increase in lock order"
    client.close()
    other.close()


def test_expiry_then_lock_lost_without_disturbing_new_holder(redis_url: str, r: Redis, name: str) -> None:
    a = fencelock.Client(redis_url)
    b = fencelock.Client(redis_url)
    old = a.acquire(name, ttl=0.05)
    new = b.acquire(name, ttl=10.0, wait=5.0)  # returns once `old` expired
    assert new.fence > old.fence
    assert old.lost  # validity ran out
    with pytest.raises(fencelock.LockLost) as info:
        old.extend()
    assert old.token not in str(info.value)
    with pytest.raises(fencelock.LockLost):
        old.release()
    lock_key = lock_keys(name)[0]
    assert r.get(lock_key) == new.token.encode()
    assert r.execute("PTTL", lock_key) > 9000
    new.release()
    a.close()
    b.close()


def test_second_release_is_a_noop(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=10.0)
    lease.release()
    lease.release()
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0
    # and it did not release someone else's lock
    other = client.acquire(name, ttl=10.0)
    lease.release()
    assert r.get(lock_keys(name)[0]) == other.token.encode()
    other.release()


def test_extend(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=1.0)
    lease.extend(ttl=30.0)
    assert 29000 < r.execute("PTTL", lock_keys(name)[0]) <= 30000
    assert lease.valid_for > 29.0
    lease.extend()
    assert r.execute("PTTL", lock_keys(name)[0]) <= 1000
    lease.release()


def test_extend_after_release_is_lock_lost(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=5.0)
    lease.release()
    with pytest.raises(fencelock.LockLost):
        lease.extend()
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0


def test_wait_zero_try_acquire_and_bounded_wait(redis_url: str, name: str) -> None:
    holder_client = fencelock.Client(redis_url)
    client = fencelock.Client(redis_url)
    holder = holder_client.acquire(name, ttl=30.0)
    t0 = time.monotonic()
    with pytest.raises(fencelock.NotAcquired) as info:
        client.acquire(name, ttl=5.0, wait=0)
    assert time.monotonic() - t0 < 1.0
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, fencelock.LockError)
    assert name in str(info.value) and holder.token not in str(info.value)
    assert client.try_acquire(name, ttl=5.0) is None
    t0 = time.monotonic()
    with pytest.raises(fencelock.NotAcquired):
        client.acquire(name, ttl=5.0, wait=0.3)
    took = time.monotonic() - t0
    assert 0.3 <= took < 2.0, took
    holder.release()
    lease = client.try_acquire(name, ttl=5.0)
    assert lease is not None
    lease.release()
    holder_client.close()
    client.close()


def test_unbounded_wait_gets_the_lock_after_release(redis_url: str, r: Redis, name: str) -> None:
    a = fencelock.Client(redis_url)
    b = fencelock.Client(redis_url)
    holder = a.acquire(name, ttl=30.0)
    got: List[fencelock.Lease] = []
    t = threading.Thread(target=lambda: got.append(b.acquire(name, ttl=5.0)))
    t.start()
    wait_until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
    assert not got
    holder.release()
    t.join(10)
    assert got and got[0].fence > holder.fence
    got[0].release()
    a.close()
    b.close()


def _handoff_latencies(holder_client: fencelock.Client, waiter_client: fencelock.Client,
                       r: Redis, name: str, rounds: int) -> List[float]:
    latencies = []
    for _ in range(rounds):
        holder = holder_client.acquire(name, ttl=30.0)
        acquired_at: List[float] = []
        leases: List[fencelock.Lease] = []
        started = threading.Event()

        def wait() -> None:
            started.set()
            lease = waiter_client.acquire(name, ttl=30.0)
            acquired_at.append(time.perf_counter())
            leases.append(lease)

        t = threading.Thread(target=wait)
        t.start()
        started.wait()
        # The waiter tried once, failed, and now listens for the release.
        wait_until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
        released_at = time.perf_counter()
        holder.release()
        t.join(10)
        assert leases, "the waiter never got the lock"
        latencies.append(acquired_at[0] - released_at)
        leases[0].release()
        wait_until(lambda: subscribers(r, name) == 0, what="the waiter to unsubscribe")
    return latencies


def test_handoff_to_blocked_waiter_is_prompt_across_clients(redis_url: str, r: Redis, name: str) -> None:
    a = fencelock.Client(redis_url)
    b = fencelock.Client(redis_url)
    latencies = _handoff_latencies(a, b, r, name, rounds=5)
    # The holder's TTL is 30 s and the fallback retry is ~1 s: only the
    # release notification can explain a handoff within milliseconds.
    print("cross-client handoff latencies (ms):", [round(x * 1000, 2) for x in latencies])
    # Woken by the notification: the waiter's own retry comes ~1 s after its
    # first attempt, and 0.5 s leaves room for a stalled scheduler (the
    # latencies themselves are measured by make bench, not asserted).
    assert max(latencies) < 0.5, latencies
    a.close()
    b.close()


def test_auto_renew_keeps_the_lease_past_several_ttls(client: fencelock.Client, r: Redis, name: str) -> None:
    # A 1 s TTL (renewed every ttl/3) lets a renewal run ~0.65 s late under
    # load; 2.5 s is still several TTLs: without renewals the key would be gone.
    lease = client.acquire(name, ttl=1.0, auto_renew=True)
    lock_key = lock_keys(name)[0]
    deadline = time.monotonic() + 2.5  # 2.5 TTLs
    while time.monotonic() < deadline:
        assert r.get(lock_key) == lease.token.encode()
        assert not lease.lost
        assert client.try_acquire(name, ttl=1.0) is None
        time.sleep(0.05)
    lease.release()
    assert r.execute("EXISTS", lock_key) == 0


def test_loss_is_reported_when_key_deleted_from_outside(client: fencelock.Client, r: Redis, name: str) -> None:
    lost = threading.Event()
    seen: List[fencelock.Lease] = []

    def on_lost(lease: fencelock.Lease) -> None:
        seen.append(lease)
        lost.set()

    lease = client.acquire(name, ttl=0.3, auto_renew=True, on_lost=on_lost)
    r.execute("DEL", lock_keys(name)[0])
    assert lost.wait(3.0), "on_lost was not called"
    assert seen == [lease]
    assert lease.lost
    with pytest.raises(fencelock.LockLost):
        lease.extend()
    with pytest.raises(fencelock.LockLost):
        lease.release()


def test_on_lost_method_and_not_called_after_release(client: fencelock.Client, name: str) -> None:
    calls: List[fencelock.Lease] = []
    lease = client.acquire(name, ttl=0.2)
    lease.on_lost(calls.append)
    lease.release()
    # A released lease is not lost: its watcher is gone (validity would
    # otherwise have run out after 0.2 s).
    time.sleep(0.4)
    assert calls == [] and not lease.lost
    with pytest.raises(TypeError):
        lease.on_lost(42)  # type: ignore[arg-type]

    expiring = client.acquire(name, ttl=0.05)
    lost = threading.Event()
    expiring.on_lost(lambda _lease: lost.set())
    assert lost.wait(3.0), "validity ran out but on_lost was not called"


def test_context_manager_releases_and_reports_loss_only_if_body_ok(client: fencelock.Client, r: Redis, name: str) -> None:
    lock_key = lock_keys(name)[0]
    with client.lock(name, ttl=10.0) as lease:
        assert r.get(lock_key) == lease.token.encode()
    assert r.execute("EXISTS", lock_key) == 0

    with pytest.raises(fencelock.LockLost):
        with client.lock(name, ttl=10.0):
            r.execute("DEL", lock_key)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with client.lock(name, ttl=10.0):
            r.execute("DEL", lock_key)
            raise Boom()

    with pytest.raises(Boom):
        with client.lock(name, ttl=10.0):
            raise Boom()
    assert r.execute("EXISTS", lock_key) == 0


def test_client_context_manager_and_closed_client(redis_url: str, name: str) -> None:
    with fencelock.Client(redis_url) as c:
        c.acquire(name, ttl=1.0).release()
    with pytest.raises(fencelock.RedisError):
        c.acquire(name, ttl=1.0)
    never_used = fencelock.Client(redis_url)
    never_used.close()
    with pytest.raises(fencelock.RedisError):
        never_used.acquire(name, ttl=1.0)


def test_a_closed_client_raises_client_closed_a_redis_error(redis_url: str, r: Redis, name: str) -> None:
    c = fencelock.Client(redis_url)
    lease = c.acquire(name, ttl=30.0)
    c.close()
    with pytest.raises(fencelock.ClientClosed, match=r'^cannot acquire lock "[^"]+": the client is closed$') as raised:
        c.acquire(name, ttl=1.0)
    assert isinstance(raised.value, fencelock.RedisError) and isinstance(raised.value, fencelock.LockError)
    assert raised.value.name == name
    with pytest.raises(fencelock.ClientClosed):
        c.try_acquire(name, ttl=1.0)
    # The lease outlives its client: extend and release are refused the same
    # way, naming the call; the key is left to expire by its TTL.
    with pytest.raises(fencelock.ClientClosed, match="^cannot extend lock"):
        lease.extend()
    with pytest.raises(fencelock.RedisError, match="^cannot release lock") as caught:
        lease.release()
    assert type(caught.value) is fencelock.ClientClosed and caught.value.name == name
    assert r.execute("PTTL", lock_keys(name)[0]) > 0
    never_used = fencelock.Client(redis_url)
    never_used.close()
    with pytest.raises(fencelock.ClientClosed, match="^cannot acquire lock"):
        never_used.acquire(name.encode(), ttl=1.0)


def test_blocking_acquire_releases_the_gil(redis_url: str, r: Redis, name: str) -> None:
    a = fencelock.Client(redis_url)
    b = fencelock.Client(redis_url)
    holder = a.acquire(name, ttl=30.0)
    t = threading.Thread(target=lambda: b.acquire(name, ttl=5.0, wait=2.0).release())
    t.start()
    wait_until(lambda: subscribers(r, name) > 0, what="the waiter to block")
    # This thread runs Python while the other one is blocked in acquire.
    count = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.2:
        count += 1
    assert count > 10_000
    holder.release()
    t.join(10)
    a.close()
    b.close()


def test_repr_hides_the_token_and_password(redis_url: str, client: fencelock.Client, name: str) -> None:
    lease = client.acquire(name, ttl=5.0)
    text = repr(lease)
    assert lease.token not in text
    assert name in text and f"fence={lease.fence}" in text
    lease.release()
    secret = fencelock.Client("redis://user:hunter2-secret@127.0.0.1:1/0")
    assert "hunter2" not in repr(secret)


def test_names_braces_unicode_bytes_and_1024_bytes(client: fencelock.Client, r: Redis, name: str) -> None:
    names: List["str | bytes | bytearray"] = [
        name + "{braces}",
        name + "}{",
        name + "%7B{",
        name + ":ünïcødé:锁",
        name.encode() + b"\x00\xff\xfe raw",
        bytearray(name.encode() + b":ba"),
        name + "x" * (1024 - len(name)),
        (name + "é" * 1024).encode()[:1024],
    ]
    for n in names:
        assert len(n.encode() if isinstance(n, str) else n) <= 1024
        lease = client.acquire(n, ttl=5.0)
        expected = bytes(n) if isinstance(n, bytearray) else n
        assert lease.name == expected and type(lease.name) is type(expected)
        lock_key = lock_keys(n)[0]
        assert r.get(lock_key) == lease.token.encode(), n
        assert client.try_acquire(n, ttl=5.0) is None
        lease.release()
        assert r.execute("EXISTS", lock_key) == 0
    # Brace names: every key of one lock in one cluster slot.
    for n in [name + "{a}", "{", "}", "a{b}c{d}"]:
        keys = lock_keys(n)
        assert len({_hash_tag(k) for k in keys}) == 1


def _hash_tag(key: bytes) -> bytes:
    """What Redis Cluster hashes (CLUSTER KEYSLOT needs cluster mode)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1:end]
    return key


def test_script_flush_mid_run(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=10.0)
    r.execute("SCRIPT", "FLUSH")
    lease.extend()
    lease.release()
    r.execute("SCRIPT", "FLUSH")
    again = client.acquire(name, ttl=10.0)
    assert again.fence > lease.fence
    r.execute("SCRIPT", "FLUSH")
    again.release()
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0


def test_wrong_type_keys(client: fencelock.Client, r: Redis, name: str) -> None:
    lock_key, fence_key, _ = lock_keys(name)
    r.execute("LPUSH", lock_key, "not-a-lock")
    with pytest.raises(fencelock.RedisError) as info:
        client.acquire(name, ttl=5.0, wait=0)
    assert name in str(info.value)
    assert r.execute("TYPE", lock_key) == "list"
    assert r.execute("LRANGE", lock_key, 0, -1) == [b"not-a-lock"]
    r.execute("DEL", lock_key)

    r.execute("SET", fence_key, "not-a-number")
    with pytest.raises(fencelock.RedisError):
        client.acquire(name, ttl=5.0, wait=0)
    assert r.execute("EXISTS", lock_key) == 0, "a failed fence must not leave the lock held"
    assert r.get(fence_key) == b"not-a-number"
    r.execute("DEL", fence_key)
    client.acquire(name, ttl=5.0).release()


def test_on_lost_callback_may_call_back_into_fencelock(client: fencelock.Client, r: Redis, name: str) -> None:
    done = threading.Event()
    results: List[object] = []

    def on_lost(lease: fencelock.Lease) -> None:
        try:
            lease.release()
        except fencelock.LockLost:
            results.append("LockLost")
        again = client.acquire(name, ttl=5.0, wait=2.0)
        results.append(again.fence > lease.fence)
        again.release()
        done.set()

    lease = client.acquire(name, ttl=0.3, auto_renew=True, on_lost=on_lost)
    r.execute("DEL", lock_keys(name)[0])
    assert done.wait(5), results
    assert results == ["LockLost", True]


def test_on_lost_callback_errors_go_to_unraisablehook(client: fencelock.Client, r: Redis, name: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    seen = threading.Event()
    caught: List[BaseException] = []

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        if unraisable.exc_value is not None:
            caught.append(unraisable.exc_value)
        seen.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)

    def broken(_lease: fencelock.Lease) -> None:
        raise RuntimeError("callback bug")

    lease = client.acquire(name, ttl=0.05, on_lost=broken)  # validity runs out
    assert seen.wait(5)
    assert lease.lost
    assert isinstance(caught[0], RuntimeError)


def test_waiter_of_another_client_does_not_starve(redis_url: str, name: str) -> None:
    """Client A's threads take the lock back to back; a waiter on client B
    must still get it (release notifications wake it, and A's own waiters
    queue locally behind one remote attempt)."""
    a = fencelock.Client(redis_url)
    b = fencelock.Client(redis_url)
    stop = threading.Event()
    rounds = [0]

    def hammer() -> None:
        while not stop.is_set():
            with a.lock(name, ttl=5.0, wait=10.0):
                rounds[0] += 1
                time.sleep(0.001)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: rounds[0] > 20, what="client A to get going")
        for _ in range(3):
            t0 = time.monotonic()
            lease = b.acquire(name, ttl=5.0, wait=5.0)
            took = time.monotonic() - t0
            lease.release()
            assert took < 5.0
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    a.close()
    b.close()
