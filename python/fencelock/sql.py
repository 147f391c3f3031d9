"""Fenced writes to a SQL database: the row refuses a stale lock holder.

    from fencelock.sql import fenced_update

    with client.lock("account:42", ttl=10.0) as lease:
        fenced_update(conn, "accounts", {"balance": 120}, where={"id": 42}, fence=lease)
        conn.commit()

One ``UPDATE ... SET ..., fence = <fence> WHERE <where> AND (fence IS NULL OR
fence <= <fence>)``: applied while the row's recorded fence is not newer
than the writer's (equal: the same holder writing again), recording the
writer's fence in the same statement. When it changes no row, one ``SELECT
max(fence)`` over the same rows tells a refusal (a newer fence is recorded:
:class:`fencelock.StaleFence`, nothing written) from a ``where`` that
matched nothing (``0``). The statements come from fencelock's core
(identifiers quoted, every value a bound parameter), the same as Node's
``fencelock/sql``; they run on your connection, inside your transaction:
commit as you normally would.

Works with any DB-API 2 connection or cursor whose driver reports
``rowcount`` (psycopg 3 and 2, sqlite3, pg8000, ...): placeholders follow
the driver module's ``paramstyle`` (``qmark``, ``numeric``, ``format``,
``pyformat``), or pass ``paramstyle=``. :func:`fenced_update_async` takes an
asyncio connection or cursor (psycopg's ``AsyncConnection``).
"""

from __future__ import annotations

import sys
from typing import Any, Generator, Mapping, NamedTuple, Optional, Tuple, Union

from ._native import AsyncLease, FencedUpdate, Lease

__all__ = ["fenced_update", "fenced_update_async"]

Table = Union[str, Tuple[str, ...]]
Fence = Union[int, Lease, AsyncLease]


class _Plan(NamedTuple):
    statements: FencedUpdate
    update_params: Tuple[Any, ...]
    check_params: Tuple[Any, ...]


def _plan(
    target: Any,
    table: Table,
    values: Mapping[str, Any],
    where: Mapping[str, Any],
    fence: Fence,
    fence_column: str,
    paramstyle: Optional[str],
) -> _Plan:
    if isinstance(fence, (Lease, AsyncLease)):
        name: Optional[Union[str, bytes]] = fence.name
        number = fence.fence
    elif isinstance(fence, int) and not isinstance(fence, bool):
        name, number = None, fence
    else:
        raise TypeError(f"fence must be an int or a lease, not {type(fence).__name__}")
    for what, mapping in (("values", values), ("where", where)):
        if not isinstance(mapping, Mapping):
            raise TypeError(f"{what} must be a mapping of column names to values, not {type(mapping).__name__}")
    style = paramstyle or _paramstyle(target)
    statements = FencedUpdate(table, list(values), list(where), fence_column, style, number, name)
    kept = tuple(where.values())
    return _Plan(statements, (*values.values(), number, *kept, number), kept)


def _paramstyle(target: Any) -> str:
    """The DB-API ``paramstyle`` of the driver module that made ``target``."""
    module = sys.modules.get(type(target).__module__.partition(".")[0])
    style = getattr(module, "paramstyle", None)
    if not isinstance(style, str):
        raise ValueError(
            f"cannot tell the paramstyle of {type(target).__module__}.{type(target).__name__}: pass paramstyle="
        )
    return style


# (statement, parameters, whether the row is wanted back): the driver runs
# it and sends back the cursor's rowcount, or its fetchone() if wanted.
_Step = Tuple[str, Tuple[Any, ...], bool]


def _steps(plan: _Plan) -> Generator[_Step, Any, int]:
    """The one order of work of both drivers below: the update, then the
    check only if no row changed; the core reads the answers."""
    updated = max((yield plan.statements.update, plan.update_params, False), 0)
    newest = None
    if updated == 0:
        row = yield plan.statements.check, plan.check_params, True
        value = None if row is None else row[0]
        newest = None if value is None else int(value)
    return plan.statements.outcome(updated, newest)


def fenced_update(
    conn: Any,
    table: Table,
    values: Mapping[str, Any],
    *,
    where: Mapping[str, Any],
    fence: Fence,
    fence_column: str = "fence",
    paramstyle: Optional[str] = None,
) -> int:
    """Update with ``values`` the rows of ``table`` matching ``where``
    (column = value, all of them; meant to pick one row) whose recorded fence
    is not newer than ``fence`` (a lease, or its ``fence``), recording
    ``fence`` in ``fence_column``. Returns the rows updated, ``0`` if
    ``where`` matched none. Raises :class:`fencelock.StaleFence` when no row
    was updated because a newer fence is recorded (nothing written). ``table`` is a name or ``(schema, name)``.
    ``conn`` is a DB-API connection (a cursor is opened and closed) or cursor.
    """
    steps = _steps(_plan(conn, table, values, where, fence, fence_column, paramstyle))
    own = hasattr(conn, "cursor")
    cur = conn.cursor() if own else conn
    try:
        answer = None
        while True:
            try:
                sql, params, fetch = steps.send(answer)
            except StopIteration as done:
                return int(done.value)
            cur.execute(sql, params)
            answer = cur.fetchone() if fetch else cur.rowcount
    finally:
        if own:
            cur.close()


async def fenced_update_async(
    conn: Any,
    table: Table,
    values: Mapping[str, Any],
    *,
    where: Mapping[str, Any],
    fence: Fence,
    fence_column: str = "fence",
    paramstyle: Optional[str] = None,
) -> int:
    """:func:`fenced_update` for an asyncio driver (psycopg's
    ``AsyncConnection`` or ``AsyncCursor``)."""
    steps = _steps(_plan(conn, table, values, where, fence, fence_column, paramstyle))
    own = hasattr(conn, "cursor")
    cur = conn.cursor() if own else conn
    try:
        answer = None
        while True:
            try:
                sql, params, fetch = steps.send(answer)
            except StopIteration as done:
                return int(done.value)
            await cur.execute(sql, params)
            answer = await cur.fetchone() if fetch else cur.rowcount
    finally:
        if own:
            await cur.close()
