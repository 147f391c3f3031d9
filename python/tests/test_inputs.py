"""Every bad input: the right error type, raised before any
Redis call (nothing written), in sync and async form."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Dict, Iterator, List, Set, Tuple, Type

import pytest

import fencelock
from conftest import Redis, run

MAX_TTL_S = 2**40 / 1000

# (kwargs for acquire, expected exception)
BAD: List[Tuple[str, Dict[str, Any], Type[Exception]]] = [
    ("empty name", {"name": "", "ttl": 1.0}, ValueError),
    ("empty bytes name", {"name": b"", "ttl": 1.0}, ValueError),
    ("name 1025 bytes", {"name": "n" * 1025, "ttl": 1.0}, ValueError),
    ("name 1025 utf-8 bytes", {"name": "é" * 512 + "n", "ttl": 1.0}, ValueError),
    ("name int", {"name": 42, "ttl": 1.0}, TypeError),
    ("name None", {"name": None, "ttl": 1.0}, TypeError),
    ("name list", {"name": ["a"], "ttl": 1.0}, TypeError),
    ("ttl 0", {"ttl": 0}, ValueError),
    ("ttl 0.0", {"ttl": 0.0}, ValueError),
    ("ttl negative", {"ttl": -1.0}, ValueError),
    ("ttl NaN", {"ttl": math.nan}, ValueError),
    ("ttl +inf", {"ttl": math.inf}, ValueError),
    ("ttl -inf", {"ttl": -math.inf}, ValueError),
    ("ttl over 2^40 ms", {"ttl": MAX_TTL_S + 1}, ValueError),
    ("ttl huge int", {"ttl": 10**400}, ValueError),
    ("ttl huge negative int", {"ttl": -(10**400)}, ValueError),
    ("ttl str", {"ttl": "10"}, TypeError),
    ("ttl bool", {"ttl": True}, TypeError),
    ("ttl None", {"ttl": None}, TypeError),
    ("ttl complex", {"ttl": 1j}, TypeError),
    ("wait negative", {"ttl": 1.0, "wait": -1}, ValueError),
    ("wait NaN", {"ttl": 1.0, "wait": math.nan}, ValueError),
    ("wait inf", {"ttl": 1.0, "wait": math.inf}, ValueError),
    ("wait str", {"ttl": 1.0, "wait": "1"}, TypeError),
    ("wait bool", {"ttl": 1.0, "wait": False}, TypeError),
    ("auto_renew int", {"ttl": 1.0, "auto_renew": 1}, TypeError),
    ("max_hold 0", {"ttl": 1.0, "auto_renew": True, "max_hold": 0}, ValueError),
    ("max_hold negative", {"ttl": 1.0, "auto_renew": True, "max_hold": -1.0}, ValueError),
    ("max_hold NaN", {"ttl": 1.0, "auto_renew": True, "max_hold": math.nan}, ValueError),
    ("max_hold inf", {"ttl": 1.0, "auto_renew": True, "max_hold": math.inf}, ValueError),
    ("max_hold over 2^40 ms", {"ttl": 1.0, "auto_renew": True, "max_hold": MAX_TTL_S + 1}, ValueError),
    ("max_hold huge int", {"ttl": 1.0, "max_hold": 10**400}, ValueError),
    ("max_hold str", {"ttl": 1.0, "auto_renew": True, "max_hold": "5"}, TypeError),
    ("max_hold bool", {"ttl": 1.0, "auto_renew": True, "max_hold": True}, TypeError),
    ("max_hold 0 without auto_renew", {"ttl": 1.0, "max_hold": 0}, ValueError),
    ("on_lost not callable", {"ttl": 1.0, "on_lost": 3}, TypeError),
]


def kwargs_for(case: Dict[str, Any], name: str) -> Dict[str, Any]:
    kwargs = dict(case)
    kwargs.setdefault("name", name)
    return kwargs


@pytest.fixture
def empty_db(redis_url: str, r: Redis) -> Iterator[Redis]:
    """The bad-input tests compare the server's keys before and after: nothing
    may be written. (Not DBSIZE: keys of earlier tests expire meanwhile.)"""
    yield r


def written_since(db: Redis, before: Set[bytes]) -> Set[bytes]:
    """Keys that exist now and did not before."""
    return set(db.keys(b"*")) - before


@pytest.mark.parametrize("label,case,error", BAD, ids=[b[0] for b in BAD])
def test_sync_bad_input(client: fencelock.Client, empty_db: Redis, name: str,
                        label: str, case: Dict[str, Any], error: Type[Exception]) -> None:
    before = set(empty_db.keys(b"*"))
    with pytest.raises(error):
        client.acquire(**kwargs_for(case, name))
    if "wait" not in case:
        with pytest.raises(error):
            client.try_acquire(**kwargs_for(case, name))
    with pytest.raises(error):
        with client.lock(**kwargs_for(case, name)):
            pass  # pragma: no cover
    assert written_since(empty_db, before) == set()
    assert empty_db.keys(b"fencelock:*" + name.encode() + b"*") == []


@pytest.mark.parametrize("label,case,error", BAD, ids=[b[0] for b in BAD])
def test_async_bad_input(aclient: fencelock.AsyncClient, empty_db: Redis, name: str,
                         label: str, case: Dict[str, Any], error: Type[Exception]) -> None:
    async def main() -> None:
        before = set(empty_db.keys(b"*"))
        with pytest.raises(error):
            await aclient.acquire(**kwargs_for(case, name))
        if "wait" not in case:
            with pytest.raises(error):
                await aclient.try_acquire(**kwargs_for(case, name))
        with pytest.raises(error):
            async with aclient.lock(**kwargs_for(case, name)):
                pass  # pragma: no cover
        assert written_since(empty_db, before) == set()

    run(main())


@pytest.mark.parametrize("ttl,error", [(0, ValueError), (-1, ValueError), (math.nan, ValueError),
                                       (math.inf, ValueError), (MAX_TTL_S * 2, ValueError),
                                       ("1", TypeError), (True, TypeError)])
def test_bad_extend_ttl_changes_nothing(client: fencelock.Client, r: Redis, name: str,
                                        ttl: Any, error: Type[Exception]) -> None:
    lease = client.acquire(name, ttl=10.0)
    with pytest.raises(error):
        lease.extend(ttl)
    with pytest.raises(error):
        lease.extend(ttl=ttl)
    assert r.execute("PTTL", f"fencelock:{{{name}}}") > 9000
    lease.release()

    async def main() -> None:
        aclient = fencelock.AsyncClient(client_url(r))
        alease = await aclient.acquire(name, ttl=10.0)
        with pytest.raises(error):
            await alease.extend(ttl)
        assert r.execute("PTTL", f"fencelock:{{{name}}}") > 9000
        await alease.release()
        await aclient.close()

    run(main())


def client_url(r: Redis) -> str:
    return f"redis://{r.host}:{r.port}/{r.db}"


def test_ttl_rounds_up_to_whole_milliseconds(client: fencelock.Client, r: Redis, name: str) -> None:
    lease = client.acquire(name, ttl=0.0021)  # 2.1 ms -> 3 ms, the smallest ttl
    assert lease.ttl == 0.003
    lease2 = client.acquire(name + "b", ttl=2.0000001)
    assert lease2.ttl == 2.001
    lease2.release()
    big = client.acquire(name + "c", ttl=MAX_TTL_S)  # exactly 2^40 ms works
    assert r.execute("PTTL", f"fencelock:{{{name}c}}") > 2**39
    big.release()


@pytest.mark.parametrize("url,error", [
    ("not a url", ValueError),
    ("http://127.0.0.1:6379", ValueError),
    ("redis://127.0.0.1:notaport/0", ValueError),
    ("redis://127.0.0.1:6379/notadb", ValueError),
    ([], ValueError),
    (42, TypeError),
    ([42], TypeError),
    (None, TypeError),
])
def test_malformed_urls(url: Any, error: Type[Exception]) -> None:
    # Clients connect on first use, but a bad URL is refused at construction.
    with pytest.raises(error):
        fencelock.Client(url)
    with pytest.raises(error):
        fencelock.AsyncClient(url)


@pytest.mark.parametrize("kwargs,error", [
    ({"prefix": "a{b"}, ValueError),
    ({"prefix": "x" * 257}, ValueError),
    ({"prefix": 3}, TypeError),
    ({"connect_timeout": 0}, ValueError),
    ({"connect_timeout": -1}, ValueError),
    ({"response_timeout": math.nan}, ValueError),
    ({"response_timeout": "1"}, TypeError),
    ({"prefixx": "a:"}, TypeError),  # misspelt: refused, not ignored
    ({"tls_dangerously_skip_verification": 1}, TypeError),
])
def test_bad_client_options(redis_url: str, kwargs: Dict[str, Any], error: Type[Exception]) -> None:
    with pytest.raises(error):
        fencelock.Client(redis_url, **kwargs)
    with pytest.raises(error):
        fencelock.AsyncClient(redis_url, **kwargs)


def test_options_are_keywords_only(redis_url: str) -> None:
    with pytest.raises(TypeError):
        fencelock.Client(redis_url, "myapp:")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'prefixx'"):
        fencelock.AsyncClient(redis_url, prefixx="a:")  # type: ignore[call-arg]


def test_custom_prefix(redis_url: str, r: Redis, name: str) -> None:
    with fencelock.Client(redis_url, prefix="myapp:") as c:
        lease = c.acquire(name, ttl=5.0)
        assert r.get(f"myapp:{{{name}}}".encode()) == lease.token.encode()
        lease.release()


def test_exception_hierarchy() -> None:
    assert issubclass(fencelock.NotAcquired, fencelock.LockError)
    assert issubclass(fencelock.NotAcquired, TimeoutError)
    assert issubclass(fencelock.LockLost, fencelock.LockError)
    assert issubclass(fencelock.RedisError, fencelock.LockError)
    assert not issubclass(fencelock.LockLost, TimeoutError)
    assert fencelock.__version__


def test_async_methods_are_coroutine_functions() -> None:
    # Nothing starts before the coroutine is awaited (bad arguments raise there).
    assert asyncio.iscoroutinefunction(fencelock.AsyncClient.acquire)
    assert asyncio.iscoroutinefunction(fencelock.AsyncClient.try_acquire)
    assert asyncio.iscoroutinefunction(fencelock.AsyncLock.__aenter__)
