"""Lock semantics through `fencelock.AsyncClient` (asyncio)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Callable, List

import pytest

import fencelock
from conftest import Redis, lock_keys, run, subscribers


async def until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.001)


def test_a_closed_async_client_raises_client_closed_a_redis_error(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        lease = await aclient.acquire(name, ttl=30.0)
        other = fencelock.AsyncClient(redis_url)
        holder = await other.acquire(name + ":held", ttl=30.0)
        waiting = asyncio.ensure_future(aclient.acquire(name + ":held", ttl=1.0))
        await until(lambda: subscribers(r, name + ":held") > 0, what="the waiter to subscribe")
        await aclient.close()
        # An acquire the close cut short, and one after it.
        with pytest.raises(fencelock.ClientClosed, match="^cannot acquire lock"):
            await waiting
        with pytest.raises(fencelock.RedisError, match=r'^cannot acquire lock "[^"]+": the client is closed$') as raised:
            await aclient.acquire(name, ttl=1.0)
        assert type(raised.value) is fencelock.ClientClosed and raised.value.name == name
        with pytest.raises(fencelock.ClientClosed, match="^cannot extend lock"):
            await lease.extend()
        with pytest.raises(fencelock.ClientClosed, match="^cannot release lock"):
            await lease.release()
        assert r.execute("PTTL", lock_keys(name)[0]) > 0
        await holder.release()
        await other.close()

    run(main())


def test_acquire_extend_release(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        lease = await aclient.acquire(name, ttl=10.0, wait=5.0)
        lock_key, fence_key, _ = lock_keys(name)
        assert r.get(lock_key) == lease.token.encode()
        assert int(r.get(fence_key) or 0) == lease.fence
        assert lease.name == name and 9.0 < lease.valid_for <= 10.0 and not lease.lost
        await lease.extend(ttl=30.0)
        assert r.execute("PTTL", lock_key) > 29000
        await lease.extend()
        assert r.execute("PTTL", lock_key) <= 10000
        assert await aclient.try_acquire(name, ttl=1.0) is None
        await lease.release()
        await lease.release()  # no-op
        assert r.execute("EXISTS", lock_key) == 0
        assert lease.token not in repr(lease)
        await aclient.close()

    run(main())


def test_mutual_exclusion_32_tasks(redis_url: str, name: str) -> None:
    async def main() -> None:
        clients = [fencelock.AsyncClient(redis_url) for _ in range(2)]
        inside = 0
        overlaps = 0
        fences: List[int] = []

        async def worker(i: int) -> None:
            nonlocal inside, overlaps
            for _ in range(5):
                async with clients[i % 2].lock(name, ttl=10.0, wait=60.0) as lease:
                    inside += 1
                    if inside != 1:
                        overlaps += 1
                    fences.append(lease.fence)
                    await asyncio.sleep(0)
                    inside -= 1

        await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(32))), 90)
        assert overlaps == 0
        assert len(fences) == 32 * 5
        assert all(a < b for a, b in zip(fences, fences[1:]))
        for c in clients:
            await c.close()

    run(main())


def test_expiry_lock_lost_and_new_holder_untouched(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        old = await a.acquire(name, ttl=0.05)
        new = await b.acquire(name, ttl=10.0, wait=5.0)
        assert new.fence > old.fence and old.lost
        with pytest.raises(fencelock.LockLost):
            await old.extend()
        with pytest.raises(fencelock.LockLost):
            await old.release()
        assert r.get(lock_keys(name)[0]) == new.token.encode()
        await new.release()
        await a.close()
        await b.close()

    run(main())


def test_waits(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        holder = await a.acquire(name, ttl=30.0)
        t0 = time.monotonic()
        with pytest.raises(fencelock.NotAcquired):
            await b.acquire(name, ttl=1.0, wait=0)
        assert time.monotonic() - t0 < 1.0
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await b.acquire(name, ttl=1.0, wait=0.3)
        assert 0.3 <= time.monotonic() - t0 < 2.0
        waiter = asyncio.ensure_future(b.acquire(name, ttl=5.0))  # unbounded
        await until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
        assert not waiter.done()
        await holder.release()
        lease = await asyncio.wait_for(waiter, 10)
        assert lease.fence > holder.fence
        await lease.release()
        await a.close()
        await b.close()

    run(main())


def test_handoff_latency(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> List[float]:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        latencies = []
        for _ in range(5):
            holder = await a.acquire(name, ttl=30.0)
            got_at: List[float] = []

            async def wait() -> fencelock.AsyncLease:
                lease = await b.acquire(name, ttl=30.0)
                got_at.append(time.perf_counter())
                return lease

            waiter = asyncio.ensure_future(wait())
            await until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
            released_at = time.perf_counter()
            await holder.release()
            lease = await asyncio.wait_for(waiter, 10)
            latencies.append(got_at[0] - released_at)
            await lease.release()
            await until(lambda: subscribers(r, name) == 0, what="unsubscribe")
        await a.close()
        await b.close()
        return latencies

    latencies = run(main())
    print("async handoff latencies (ms):", [round(x * 1000, 2) for x in latencies])
    # Woken by the notification: the waiter's own retry comes ~1 s after its
    # first attempt, and 0.5 s leaves room for a stalled scheduler (the
    # latencies themselves are measured by make bench, not asserted).
    assert max(latencies) < 0.5, latencies


def test_auto_renew_and_loss_from_outside(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        lost = asyncio.Event()
        seen: List[fencelock.AsyncLease] = []

        def on_lost(lease: fencelock.AsyncLease) -> None:
            # Called in the event loop thread: asyncio objects are safe here.
            seen.append(lease)
            lost.set()

        # A 1 s TTL lets a renewal run ~0.65 s late under load; 2.5 s is still
        # several TTLs: without renewals the key would be long gone.
        lease = await aclient.acquire(name, ttl=1.0, auto_renew=True, on_lost=on_lost)
        lock_key = lock_keys(name)[0]
        deadline = time.monotonic() + 2.5  # 2.5 TTLs
        while time.monotonic() < deadline:
            assert r.get(lock_key) == lease.token.encode() and not lease.lost
            await asyncio.sleep(0.05)
        r.execute("DEL", lock_key)
        await asyncio.wait_for(lost.wait(), 3)
        assert seen == [lease] and lease.lost
        with pytest.raises(fencelock.LockLost):
            await lease.release()
        await aclient.close()

    run(main())


def test_async_context_manager(redis_url: str, r: Redis, name: str) -> None:
    class Boom(Exception):
        pass

    async def main() -> None:
        async with fencelock.AsyncClient(redis_url) as aclient:
            lock_key = lock_keys(name)[0]
            async with aclient.lock(name, ttl=10.0) as lease:
                assert r.get(lock_key) == lease.token.encode()
            assert r.execute("EXISTS", lock_key) == 0
            with pytest.raises(fencelock.LockLost):
                async with aclient.lock(name, ttl=10.0):
                    r.execute("DEL", lock_key)
            with pytest.raises(Boom):
                async with aclient.lock(name, ttl=10.0):
                    r.execute("DEL", lock_key)
                    raise Boom()
            with pytest.raises(Boom):
                async with aclient.lock(name, ttl=10.0):
                    raise Boom()
            assert r.execute("EXISTS", lock_key) == 0
        with pytest.raises(fencelock.RedisError):
            await aclient.acquire(name, ttl=1.0)

    run(main())


def test_cancelled_waiter_leaves_nothing_held(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        holder = await a.acquire(name, ttl=30.0)
        waiter = asyncio.ensure_future(b.acquire(name, ttl=30.0))
        await until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await until(lambda: subscribers(r, name) == 0, what="the cancelled waiter to unsubscribe")
        await holder.release()
        # Nobody may take the lock now: give a zombie waiter the chance to.
        await asyncio.sleep(0.3)
        assert r.execute("EXISTS", lock_keys(name)[0]) == 0
        lease = await a.try_acquire(name, ttl=1.0)
        assert lease is not None
        await lease.release()
        await a.close()
        await b.close()

    run(main())


@pytest.mark.parametrize("busy", [False, True], ids=["alone", "behind-a-waiter"])
def test_cancellation_at_any_moment_leaves_no_lock(
    redis_url: str, r: Redis, name: str, busy: bool
) -> None:
    """Cancel acquires of a free lock after a random number of loop turns:
    some before the request left, some while it was in flight, some after
    Redis granted it. None may leave the key behind. Behind a waiter (a call
    of the same loop in flight) each acquire is queued until the loop's turn
    ends, so some are cancelled before they ever started."""
    rng = random.Random(1234)

    async def main() -> int:
        aclient = fencelock.AsyncClient(redis_url)
        await (await aclient.acquire(name, ttl=1.0)).release()  # connect first
        if busy:
            holder = fencelock.AsyncClient(redis_url)
            held = await holder.acquire(name + ":held", ttl=30.0)
            waiter = asyncio.ensure_future(aclient.acquire(name + ":held", ttl=30.0))
            await until(lambda: subscribers(r, name + ":held") > 0, what="the waiter to subscribe")
        completed = 0
        for _ in range(60):
            task = asyncio.ensure_future(aclient.acquire(name, ttl=30.0))
            for _ in range(rng.randrange(0, 12)):
                await asyncio.sleep(0)
            if rng.random() < 0.3:
                await asyncio.sleep(rng.random() / 1000)
            task.cancel()
            try:
                lease = await task
            except asyncio.CancelledError:
                pass
            else:
                completed += 1
                await lease.release()
            # A compensating release may still be on its way: wait for it.
            await until(lambda: r.execute("EXISTS", lock_keys(name)[0]) == 0, 5, "the lock to be free")
        # The client is not stuck: the next acquire gets the lock at once.
        lease = await aclient.acquire(name, ttl=1.0, wait=2.0)
        await lease.release()
        if busy:
            assert not waiter.done()
            await held.release()
            await (await waiter).release()
            await holder.close()
        await aclient.close()
        return completed

    completed = run(main())
    print("acquires that completed before the cancel:", completed)


def test_task_cancelled_inside_async_with_releases(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        entered = asyncio.Event()

        async def body() -> None:
            async with aclient.lock(name, ttl=30.0):
                entered.set()
                await asyncio.sleep(3600)

        task = asyncio.ensure_future(body())
        await entered.wait()
        assert r.execute("EXISTS", lock_keys(name)[0]) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.execute("EXISTS", lock_keys(name)[0]) == 0
        await aclient.close()

    run(main())


def test_script_flush_and_wrong_type(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        lease = await aclient.acquire(name, ttl=10.0)
        r.execute("SCRIPT", "FLUSH")
        await lease.extend()
        await lease.release()
        lock_key, fence_key, _ = lock_keys(name)
        r.execute("SADD", lock_key, "x")
        with pytest.raises(fencelock.RedisError):
            await aclient.acquire(name, ttl=1.0, wait=0)
        assert r.execute("TYPE", lock_key) == "set"
        r.execute("DEL", lock_key)
        r.execute("DEL", fence_key)
        r.execute("HSET", fence_key, "a", "b")
        with pytest.raises(fencelock.RedisError):
            await aclient.acquire(name, ttl=1.0, wait=0)
        assert r.execute("EXISTS", lock_key) == 0
        r.execute("DEL", fence_key)
        await aclient.close()

    run(main())


def test_names(redis_url: str, r: Redis, name: str) -> None:
    async def main() -> None:
        aclient = fencelock.AsyncClient(redis_url)
        names: List["str | bytes"] = [name + "{x}", name + ":ü锁", name.encode() + b"\xff\x00",
                                      name + "y" * (1024 - len(name))]
        for n in names:
            lease = await aclient.acquire(n, ttl=5.0)
            assert lease.name == n
            assert r.get(lock_keys(n)[0]) == lease.token.encode()
            await lease.release()
        await aclient.close()

    run(main())


def test_loops_one_after_another_and_side_by_side(redis_url: str, name: str) -> None:
    """Results reach each loop through its own completion queue: loops in
    turn on one thread and at once on several threads all get theirs, and
    finished loops leave no file descriptors behind."""
    import os
    import threading

    async def main(tag: str) -> None:
        aclient = fencelock.AsyncClient(redis_url)
        for _ in range(20):
            lease = await aclient.acquire(f"{name}:{tag}", ttl=5.0)
            await lease.release()
        with pytest.raises(fencelock.NotAcquired):
            held = await aclient.acquire(f"{name}:{tag}", ttl=5.0)
            try:
                await aclient.acquire(f"{name}:{tag}", ttl=5.0, wait=0)
            finally:
                await held.release()
        await aclient.close()

    asyncio.run(main("warm-up"))
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for i in range(10):
        asyncio.run(main("in-turn"))
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds
    errors: List[BaseException] = []

    def thread(i: int) -> None:
        try:
            asyncio.run(main(f"thread-{i}"))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_a_loop_without_add_reader_still_works(redis_url: str, r: Redis, name: str) -> None:
    """Event loops that do not implement `add_reader` get their results
    through `call_soon_threadsafe` instead; cancelling still drops the acquire."""

    class NoReaderLoop(asyncio.SelectorEventLoop):
        def add_reader(self, *args: object) -> None:
            raise NotImplementedError

    async def main() -> None:
        a = fencelock.AsyncClient(redis_url)
        b = fencelock.AsyncClient(redis_url)
        holder = await a.acquire(name, ttl=30.0)
        assert await holder.held()
        waiter = asyncio.ensure_future(b.acquire(name, ttl=30.0))
        await until(lambda: subscribers(r, name) > 0, what="the waiter to subscribe")
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await until(lambda: subscribers(r, name) == 0, what="the cancelled waiter to unsubscribe")
        await holder.release()
        lease = await b.try_acquire(name, ttl=1.0)  # free, and b is not stuck
        assert lease is not None
        await lease.release()
        assert r.execute("EXISTS", lock_keys(name)[0]) == 0
        await a.close()
        await b.close()

    loop = NoReaderLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
