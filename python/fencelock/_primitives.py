"""The semaphore and the read-write lock: handles made by ``client.semaphore()``
and ``client.rw_lock()`` whose acquires return the same ``Lease`` /
``AsyncLease`` as the mutex (fence, extend, release, auto-renewal,
``lost``/``on_lost``), through the one Rust implementation. Only what the
lease holds differs: a permit, a read lock or the write lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Union

from . import _native
from ._native import AsyncLease, Lease, LockInfo

if TYPE_CHECKING:  # the contexts live in the package module, which imports this one
    from . import AsyncLock, Lock

Name = Union[str, bytes, bytearray]


class _Side:
    """Acquires leases of one kind of one name (blocking API)."""

    __slots__ = ("_client", "_name", "_kind")

    def __init__(self, client: _native.Client, name: Name, kind: _native.Kind) -> None:
        self._client = client
        self._name = name
        self._kind = kind

    @property
    def name(self) -> Name:
        return self._name

    def acquire(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Lease:
        """Wait as ``wait`` allows (``None``: until acquired); ``NotAcquired``
        when it runs out. Ctrl-C leaves nothing held and leaves the line."""
        return self._client._acquire_as(
            self._kind,
            self._name,
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def try_acquire(
        self,
        ttl: float,
        *,
        # <gen_stubs params try lease=Lease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Optional[Lease]:
        """One attempt, without standing in line: the lease, or ``None``."""
        return self._client._try_acquire_as(
            self._kind,
            self._name,
            ttl,
            # <gen_stubs forward try>
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def lock(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Lock:
        """A context manager: acquires on enter, releases on exit (``LockLost``
        on exit only if the body did not raise)."""
        from . import Lock

        return Lock(
            lambda: self.acquire(
                ttl,
                # <gen_stubs forward>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                on_lost=on_lost,
                # </gen_stubs>
            )
        )


class _AsyncSide:
    """Acquires leases of one kind of one name (asyncio API)."""

    __slots__ = ("_client", "_name", "_kind")

    def __init__(self, client: _native.AsyncClient, name: Name, kind: _native.Kind) -> None:
        self._client = client
        self._name = name
        self._kind = kind

    @property
    def name(self) -> Name:
        return self._name

    async def acquire(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> AsyncLease:
        """As ``_Side.acquire``; cancelling the task leaves nothing held and
        leaves the line."""
        grant = await self._client._acquire_as(
            self._kind,
            self._name,
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )
        # Taken with no await in between: see AsyncClient.acquire.
        return grant._claim()

    async def try_acquire(
        self,
        ttl: float,
        *,
        # <gen_stubs params try lease=AsyncLease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> Optional[AsyncLease]:
        grant = await self._client._try_acquire_as(
            self._kind,
            self._name,
            ttl,
            # <gen_stubs forward try>
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )
        return None if grant is None else grant._claim()

    def lock(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> AsyncLock:
        """An async context manager: acquires on enter, releases on exit."""
        from . import AsyncLock

        return AsyncLock(
            lambda: self.acquire(
                ttl,
                # <gen_stubs forward>
                wait=wait,
                auto_renew=auto_renew,
                max_hold=max_hold,
                on_lost=on_lost,
                # </gen_stubs>
            )
        )


class Semaphore(_Side):
    """``client.semaphore(name, permits)``: up to ``permits`` leases at once,
    granted in arrival order across every process (a line on the server whose
    places expire with their waiter). Each permit is a ``Lease`` with its own
    fence. With Redlock a permit needs more than ``nodes * permits /
    (permits + 1)`` nodes (a bare majority would let one holder too many in)."""

    __slots__ = ()

    def __init__(self, client: _native.Client, name: Name, permits: int) -> None:
        super().__init__(client, name, _native.Kind.semaphore(permits))

    @property
    def permits(self) -> int:
        return self._kind.permits or 0

    def inspect(self) -> LockInfo:
        """What Redis says now (read-only): ``held`` while any permit is taken,
        ``ttl`` until the last one expires, the last ``fence``, and
        ``held_by_me`` when a lease of this client holds a permit."""
        return self._client._inspect_as(self._kind, self._name)

    def __repr__(self) -> str:
        return f"<fencelock.Semaphore name={self._name!r} permits={self.permits}>"


class AsyncSemaphore(_AsyncSide):
    """The asyncio ``Semaphore`` (``aclient.semaphore(name, permits)``)."""

    __slots__ = ()

    def __init__(self, client: _native.AsyncClient, name: Name, permits: int) -> None:
        super().__init__(client, name, _native.Kind.semaphore(permits))

    @property
    def permits(self) -> int:
        return self._kind.permits or 0

    async def inspect(self) -> LockInfo:
        return await self._client._inspect_as(self._kind, self._name)

    def __repr__(self) -> str:
        return f"<fencelock.AsyncSemaphore name={self._name!r} permits={self.permits}>"


class RwSide(_Side):
    """One side of a ``RwLock``: ``rw.reader`` or ``rw.writer``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<fencelock.RwSide {self._kind.noun} name={self._name!r}>"


class AsyncRwSide(_AsyncSide):
    """One side of an ``AsyncRwLock``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<fencelock.AsyncRwSide {self._kind.noun} name={self._name!r}>"


class RwLock:
    """``client.rw_lock(name)``: many readers or one writer. Writers are served
    in arrival order and a waiting writer holds new readers off (writer
    preference), so writers never starve. Every read and write lease has its
    own fence, from one counter."""

    __slots__ = ("reader", "writer")

    def __init__(self, client: _native.Client, name: Name) -> None:
        self.reader = RwSide(client, name, _native.Kind.read())
        self.writer = RwSide(client, name, _native.Kind.write())

    @property
    def name(self) -> Name:
        return self.reader.name

    def read(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Lock:
        """``with rw.read(ttl=...) as lease:`` (``rw.reader.lock``)."""
        return self.reader.lock(
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def write(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Lock:
        """``with rw.write(ttl=...) as lease:`` (``rw.writer.lock``)."""
        return self.writer.lock(
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def __repr__(self) -> str:
        return f"<fencelock.RwLock name={self.name!r}>"


class AsyncRwLock:
    """The asyncio ``RwLock`` (``aclient.rw_lock(name)``)."""

    __slots__ = ("reader", "writer")

    def __init__(self, client: _native.AsyncClient, name: Name) -> None:
        self.reader = AsyncRwSide(client, name, _native.Kind.read())
        self.writer = AsyncRwSide(client, name, _native.Kind.write())

    @property
    def name(self) -> Name:
        return self.reader.name

    def read(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> AsyncLock:
        """``async with rw.read(ttl=...) as lease:``."""
        return self.reader.lock(
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def write(
        self,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> AsyncLock:
        """``async with rw.write(ttl=...) as lease:``."""
        return self.writer.lock(
            ttl,
            # <gen_stubs forward>
            wait=wait,
            auto_renew=auto_renew,
            max_hold=max_hold,
            on_lost=on_lost,
            # </gen_stubs>
        )

    def __repr__(self) -> str:
        return f"<fencelock.AsyncRwLock name={self.name!r}>"
