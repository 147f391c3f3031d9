"""The public Python API, checked by `mypy --strict` in test_docs.py.
Type-checked only: never executed."""

from __future__ import annotations

from typing import List, Optional, Union

import fencelock


def sync_api() -> None:
    client = fencelock.Client("redis://127.0.0.1:6379/0")
    redlock = fencelock.Client(["redis://a:6379", "redis://b:6379", "redis://c:6379"])
    lease: fencelock.Lease = client.acquire("invoice:42", ttl=10.0, wait=5.0)
    maybe: Optional[fencelock.Lease] = client.try_acquire("invoice:42", ttl=10.0)
    with client.lock("invoice:42", ttl=10.0, wait=5.0, auto_renew=False) as held:
        name: Union[str, bytes] = held.name
        token: str = held.token
        fence: int = held.fence
        valid_for: float = held.valid_for
        lost: bool = held.lost
        held.extend()
        held.extend(ttl=30.0)
        print(name, token, fence, valid_for, lost)
    lease.on_lost(lambda lost_lease: print(lost_lease.fence))
    lease.stop_renewing()
    lease.release()
    renewed = client.acquire("invoice:42", ttl=10.0, auto_renew=True, max_hold=60.0)
    renewed.stop_renewing()

    @client.synchronized("invoice:42", ttl=10.0, wait=5.0, max_hold=None)
    def settle(amount: int) -> int:
        return amount

    total: int = settle(42)
    print(total)
    if maybe is not None:
        maybe.release()
    pool: fencelock.Semaphore = client.semaphore("pool", permits=3)
    permits: int = pool.permits
    with pool.lock(ttl=10.0, wait=5.0, on_lost=lambda p: print(p.fence)) as permit:
        print(permit.fence, permits)
    spare: Optional[fencelock.Lease] = pool.try_acquire(ttl=10.0)
    info: fencelock.LockInfo = pool.inspect()
    print(spare, info.held_by_me)
    rw: fencelock.RwLock = client.rw_lock("doc")
    with rw.read(ttl=10.0) as reader, rw.write(ttl=10.0, wait=1.0) as writer:
        print(reader.fence, writer.fence)
    side: fencelock.RwSide = rw.writer
    side.acquire(ttl=1.0, auto_renew=True).release()
    client.close()
    with redlock as c:
        c.acquire(b"raw-bytes", ttl=1, wait=None).release()
    try:
        client.acquire("x", ttl=1.0, wait=0)
    except fencelock.NotAcquired as e:
        timeout: TimeoutError = e
        base: fencelock.LockError = e
        print(timeout, base)
    except fencelock.ClientClosed as e:
        redis_error: fencelock.RedisError = e
        print(redis_error.name)
    except (fencelock.LockLost, fencelock.RedisError):
        pass


async def async_api() -> None:
    aclient = fencelock.AsyncClient("redis://127.0.0.1:6379/0")
    lease: fencelock.AsyncLease = await aclient.acquire("invoice:42", ttl=10.0, wait=5.0)
    maybe: Optional[fencelock.AsyncLease] = await aclient.try_acquire("invoice:42", ttl=10.0)
    async with aclient.lock("invoice:42", ttl=10.0) as held:
        fences: List[int] = [held.fence]
        print(fences, held.valid_for)
    await lease.extend()
    await lease.extend(ttl=30.0)
    lease.stop_renewing()
    await lease.release()

    @aclient.synchronized("invoice:42", ttl=10.0, auto_renew=True, max_hold=60.0)
    async def nightly(day: str) -> str:
        return day

    done: str = await nightly("mon")
    print(done)
    if maybe is not None:
        await maybe.release()
    apool: fencelock.AsyncSemaphore = aclient.semaphore("pool", permits=3)
    async with apool.lock(ttl=10.0) as permit:
        print(permit.fence, (await apool.inspect()).held)
    arw: fencelock.AsyncRwLock = aclient.rw_lock("doc")
    async with arw.read(ttl=10.0) as reader:
        print(reader.fence)
    got: Optional[fencelock.AsyncLease] = await arw.writer.try_acquire(ttl=1.0)
    print(got)
    async with fencelock.AsyncClient(["redis://a", "redis://b", "redis://c"]) as redlock:
        await (await redlock.acquire("x", ttl=1.0, on_lost=lambda l: print(l.lost))).release()
    await aclient.close()
