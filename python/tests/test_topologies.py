"""Redis Cluster and Sentinel topologies, and replica acknowledgement, from
Python (the harness's 3+3 cluster and its primary + replica + 3 Sentinels)."""

from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

import fencelock
from conftest import cluster_get, lock_keys, run, sentinel_primary, Redis


def test_cluster_locks_on_every_shard(cluster_urls: List[str], name: str) -> None:
    with fencelock.Client(cluster_urls[:1], topology="cluster") as client:
        for i in range(12):
            n = f"{name}:{i}"
            with client.lock(n, ttl=10.0, wait=0) as lease:
                assert cluster_get(cluster_urls, lock_keys(n)[0]) == lease.token.encode()
                assert client.try_acquire(n, ttl=10.0) is None
                lease.extend()
            assert cluster_get(cluster_urls, lock_keys(n)[0]) is None


def test_cluster_release_wakes_a_waiter_in_another_client(cluster_urls: List[str], name: str) -> None:
    holder = fencelock.Client(cluster_urls, topology="cluster")
    other = fencelock.Client(cluster_urls, topology="cluster")
    try:
        lease = holder.acquire(name, ttl=30.0)
        got = {}

        def wait() -> None:
            w = other.acquire(name, ttl=30.0, wait=20.0)
            got["at"] = time.monotonic()
            w.release()

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(1.3)  # the waiter is now between its 1 s retries
        released = time.monotonic()
        lease.release()
        t.join(10)
        # Well under the 1 s retry timer: the SPUBLISH woke it.
        assert got["at"] - released < 0.6
    finally:
        holder.close()
        other.close()


def test_async_client_on_the_cluster(cluster_urls: List[str], name: str) -> None:
    async def main() -> None:
        client = fencelock.AsyncClient(cluster_urls, topology="cluster", replicas=1)
        async with client.lock(name, ttl=5.0) as lease:
            assert lease.fence > 0
        await client.close()

    run(main())


def test_sentinel_locks_on_the_primary(sentinel: "tuple[List[str], str]", name: str) -> None:
    urls, service = sentinel
    with fencelock.Client(urls, topology="sentinel", service=service) as client:
        lease = client.acquire(name, ttl=10.0)
        r = Redis(sentinel_primary(sentinel))
        try:
            assert r.execute("GET", lock_keys(name)[0]) == lease.token.encode()
            lease.release()
            assert r.execute("GET", lock_keys(name)[0]) is None
        finally:
            r.close()


def test_replicas_too_few_acknowledged_is_not_acquired_and_released(
    sentinel: "tuple[List[str], str]", name: str
) -> None:
    urls, service = sentinel
    with fencelock.Client(urls, topology="sentinel", service=service, replicas=1) as client:
        client.acquire(name, ttl=10.0, wait=0).release()
    # One replica: two can never acknowledge.
    with fencelock.Client(
        urls, topology="sentinel", service=service, replicas=2, response_timeout=0.4
    ) as client:
        with pytest.raises(fencelock.NotAcquired) as info:
            client.acquire(name, ttl=10.0, wait=0)
        assert info.value.reason == "replicas"
        assert "of 2 replicas acknowledged" in str(info.value)
    r = Redis(sentinel_primary(sentinel))
    try:
        assert r.execute("GET", lock_keys(name)[0]) is None
    finally:
        r.close()


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"topology": "sentinel"}, ValueError),
        ({"topology": "sentinel", "service": ""}, ValueError),
        ({"topology": "cluster", "service": "mymaster"}, ValueError),
        ({"service": "mymaster"}, ValueError),
        ({"topology": "ring"}, ValueError),
        ({"topology": 3}, TypeError),
        ({"topology": "sentinel", "service": b"x"}, TypeError),
        ({"replicas": -1}, ValueError),
        ({"replicas": 2**32}, ValueError),
        ({"replicas": 1.0}, TypeError),
        ({"replicas": True}, TypeError),
    ],
)
def test_bad_topology_options_are_rejected_at_construction(kwargs: "dict[str, Any]", error: type) -> None:
    with pytest.raises(error):
        fencelock.Client("redis://127.0.0.1:1", **kwargs)
    with pytest.raises(error):
        fencelock.AsyncClient("redis://127.0.0.1:1", **kwargs)
