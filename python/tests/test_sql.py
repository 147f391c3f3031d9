"""fencelock.sql: the SQL recipe of fenced writes, against a real PostgreSQL
(psycopg 3, sync and asyncio; the harness's server or a private one) and
sqlite3 (the qmark placeholder style)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from typing import Any, Callable, Iterator, List, Tuple

import psycopg
import pytest

import fencelock
from fencelock.sql import fenced_update, fenced_update_async


@pytest.fixture
def table(pg_url: str) -> Iterator[Tuple[psycopg.Connection[Any], str]]:
    """A fresh table (a name that needs quoting) with rows 1 and 2."""
    name = f'accounts "{uuid.uuid4().hex[:8]}"'
    quoted = '"' + name.replace('"', '""') + '"'
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"CREATE TABLE {quoted} (id int PRIMARY KEY, balance int, note text, fence bigint)")
        conn.execute(f"INSERT INTO {quoted} (id, balance) VALUES (1, 100), (2, 200)")
        conn.commit()
        yield conn, name
        conn.rollback()
        conn.execute(f"DROP TABLE {quoted}")
        conn.commit()


def row(conn: "psycopg.Connection[Any]", table: str, id: int) -> Tuple[Any, ...]:
    quoted = '"' + table.replace('"', '""') + '"'
    found = conn.execute(f"SELECT balance, note, fence FROM {quoted} WHERE id = %s", (id,)).fetchone()
    assert found is not None
    return tuple(found)


@pytest.fixture
def stuck(redis_url: str) -> Iterator[fencelock.Client]:
    """The stale holder's own client (in one client, the next acquire of the
    name would find out its lease is gone)."""
    c = fencelock.Client(redis_url)
    yield c
    c.close()


def test_postgres_refuses_a_stale_holder(
    client: fencelock.Client, stuck: fencelock.Client, name: str, table: Tuple["psycopg.Connection[Any]", str]
) -> None:
    conn, t = table
    zombie = stuck.acquire(name, ttl=30.0)
    assert fenced_update(conn, t, {"balance": 110}, where={"id": 1}, fence=zombie) == 1
    assert fenced_update(conn, t, {"balance": 120}, where={"id": 1}, fence=zombie) == 1  # same holder again
    conn.commit()
    assert row(conn, t, 1) == (120, None, zombie.fence)

    client.force_release(name)
    nxt = client.acquire(name, ttl=30.0)
    assert fenced_update(conn, t, {"note": "taken over"}, where={"id": 1}, fence=nxt) == 1
    conn.commit()
    with pytest.raises(fencelock.StaleFence) as info:
        fenced_update(conn, t, {"balance": 0}, where={"id": 1}, fence=zombie)
    err = info.value
    assert isinstance(err, fencelock.LockLost)
    assert (err.name, err.resource, err.fence, err.accepted) == (name, t, zombie.fence, nxt.fence)
    conn.rollback()
    assert row(conn, t, 1) == (120, "taken over", nxt.fence)
    # A where that matches nothing is not a refusal.
    assert fenced_update(conn, t, {"balance": 1}, where={"id": 99}, fence=nxt) == 0
    # A bare fence (handed to another process): no lock name on the error.
    with pytest.raises(fencelock.StaleFence) as bare:
        fenced_update(conn.cursor(), ("public", t), {}, where={"id": 1}, fence=zombie.fence)
    assert bare.value.name is None and bare.value.resource == f"public.{t}"
    conn.rollback()
    nxt.release()


def test_postgres_bad_arguments_send_nothing(
    client: fencelock.Client, name: str, table: Tuple["psycopg.Connection[Any]", str]
) -> None:
    conn, t = table
    lease = client.acquire(name, ttl=30.0)
    bad_types: List[Callable[[], int]] = [
        lambda: fenced_update(conn, t, {"balance": 1}, where={"id": 1}, fence="7"),  # type: ignore[arg-type]
        lambda: fenced_update(conn, t, {"balance": 1}, where={"id": 1}, fence=True),
        lambda: fenced_update(conn, t, [("balance", 1)], where={"id": 1}, fence=lease),  # type: ignore[arg-type]
        lambda: fenced_update(conn, 42, {"balance": 1}, where={"id": 1}, fence=lease),  # type: ignore[arg-type]
    ]
    for bad_type in bad_types:
        with pytest.raises(TypeError):
            bad_type()
    bad_values: List[Callable[[], int]] = [
        lambda: fenced_update(conn, t, {"balance": 1}, where={}, fence=lease),  # would hit every row
        lambda: fenced_update(conn, t, {"fence": 1}, where={"id": 1}, fence=lease),
        lambda: fenced_update(conn, t, {"": 1}, where={"id": 1}, fence=lease),
        lambda: fenced_update(conn, t, {"balance": 1}, where={"id": 1}, fence=-1),
        lambda: fenced_update(conn, t, {"balance": 1}, where={"id": 1}, fence=lease, paramstyle="named"),
        lambda: fenced_update(object(), t, {"balance": 1}, where={"id": 1}, fence=lease),
    ]
    for bad_value in bad_values:
        with pytest.raises(ValueError):
            bad_value()
    conn.commit()
    assert row(conn, t, 1) == (100, None, None) and row(conn, t, 2) == (200, None, None)
    lease.release()


def test_postgres_asyncio(pg_url: str, redis_url: str, aclient: fencelock.AsyncClient, name: str,
                          table: Tuple["psycopg.Connection[Any]", str]) -> None:
    conn, t = table

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as aconn:
            stuck = fencelock.AsyncClient(redis_url)
            zombie = await stuck.acquire(name, ttl=30.0)
            assert await fenced_update_async(aconn, t, {"balance": 5}, where={"id": 2}, fence=zombie) == 1
            await aclient.force_release(name)
            nxt = await aclient.acquire(name, ttl=30.0)
            assert await fenced_update_async(aconn, t, {"balance": 6}, where={"id": 2}, fence=nxt) == 1
            await aconn.commit()
            with pytest.raises(fencelock.StaleFence):
                await fenced_update_async(aconn.cursor(), t, {"balance": 7}, where={"id": 2}, fence=zombie)
            await aconn.rollback()
            await nxt.release()
            await stuck.close()

    asyncio.run(main())
    conn.commit()
    assert row(conn, t, 2)[0] == 6


def test_sqlite_qmark(client: fencelock.Client, stuck: fencelock.Client, name: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT, fence INTEGER)")
    conn.execute("INSERT INTO jobs (id, state) VALUES ('a', 'new')")
    zombie = stuck.acquire(name, ttl=30.0)
    assert fenced_update(conn, "jobs", {"state": "running"}, where={"id": "a"}, fence=zombie) == 1
    client.force_release(name)
    nxt = client.acquire(name, ttl=30.0)
    assert fenced_update(conn, "jobs", {"state": "done"}, where={"id": "a"}, fence=nxt) == 1
    with pytest.raises(fencelock.StaleFence):
        fenced_update(conn, "jobs", {"state": "running"}, where={"id": "a"}, fence=zombie)
    assert conn.execute("SELECT state, fence FROM jobs").fetchone() == ("done", nxt.fence)
    nxt.release()
    conn.close()
