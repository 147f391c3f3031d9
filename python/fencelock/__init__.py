"""fencelock: Redis distributed locks with fencing tokens, Redlock and
auto-renewal, for threads and asyncio.

The locking itself is one Rust implementation (the ``fencelock`` crate and its
sans-IO core), shared with the Node.js and Rust front ends. This package adds
only the Pythonic surface: context managers, exceptions and type hints.

    client = fencelock.Client("redis://127.0.0.1:6379/0")
    with client.lock("invoice:42", ttl=10.0, wait=5.0) as lease:
        ...  # lease.fence orders writes to shared storage
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import os
from types import TracebackType
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Generic,
    Iterable,
    Iterator,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

from . import _native
from ._native import AsyncLease, AsyncLockGroup, Lease, LockGroup, LockInfo
from .exceptions import ClientClosed, LockError, LockLost, NotAcquired, RedisError, StaleFence

__version__: str = _native.__version__

__all__ = [
    "AsyncClient",
    "AsyncLease",
    "AsyncLock",
    "AsyncLockGroup",
    "AsyncLocks",
    "AsyncRwLock",
    "AsyncRwSide",
    "AsyncSemaphore",
    "Client",
    "ClientClosed",
    "Lease",
    "Lock",
    "LockError",
    "LockGroup",
    "Locks",
    "LockInfo",
    "Listed",
    "LockLost",
    "NotAcquired",
    "RedisError",
    "RwLock",
    "RwSide",
    "Semaphore",
    "StaleFence",
    "__version__",
]

_log = logging.getLogger("fencelock")

# A forked child (gunicorn, celery prefork) gets a fresh runtime and fresh
# connections; clients reconnect lazily on first use.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_native._after_fork_in_child)
# Runtime threads must not call into Python once the interpreter is going.
atexit.register(_native._shutdown)

Name = Union[str, bytes, bytearray]
#: A listed lock: its name (``str``, or ``bytes`` if the pattern was bytes
#: or the name is not UTF-8) and what ``inspect`` says about it.
Listed = Tuple[Union[str, bytes], LockInfo]

_F = TypeVar("_F", bound=Callable[..., Any])
_AF = TypeVar("_AF", bound=Callable[..., Awaitable[Any]])


class Client(_native.Client):
    """A blocking client, safe to share between threads.

    ``Client(url)`` talks to one Redis; ``Client([url1, url2, ...])`` to
    independent Redis nodes with Redlock (a majority must agree);
    ``topology="cluster"`` treats the URLs as Redis Cluster seeds and
    ``topology="sentinel", service="mymaster"`` as Sentinels. ``replicas=N``
    counts a lock only once N replicas acknowledged it. It connects
    on first use. Blocking calls release the GIL; Ctrl-C interrupts a waiting
    ``acquire`` promptly and leaves no lock behind.
    """

    def lock(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Lock:
        """A context manager: acquires on enter, releases on exit.

        On exit, ``LockLost`` is raised only if the body did not raise.
        """
        return Lock(
            lambda: self.acquire(
                name,
                ttl,
                # <gen_stubs forward>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                on_lost=on_lost,
                fair=fair,
                # </gen_stubs>
            )
        )

    def lock_many(
        self,
        names: Iterable[Name],
        ttl: float,
        *,
        # <gen_stubs params many>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> Locks:
        """A context manager over ``acquire_many``: every name is acquired
        (all or nothing) on enter, and every lease released on exit.

        On exit, ``LockLost`` is raised only if the body did not raise.
        """
        names = list(names)
        return Locks(
            lambda: self.acquire_many(
                names,
                ttl,
                # <gen_stubs forward many>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                # </gen_stubs>
            )
        )

    def synchronized(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Callable[[_F], _F]:
        """A decorator: every call of the function runs inside
        ``with self.lock(name, ttl, ...)`` (same keywords), so the lock is
        released when it returns or raises. For coroutine functions use
        :meth:`AsyncClient.synchronized` (``TypeError`` here)."""

        def decorate(fn: _F) -> _F:
            if inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"{fn!r} is a coroutine function: use AsyncClient.synchronized"
                )

            @functools.wraps(fn)
            def locked(*args: Any, **kwargs: Any) -> Any:
                with self.lock(
                    name,
                    ttl,
                    # <gen_stubs forward>
                    wait=wait,
                    auto_renew=auto_renew,
                    max_hold=max_hold,
                    on_lost=on_lost,
                    fair=fair,
                    # </gen_stubs>
                ):
                    return fn(*args, **kwargs)

            return cast(_F, locked)

        return decorate

    def semaphore(self, name: Name, permits: int) -> Semaphore:
        """A counting semaphore of ``permits`` permits (an ``int`` from 1 to
        1,000,000; every client of it should pass the same). Its keys live
        beside a mutex of the same name, never shared with it."""
        return Semaphore(self, name, permits)

    def rw_lock(self, name: Name) -> RwLock:
        """A read-write lock: ``with rw.read(ttl=...)``, ``with
        rw.write(ttl=...)``; ``rw.reader`` / ``rw.writer`` acquire leases."""
        return RwLock(self, name)

    def list(self, pattern: Name = "*") -> Iterator[Listed]:
        """The locks held now whose names match ``pattern`` (Redis's glob
        syntax, over lock names: ``*``, ``?``, ``[a-z]``, ``\\`` escapes),
        as ``(name, LockInfo)`` in name order. Found with ``SCAN`` on every
        node (every primary of a cluster), never ``KEYS``; read-only. A bad
        pattern raises ``ValueError`` / ``TypeError`` here, at the call."""
        return _Each(cast(Callable[[], Optional[Listed]], self._list(pattern).next))

    def watch(self, name: Name, *, interval: float = 0.25) -> Iterator[LockInfo]:
        """Follow ``name``: first its ``LockInfo`` now, then a new one each
        time its holder or fence changes (acquired, released, expired,
        force-released; renewals are not changes). Releases are heard at
        once; Redis is asked again every ``interval`` seconds and when the
        holder's TTL runs out. Endless: stop iterating to stop watching."""
        return _Each(cast(Callable[[], Optional[LockInfo]], self._watch(name, interval).next))

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncClient(_native.AsyncClient):
    """The asyncio client. Cancelling a task that awaits ``acquire`` leaves no
    lock behind."""

    async def acquire(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> AsyncLease:
        """Acquire ``name``, waiting as ``wait`` allows (``None``: until
        acquired); ``NotAcquired`` when the wait runs out."""
        grant = await self._acquire(
            name,
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            fair=fair,
            # </gen_stubs>
        )
        # Taken here, with no await in between: a lease that never got this
        # far (the task was cancelled) is released by the driver.
        return grant._claim()

    async def try_acquire(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params try lease=AsyncLease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Optional[AsyncLease]:
        """One attempt: the lease, or ``None`` if someone else holds the lock."""
        grant = await self._try_acquire(
            name,
            ttl,
            # <gen_stubs forward try>
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            fair=fair,
            # </gen_stubs>
        )
        return None if grant is None else grant._claim()

    def lock(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> AsyncLock:
        """An async context manager: acquires on enter, releases on exit.

        On exit, ``LockLost`` is raised only if the body did not raise.
        """
        return AsyncLock(
            lambda: self.acquire(
                name,
                ttl,
                # <gen_stubs forward>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                on_lost=on_lost,
                fair=fair,
                # </gen_stubs>
            )
        )

    async def acquire_many(
        self,
        names: Iterable[Name],
        ttl: float,
        *,
        # <gen_stubs params many>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> AsyncLockGroup:
        """Acquire every one of ``names``, all or nothing, waiting as
        ``wait`` allows; ``NotAcquired`` when the wait runs out (nothing of
        the group is held then)."""
        grant = await self._acquire_many(
            names,
            ttl,
            # <gen_stubs forward many>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            # </gen_stubs>
        )
        # Taken with no await in between, as acquire's grant.
        return grant._claim()

    async def try_acquire_many(
        self,
        names: Iterable[Name],
        ttl: float,
        *,
        # <gen_stubs params many try>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> Optional[AsyncLockGroup]:
        """One attempt: the group, or ``None`` if any name is held by
        someone else."""
        grant = await self._try_acquire_many(
            names,
            ttl,
            # <gen_stubs forward many try>
            auto_renew=auto_renew,
            max_hold=max_hold,
            # </gen_stubs>
        )
        return None if grant is None else grant._claim()

    def lock_many(
        self,
        names: Iterable[Name],
        ttl: float,
        *,
        # <gen_stubs params many>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> AsyncLocks:
        """An async context manager over ``acquire_many`` (see
        ``Client.lock_many``)."""
        names = list(names)
        return AsyncLocks(
            lambda: self.acquire_many(
                names,
                ttl,
                # <gen_stubs forward many>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                # </gen_stubs>
            )
        )

    def synchronized(
        self,
        name: Name,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Callable[[_AF], _AF]:
        """A decorator for coroutine functions: every call runs inside
        ``async with self.lock(name, ttl, ...)`` (same keywords), so the lock
        is released when it returns, raises or is cancelled. A plain function
        is a ``TypeError``."""

        def decorate(fn: _AF) -> _AF:
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"{fn!r} is not a coroutine function: use Client.synchronized"
                )

            @functools.wraps(fn)
            async def locked(*args: Any, **kwargs: Any) -> Any:
                async with self.lock(
                    name,
                    ttl,
                    # <gen_stubs forward>
                    wait=wait,
                    auto_renew=auto_renew,
                    max_hold=max_hold,
                    on_lost=on_lost,
                    fair=fair,
                    # </gen_stubs>
                ):
                    return await fn(*args, **kwargs)

            return cast(_AF, locked)

        return decorate

    def semaphore(self, name: Name, permits: int) -> AsyncSemaphore:
        """As ``Client.semaphore``, with awaitable acquires."""
        return AsyncSemaphore(self, name, permits)

    def rw_lock(self, name: Name) -> AsyncRwLock:
        """As ``Client.rw_lock``, with awaitable acquires."""
        return AsyncRwLock(self, name)

    def list(self, pattern: Name = "*") -> AsyncIterator[Listed]:
        """``async for name, info in aclient.list(pattern)``: as
        :meth:`Client.list`."""
        step = self._list(pattern).next_async
        return _AEach(cast(Callable[[], Awaitable[Optional[Listed]]], step))

    def watch(self, name: Name, *, interval: float = 0.25) -> AsyncIterator[LockInfo]:
        """``async for info in aclient.watch(name)``: as :meth:`Client.watch`."""
        step = self._watch(name, interval).next_async
        return _AEach(cast(Callable[[], Awaitable[Optional[LockInfo]]], step))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()


_T = TypeVar("_T")


class _Each(Iterator[_T]):
    """Iterate a native cursor (the call that made it checked the
    arguments already) until it has nothing more."""

    __slots__ = ("_step",)

    def __init__(self, step: Callable[[], Optional[_T]]) -> None:
        self._step = step

    def __next__(self) -> _T:
        item = self._step()
        if item is None:
            raise StopIteration
        return item


class _AEach(AsyncIterator[_T]):
    """The same for asyncio. Cancelling a waiting ``__anext__`` loses
    nothing: the iterator goes on with the next call."""

    __slots__ = ("_step",)

    def __init__(self, step: Callable[[], Awaitable[Optional[_T]]]) -> None:
        self._step = step

    async def __anext__(self) -> _T:
        item = await self._step()
        if item is None:
            raise StopAsyncIteration
        return item


def _release_failed(lease: object, error: LockError, body_raised: bool) -> None:
    """A release error on exit is raised only if the body did not raise;
    otherwise the body's exception wins and the release error is logged."""
    if not body_raised:
        raise error
    _log.warning("releasing %r on exit failed: %s", lease, error)


_Held = TypeVar("_Held", Lease, LockGroup)
_AsyncHeld = TypeVar("_AsyncHeld", AsyncLease, AsyncLockGroup)


class _Context(Generic[_Held]):
    """A ``with`` context of what ``acquire`` returns: acquired on enter
    (each enter acquires again), released on exit."""

    __slots__ = ("_acquire", "_held")

    def __init__(self, acquire: Callable[[], _Held]) -> None:
        self._acquire: Callable[[], _Held] = acquire
        self._held: Optional[_Held] = None

    def __enter__(self) -> _Held:
        if self._held is not None:
            raise RuntimeError("this lock context is already entered")
        self._held = self._acquire()
        return self._held

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        try:
            held.release()
        except LockError as error:
            _release_failed(held, error, exc_type is not None)


class _AsyncContext(Generic[_AsyncHeld]):
    """An ``async with`` context of what ``acquire`` resolves to: awaited on
    enter (each enter acquires again), released on exit."""

    __slots__ = ("_acquire", "_held")

    def __init__(self, acquire: Callable[[], Awaitable[_AsyncHeld]]) -> None:
        self._acquire: Callable[[], Awaitable[_AsyncHeld]] = acquire
        self._held: Optional[_AsyncHeld] = None

    async def __aenter__(self) -> _AsyncHeld:
        if self._held is not None:
            raise RuntimeError("this lock context is already entered")
        self._held = await self._acquire()
        return self._held

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        try:
            await held.release()
        except LockError as error:
            _release_failed(held, error, exc_type is not None)


class Lock(_Context[Lease]):
    """``with client.lock(name, ttl=...) as lease:`` (see :meth:`Client.lock`)."""

    __slots__ = ()


class AsyncLock(_AsyncContext[AsyncLease]):
    """``async with aclient.lock(name, ttl=...) as lease:`` (see
    :meth:`AsyncClient.lock`)."""

    __slots__ = ()


class Locks(_Context[LockGroup]):
    """``with client.lock_many(names, ttl=...) as group:`` (see
    :meth:`Client.lock_many`)."""

    __slots__ = ()


class AsyncLocks(_AsyncContext[AsyncLockGroup]):
    """``async with aclient.lock_many(names, ttl=...) as group:`` (see
    :meth:`AsyncClient.lock_many`)."""

    __slots__ = ()


# Last: the primitives' handles use the contexts above.
from ._primitives import (  # noqa: E402
    AsyncRwLock,
    AsyncRwSide,
    AsyncSemaphore,
    RwLock,
    RwSide,
    Semaphore,
)
