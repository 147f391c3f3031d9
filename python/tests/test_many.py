"""client.acquire_many(names): several mutexes, all or nothing (sync and
asyncio): each name an ordinary lease; a held name takes nothing and
leaves nothing; waiting, cancellation, loss; bad inputs write nothing;
Redlock refused; a Redis Cluster."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

import fencelock
from conftest import Redis, cluster_get, lock_keys, run, subscribers, wait_until


def names_of(name: str, n: int = 3) -> List[str]:
    return [f"{name}:{i}" for i in range(n)]


def held_by(r: Redis, name: "str | bytes") -> "bytes | None":
    return r.execute("GET", lock_keys(name)[0])  # type: ignore[no-any-return]


def test_every_name_is_an_ordinary_lease_released_together(
    client: fencelock.Client, r: Redis, name: str
) -> None:
    names = names_of(name)
    group = client.acquire_many(names, ttl=10.0)
    assert len(group) == 3 and not group.lost
    assert [lease.name for lease in group.leases] == names
    for lease in group.leases:
        assert held_by(r, lease.name) == lease.token.encode()
        assert r.execute("GET", lock_keys(lease.name)[1]) == str(lease.fence).encode()
        assert 9000 < r.execute("PTTL", lock_keys(lease.name)[0]) <= 10000
    assert "LockGroup" in repr(group) and group.leases[0].token not in repr(group)
    group.leases[1].extend(20.0)
    assert r.execute("PTTL", lock_keys(names[1])[0]) > 19000
    group.release()
    group.release()  # a second release is a no-op
    assert all(held_by(r, n) is None for n in names)
    with client.lock_many(names, ttl=5.0) as again:
        assert again.leases[0].fence > group.leases[0].fence
        assert held_by(r, names[2]) == again.leases[2].token.encode()
    assert all(held_by(r, n) is None for n in names)


def test_one_held_name_takes_nothing_and_leaves_nothing(
    client: fencelock.Client, redis_url: str, r: Redis, name: str
) -> None:
    names = names_of(name)
    other = fencelock.Client(redis_url)
    try:
        holder = other.acquire(names[1], ttl=10.0)
        assert client.try_acquire_many(names, ttl=10.0) is None
        with pytest.raises(fencelock.NotAcquired) as raised:
            client.acquire_many(names, ttl=10.0, wait=0.1)
        assert raised.value.name == names[1]
        assert held_by(r, names[0]) is None and held_by(r, names[2]) is None
        assert held_by(r, names[1]) == holder.token.encode()

        # A waiting group is woken by the release.
        def release_when_waited_for() -> None:
            wait_until(lambda: subscribers(r, names[1]) >= 1, what="the group listens")
            holder.release()

        releaser = threading.Thread(target=release_when_waited_for)
        releaser.start()
        group = client.acquire_many(names, ttl=10.0, wait=10.0)
        releaser.join()
        assert group.leases[1].fence > holder.fence
        group.release()
    finally:
        other.close()


def test_a_lost_lease_is_lock_lost_and_the_rest_released(
    client: fencelock.Client, r: Redis, name: str
) -> None:
    names = names_of(name)
    group = client.acquire_many(names, ttl=10.0)
    r.execute("DEL", lock_keys(names[0])[0])
    with pytest.raises(fencelock.LockLost):
        group.release()
    assert group.lost
    assert all(held_by(r, n) is None for n in names)
    # The context manager raises it on exit too.
    with pytest.raises(fencelock.LockLost):
        with client.lock_many(names, ttl=10.0):
            r.execute("DEL", lock_keys(names[2])[0])
    assert all(held_by(r, n) is None for n in names)


@pytest.mark.parametrize(
    "names, error",
    [
        ([], ValueError),
        (["a", "b", "a"], ValueError),
        (["a", ""], ValueError),
        ([f"n{i}" for i in range(65)], ValueError),
        ("ab", TypeError),
        (b"ab", TypeError),
        (7, TypeError),
        (["a", 7], TypeError),
    ],
)
def test_bad_names_write_nothing(
    client: fencelock.Client, aclient: fencelock.AsyncClient, r: Redis, names: object, error: type
) -> None:
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    with pytest.raises(error):
        client.acquire_many(names, ttl=5.0)  # type: ignore[arg-type]
    with pytest.raises(error):
        client.try_acquire_many(names, ttl=5.0)  # type: ignore[arg-type]
    with pytest.raises(error):
        run(aclient.acquire_many(names, ttl=5.0))  # type: ignore[arg-type]
    assert set(r.keys(b"*")) - before == set()


def test_bad_ttl_and_wait_write_nothing(client: fencelock.Client, r: Redis, name: str) -> None:
    names = names_of(name)
    for ttl, wait in [(0, None), (-1.0, None), (5.0, -1.0)]:
        with pytest.raises(ValueError):
            client.acquire_many(names, ttl=ttl, wait=wait)
    with pytest.raises(TypeError):
        client.acquire_many(names, ttl="5")  # type: ignore[arg-type]
    assert all(held_by(r, n) is None for n in names)


def test_redlock_is_refused(redlock_urls: List[str], name: str) -> None:
    client = fencelock.Client(redlock_urls)
    try:
        with pytest.raises(ValueError, match="Redlock"):
            client.acquire_many(names_of(name), ttl=5.0)
    finally:
        client.close()
    for url in redlock_urls:
        conn = Redis(url)
        try:
            assert conn.execute("EXISTS", lock_keys(f"{name}:0")[0]) == 0
        finally:
            conn.close()


def test_asyncio_acquire_many_try_and_context(aclient: fencelock.AsyncClient, r: Redis, name: str) -> None:
    names = names_of(name)

    async def main() -> None:
        group = await aclient.acquire_many(names, ttl=10.0)
        assert [lease.name for lease in group.leases] == names
        assert all(held_by(r, lease.name) == lease.token.encode() for lease in group.leases)
        assert await aclient.try_acquire_many(names[1:], ttl=5.0) is None
        assert held_by(r, names[1]) == group.leases[1].token.encode()
        await group.release()
        assert all(held_by(r, n) is None for n in names)
        async with aclient.lock_many(names, ttl=5.0) as again:
            assert len(again) == 3 and not again.lost
        assert all(held_by(r, n) is None for n in names)

    run(main())


def test_asyncio_cancel_leaves_nothing(
    aclient: fencelock.AsyncClient, client: fencelock.Client, r: Redis, name: str
) -> None:
    names = names_of(name)
    holder = client.acquire(names[2], ttl=30.0)

    async def main() -> None:
        task = asyncio.ensure_future(aclient.acquire_many(names, ttl=10.0, wait=30.0))
        while subscribers(r, names[2]) < 1:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    holder.release()
    assert all(held_by(r, n) is None for n in names)
    # Nothing of the cancelled group comes back: another group gets them.
    group = client.try_acquire_many(names, ttl=5.0)
    assert group is not None
    group.release()


def test_a_cluster_takes_names_on_several_slots(cluster_urls: List[str], name: str) -> None:
    client = fencelock.Client(cluster_urls, topology="cluster")
    names = names_of(name, 6)
    try:
        group = client.acquire_many(names, ttl=10.0)
        for lease in group.leases:
            assert cluster_get(cluster_urls, lock_keys(lease.name)[0]) == lease.token.encode()
        assert client.try_acquire_many([f"{name}:other", names[3]], ttl=5.0) is None
        assert cluster_get(cluster_urls, lock_keys(f"{name}:other")[0]) is None
        group.release()
        assert all(cluster_get(cluster_urls, lock_keys(n)[0]) is None for n in names)
    finally:
        client.close()
