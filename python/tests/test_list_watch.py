"""Client.list / Client.watch and their asyncio forms, against real servers
(single node, Redlock, the harness's cluster)."""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import List, Tuple, Union

import pytest

import fencelock
from conftest import Redis, run


def isolated(url: "str | List[str]", **options: object) -> Tuple[fencelock.Client, str]:
    """A client in a key space of its own: list('*') sees only this test's locks."""
    prefix = f"py-ls:{uuid.uuid4().hex[:12]}:"
    return fencelock.Client(url, prefix=prefix, **options), prefix  # type: ignore[arg-type]


def names(listed: List[fencelock.Listed]) -> List[Union[str, bytes]]:
    return [name for name, _ in listed]


def test_list_finds_held_locks_matching_a_pattern_in_name_order(redis_url: str, r: Redis) -> None:
    client, prefix = isolated(redis_url)
    with client:
        held = ["invoice:1", "invoice:2", "invoice:{7}", "invoice:ключ", "report:daily"]
        leases = {n: client.acquire(n, ttl=30.0) for n in held}
        raw = client.acquire(b"invoice:\xff", ttl=30.0)
        client.acquire("invoice:3", ttl=30.0).release()  # its fence key stays
        r.execute("SET", f"{prefix}{{invoice:9}}:other", "x")  # not a lock key

        listed = list(client.list("invoice:*"))
        assert names(listed) == ["invoice:1", "invoice:2", "invoice:{7}", "invoice:ключ", b"invoice:\xff"]
        for name, info in listed:
            assert isinstance(info, fencelock.LockInfo) and info.held and info.held_by_me
            assert info.ttl is not None and info.ttl > 20.0
            lease = raw if name == b"invoice:\xff" else leases[str(name)]
            assert info.fence == lease.fence
        assert names(list(client.list())) == sorted(names(list(client.list("*"))), key=_raw)
        assert len(list(client.list())) == 6
        assert names(list(client.list("invoice:[12]"))) == ["invoice:1", "invoice:2"]
        assert names(list(client.list(r"invoice:\{7\}"))) == ["invoice:{7}"]
        assert names(list(client.list(b"invoice:?"))) == [b"invoice:1", b"invoice:2", b"invoice:\xff"]
        assert list(client.list("nothing:*")) == []


def _raw(name: Union[str, bytes]) -> bytes:
    return name.encode() if isinstance(name, str) else name


def test_list_and_watch_refuse_bad_arguments_and_closed_clients(redis_url: str, r: Redis) -> None:
    before = set(r.keys(b"*"))  # not DBSIZE: keys of earlier tests expire meanwhile
    client = fencelock.Client(redis_url)
    for bad in ["", "a[b", "x\\", "a" * 1025]:
        with pytest.raises(ValueError):
            client.list(bad)  # raised by the call, before iterating
    with pytest.raises(TypeError):
        client.list(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        client.watch("")
    for interval in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            client.watch("a", interval=interval)
    with pytest.raises(TypeError):
        client.watch("a", interval="1")  # type: ignore[arg-type]
    client.close()
    with pytest.raises(fencelock.ClientClosed) as caught:
        client.list("a*")
    assert caught.value.name == "a*" and "list locks matching" in str(caught.value)
    with pytest.raises(fencelock.ClientClosed):
        client.watch("a")
    assert set(r.keys(b"*")) - before == set()


def test_watch_reports_changes_of_holder_and_fence(redis_url: str, name: str) -> None:
    with fencelock.Client(redis_url) as watcher, fencelock.Client(redis_url) as holder:
        changes = watcher.watch(name, interval=0.1)
        now = next(changes)
        assert not now.held and now.fence is None
        lease = holder.acquire(name, ttl=30.0)
        acquired = next(changes)
        assert acquired.held and acquired.fence == lease.fence and not acquired.held_by_me
        lease.release()
        released = next(changes)
        assert not released.held and released.fence == lease.fence
        fence = watcher.force_release(name)
        forced = next(changes)
        assert not forced.held and forced.fence == fence


def test_async_list_and_watch(redis_url: str) -> None:
    prefix = f"py-ls:{uuid.uuid4().hex[:12]}:"

    async def body() -> None:
        async with fencelock.AsyncClient(redis_url, prefix=prefix) as aclient:
            lease = await aclient.acquire("job:1", ttl=30.0)
            listed = [item async for item in aclient.list("job:*")]
            assert [(n, i.fence) for n, i in listed] == [("job:1", lease.fence)]
            changes = aclient.watch("job:1", interval=0.1)
            first = await changes.__anext__()
            assert first.held and first.held_by_me
            await lease.release()
            assert not (await changes.__anext__()).held
            # Cancelling a waiting step loses nothing: the next one still comes.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(changes.__anext__(), 0.3)
            other = fencelock.AsyncClient(redis_url, prefix=prefix)
            got = await other.acquire("job:1", ttl=30.0)
            assert (await changes.__anext__()).fence == got.fence
            await other.close()
            with pytest.raises(ValueError):
                aclient.list("a[")  # at the call, before any await
            with pytest.raises(ValueError):
                aclient.watch("job:1", interval=0)
            await aclient.close()
            with pytest.raises(fencelock.ClientClosed):
                aclient.list("*")

    run(body())


def test_redlock_lists_what_a_majority_holds(redlock_urls: List[str], r: Redis) -> None:
    client, prefix = isolated(redlock_urls)
    with client:
        lease = client.acquire("job:a", ttl=30.0)
        minority = Redis(redlock_urls[0])
        try:
            minority.execute("SET", f"{prefix}{{job:b}}", "someone")
        finally:
            minority.close()
        assert [(n, i.fence) for n, i in client.list("job:*")] == [("job:a", lease.fence)]


def test_cluster_list_covers_every_primary(cluster_urls: List[str]) -> None:
    client, _ = isolated(cluster_urls[:1], topology="cluster")
    with client:
        wanted = [f"shard:{i:02}" for i in range(24)]
        leases = [client.acquire(n, ttl=30.0) for n in wanted]
        assert names(list(client.list("shard:*"))) == wanted
        for lease in leases:
            lease.release()


def test_a_forked_child_cannot_use_the_parents_cursor(redis_url: str, name: str) -> None:
    with fencelock.Client(redis_url) as client:
        changes = client.watch(name)
        next(changes)
        pid = os.fork()
        if pid == 0:  # the child: a clear error, never a hang; its own watch works
            try:
                next(changes)
            except RuntimeError as error:
                ok = "another process" in str(error) and next(client.watch(name)).held is False
                os._exit(0 if ok else 1)
            os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
