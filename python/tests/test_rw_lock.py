"""client.rw_lock(name): readers share, a writer excludes everyone, a waiting
writer holds new readers off (sync and asyncio)."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

import fencelock
from conftest import Redis, lock_keys, run, wait_until


def rw_keys(name: str) -> "tuple[bytes, bytes, bytes, bytes]":
    """readers, writer, writers' line, fence (README "Key layout")."""
    base = lock_keys(name)[0] + b":rw"
    return base + b":readers", base + b":writer", base + b":waiting", base + b":fence"


def test_readers_share_and_a_waiting_writer_holds_new_readers_off(
    client: fencelock.Client, redis_url: str, r: Redis, name: str
) -> None:
    rw = client.rw_lock(name)
    assert rw.name == name and "RwLock" in repr(rw) and "read lock" in repr(rw.reader)
    readers, writer_key, waiting, fence_key = rw_keys(name)
    with rw.read(ttl=10.0) as r1, rw.read(ttl=10.0, wait=0) as r2:
        assert r2.fence > r1.fence
        assert r.execute("ZCARD", readers) == 2
        assert rw.writer.try_acquire(ttl=10.0) is None
        got: List[fencelock.Lease] = []
        with fencelock.Client(redis_url) as other:
            t = threading.Thread(target=lambda: got.append(other.rw_lock(name).writer.acquire(ttl=10.0, wait=30.0)))
            t.start()
            wait_until(lambda: r.execute("ZCARD", waiting) == 1, what="the writer in line")
            assert rw.reader.try_acquire(ttl=10.0) is None, "writer preference"
            r1.release()
            r2.release()
            t.join(10.0)
            assert got and got[0].fence > r2.fence
            assert r.execute("ZRANGE", writer_key, 0, -1) == [got[0].token.encode()]
            assert rw.reader.try_acquire(ttl=10.0) is None
            got[0].release()
    with rw.write(ttl=5.0, wait=1.0) as w:
        assert w.held() and r.execute("GET", fence_key) == str(w.fence).encode()
    assert r.execute("EXISTS", readers, writer_key, waiting) == 0


def test_a_writer_that_times_out_lets_readers_in_and_bad_inputs_write_nothing(
    client: fencelock.Client, r: Redis, name: str
) -> None:
    rw = client.rw_lock(name)
    readers, writer_key, waiting, _ = rw_keys(name)
    reader = rw.reader.acquire(ttl=10.0)
    with pytest.raises(fencelock.NotAcquired) as info:
        rw.writer.acquire(ttl=10.0, wait=0.1)
    assert info.value.reason == "held"
    # Its way out of the line is sent before NotAcquired is raised, not
    # necessarily answered.
    wait_until(lambda: r.execute("EXISTS", writer_key, waiting) == 0, what="the writer left the line")
    again = rw.reader.try_acquire(ttl=10.0)
    assert again is not None
    reader.release()
    again.release()
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    with pytest.raises(ValueError):
        client.rw_lock("").writer.acquire(ttl=1.0)
    with pytest.raises(ValueError):
        rw.write(ttl=0).__enter__()
    with pytest.raises(TypeError):
        client.rw_lock(3.5).reader.acquire(ttl=1.0)  # type: ignore[arg-type]
    assert set(r.keys(b"*")) - before == set()


def test_asyncio_read_and_write(aclient: fencelock.AsyncClient, r: Redis, name: str) -> None:
    readers, writer_key, waiting, _ = rw_keys(name)

    async def main() -> None:
        rw = aclient.rw_lock(name)
        async with rw.read(ttl=10.0) as r1:
            task = asyncio.ensure_future(rw.writer.acquire(ttl=10.0))
            while r.execute("ZCARD", waiting) != 1:
                await asyncio.sleep(0.005)
            assert await rw.reader.try_acquire(ttl=1.0) is None
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            while r.execute("ZCARD", waiting) != 0:
                await asyncio.sleep(0.005)
            r2 = await rw.reader.try_acquire(ttl=1.0)
            assert r2 is not None and r2.fence > r1.fence
            await r2.release()
        async with rw.write(ttl=5.0) as w:
            assert await w.held()
        assert r.execute("EXISTS", readers, writer_key, waiting) == 0

    run(main())
