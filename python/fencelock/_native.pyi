"""Type stubs of the compiled module ``fencelock._native`` (the PyO3 layer).

Use the re-exports in ``fencelock``; ``Client``/``AsyncClient`` there add
``lock()`` and the context-manager protocol.

The ``<gen_stubs ...>`` regions are written by ``python/tools/gen_stubs.py``
from its ``ACQUIRE`` table (checked by ``ci/test-python.sh``): edit the table.
"""

import asyncio
import os
from typing import Any, Callable, Iterable, List, Literal, Optional, Tuple, Union, final

__version__: str

_Name = Union[str, bytes, bytearray]
# A key, hash field or value of a fenced write.
_Data = Union[str, bytes, bytearray]
_Urls = Union[str, List[str], Tuple[str, ...]]
# PEM text (str or bytes) or a path to a PEM file.
_Pem = Union[str, bytes, "os.PathLike[str]"]

@final
class LockInfo:
    """What ``Client.inspect`` found in Redis; never carries a token."""

    @property
    def held(self) -> bool:
        """Someone holds the lock (a majority of the nodes, with Redlock)."""
    @property
    def ttl(self) -> Optional[float]:
        """The holder's remaining TTL in seconds; ``None`` when free."""
    @property
    def fence(self) -> Optional[int]:
        """The last fence issued while its key remains (the lock ttl plus
        ``fence_grace`` after the last grant: also after a release), else
        ``None``."""
    @property
    def held_by_me(self) -> bool:
        """The holder is a live lease of this client."""

class Lease:
    """A held lock (blocking API)."""

    @property
    def name(self) -> Union[str, bytes]:
        """The lock name, as given (``str`` or ``bytes``)."""
    @property
    def token(self) -> str:
        """The token stored in Redis (a UUID v4). Never shown by ``repr``."""
    @property
    def fence(self) -> int:
        """The fencing token: strictly increasing per lock name."""
    @property
    def ttl(self) -> float:
        """The lease's TTL in seconds."""
    @property
    def valid_for(self) -> float:
        """Seconds left before the lease must be assumed lost."""
    @property
    def lost(self) -> bool:
        """True once the lease is known to be lost."""
    def extend(self, ttl: Optional[float] = None) -> None:
        """Extend to ``ttl`` seconds from now (default: the lease's ttl).
        Raises ``LockLost`` if the lock is no longer held."""
    def release(self) -> None:
        """Release. ``LockLost`` if the lease was lost; a second call is a
        no-op."""
    def held(self) -> bool:
        """Ask Redis whether this lease still holds the lock (one read-only
        round trip): ``False`` once released, expired or taken over."""
    def fenced_set(self, key: _Data, value: _Data) -> None:
        """Fenced write: the hash ``key`` gets ``value`` (field ``value``)
        and this lease's fence (field ``fence``) unless it accepted a newer
        fence (``StaleFence``, nothing written). Equal fences pass (the same
        holder writing again). ``LockLost`` without sending if the lease is
        known lost or released; ``ValueError`` for an empty key or a Redlock
        client; ``RedisError`` if ``key`` is not a hash."""
    def fenced_hset(self, key: _Data, field: _Data, value: _Data) -> None:
        """``fenced_set`` of one field of the hash ``key`` (not ``fence``,
        which holds the key's last accepted fence: ``ValueError``)."""
    def on_lost(self, callback: Callable[["Lease"], object]) -> None:
        """Call ``callback(lease)`` (from a background thread) once the lease
        is lost. Not called after a successful release."""
    def stop_renewing(self) -> None:
        """Stop auto-renewal: the lease stays valid until its validity ends,
        then it is lost (``lost``, ``on_lost``) unless released or extended
        first (``extend`` still extends, once per call). Sends no command;
        idempotent; a no-op for a lease without ``auto_renew``."""

class AsyncLease:
    """A held lock (asyncio API)."""

    @property
    def name(self) -> Union[str, bytes]: ...
    @property
    def token(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def ttl(self) -> float: ...
    @property
    def valid_for(self) -> float: ...
    @property
    def lost(self) -> bool: ...
    def extend(self, ttl: Optional[float] = None) -> asyncio.Future[None]: ...
    def release(self) -> asyncio.Future[None]: ...
    def held(self) -> asyncio.Future[bool]: ...
    def fenced_set(self, key: _Data, value: _Data) -> asyncio.Future[None]: ...
    def fenced_hset(self, key: _Data, field: _Data, value: _Data) -> asyncio.Future[None]: ...
    def on_lost(self, callback: Callable[["AsyncLease"], object]) -> None:
        """Call ``callback(lease)`` in the event loop once the lease is lost."""
    def stop_renewing(self) -> None:
        """As ``Lease.stop_renewing``: a plain method, nothing to await."""

_Listed = Tuple[Union[str, bytes], LockInfo]
# A metric family: ("name", "help", "counter", [(labels, value), ...]) or
# ("name", "help", "histogram", [(upper bound, cumulative count), ...], count, sum).
_Family = Tuple[Any, ...]

@final
class Cursor:
    """The native side of ``Client.list`` / ``Client.watch`` (and the
    asyncio forms), which iterate it: one item per call."""

    def next(self) -> Optional[Union[_Listed, LockInfo]]:
        """The next item, blocking with the GIL released; ``None`` at the
        end of a list."""
    def next_async(self) -> asyncio.Future[Optional[Union[_Listed, LockInfo]]]: ...

@final
class Grant:
    """An asyncio acquire's lease before the awaiting task took it;
    released by the driver if it is dropped unclaimed."""

    def _claim(self) -> AsyncLease: ...

@final
class LockGroup:
    """Several locks held together (``Client.acquire_many``): each an
    ordinary ``Lease``, in the order the names were given."""

    @property
    def leases(self) -> Tuple[Lease, ...]: ...
    @property
    def lost(self) -> bool:
        """Whether any lease of the group is lost."""
    def release(self) -> None:
        """Release every lease; ``LockLost`` if one was lost (the others
        are released all the same). A second call is a no-op."""
    def __len__(self) -> int: ...

@final
class AsyncLockGroup:
    """``LockGroup`` for ``AsyncClient.acquire_many``: ``release`` is
    awaitable."""

    @property
    def leases(self) -> Tuple[AsyncLease, ...]: ...
    @property
    def lost(self) -> bool: ...
    def release(self) -> asyncio.Future[None]: ...
    def __len__(self) -> int: ...

@final
class GroupGrant:
    """An asyncio ``acquire_many``'s group before the awaiting task took
    it; released by the driver if it is dropped unclaimed."""

    def _claim(self) -> AsyncLockGroup: ...

@final
class FencedUpdate:
    """The statements of one fenced SQL update (``fencelock.sql`` runs them)."""

    def __init__(
        self,
        table: Union[str, Tuple[str, ...], List[str]],
        set: List[str],
        where: List[str],
        fence_column: str,
        paramstyle: str,
        fence: int,
        name: Optional[_Name],
    ) -> None: ...
    @property
    def update(self) -> str:
        """``UPDATE``; parameters: set values, fence, where values, fence."""
    @property
    def check(self) -> str:
        """``SELECT max(fence)``; parameters: where values."""
    def outcome(self, updated: int, newest: Optional[int]) -> int:
        """Rows updated, ``0`` for no row, or ``StaleFence`` if ``newest``
        (the check's answer) is newer than the writer's fence."""
class Kind:
    """What a lease holds: a semaphore permit, a read or a write lock
    (validated once, by ``client.semaphore()`` / ``client.rw_lock()``)."""

    @staticmethod
    def semaphore(permits: int) -> Kind: ...
    @staticmethod
    def read() -> Kind: ...
    @staticmethod
    def write() -> Kind: ...
    @property
    def permits(self) -> Optional[int]: ...
    @property
    def noun(self) -> str: ...

class Client:
    def __init__(
        self,
        url: _Urls,
        *,
        # <gen_stubs client-params>
        prefix: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        topology: Optional[Literal["cluster", "sentinel"]] = None,
        service: Optional[str] = None,
        replicas: Optional[int] = None,
        fence_grace: Optional[float] = None,
        tls_ca: Optional[_Pem] = None,
        tls_cert: Optional[_Pem] = None,
        tls_key: Optional[_Pem] = None,
        tls_server_name: Optional[str] = None,
        tls_dangerously_skip_verification: bool = False,
        # </gen_stubs>
    ) -> None: ...
    def acquire(
        self,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Lease: ...
    def try_acquire(
        self,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params try lease=Lease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> Optional[Lease]: ...
    def _acquire_as(
        self,
        kind: Kind,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params kinds lease=Lease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Lease: ...
    def _try_acquire_as(
        self,
        kind: Kind,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params kinds try lease=Lease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[Lease], object]] = None,
        # </gen_stubs>
    ) -> Optional[Lease]: ...
    def _inspect_as(self, kind: Kind, name: _Name) -> LockInfo: ...
    def inspect(self, name: _Name) -> LockInfo:
        """What Redis says about ``name`` now (read-only, one round trip per
        node; with Redlock the majority's view). A bad name raises as
        ``acquire`` does."""
    def force_release(self, name: _Name) -> int:
        """An operator's force-release: delete the lock whoever holds it,
        wake its waiters, and advance its fence past every fence issued, so
        fenced resources refuse the old holder. Returns the new fence; logs
        a warning naming this process and host."""
    def acquire_many(
        self,
        names: Iterable[_Name],
        ttl: float,
        *,
        # <gen_stubs params many>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> LockGroup:
        """Acquire every one of ``names`` (at most 64, none twice), all or
        nothing, waiting as ``wait`` allows; ``NotAcquired`` when the wait
        runs out (nothing of the group is held then)."""
    def try_acquire_many(
        self,
        names: Iterable[_Name],
        ttl: float,
        *,
        # <gen_stubs params many try>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> Optional[LockGroup]:
        """One attempt: the group, or ``None`` if any name is held."""
    def _list(self, pattern: _Name) -> Cursor: ...
    def _watch(self, name: _Name, interval: float) -> Cursor: ...
    def close(self) -> None:
        """Leases still held expire by their TTL; later acquires, and
        extend/release of this client's leases, raise ``ClientClosed``."""

class AsyncClient:
    def __init__(
        self,
        url: _Urls,
        *,
        # <gen_stubs client-params>
        prefix: Optional[str] = None,
        connect_timeout: Optional[float] = None,
        response_timeout: Optional[float] = None,
        topology: Optional[Literal["cluster", "sentinel"]] = None,
        service: Optional[str] = None,
        replicas: Optional[int] = None,
        fence_grace: Optional[float] = None,
        tls_ca: Optional[_Pem] = None,
        tls_cert: Optional[_Pem] = None,
        tls_key: Optional[_Pem] = None,
        tls_server_name: Optional[str] = None,
        tls_dangerously_skip_verification: bool = False,
        # </gen_stubs>
    ) -> None: ...
    def _acquire_many(
        self,
        names: Iterable[_Name],
        ttl: float,
        *,
        # <gen_stubs params many>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> asyncio.Future[GroupGrant]: ...
    def _try_acquire_many(
        self,
        names: Iterable[_Name],
        ttl: float,
        *,
        # <gen_stubs params many try>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        # </gen_stubs>
    ) -> asyncio.Future[Optional[GroupGrant]]: ...
    def _acquire(
        self,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> asyncio.Future[Grant]: ...
    def _try_acquire(
        self,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params try lease=AsyncLease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        fair: bool = False,
        # </gen_stubs>
    ) -> asyncio.Future[Optional[Grant]]: ...
    def _acquire_as(
        self,
        kind: Kind,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params kinds lease=AsyncLease>
        wait: Optional[float] = None,
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> asyncio.Future[Grant]: ...
    def _try_acquire_as(
        self,
        kind: Kind,
        name: _Name,
        ttl: float,
        *,
        # <gen_stubs params kinds try lease=AsyncLease>
        auto_renew: bool = False,
        max_hold: Optional[float] = None,
        on_lost: Optional[Callable[[AsyncLease], object]] = None,
        # </gen_stubs>
    ) -> asyncio.Future[Optional[Grant]]: ...
    def _inspect_as(self, kind: Kind, name: _Name) -> asyncio.Future[LockInfo]: ...
    def inspect(self, name: _Name) -> asyncio.Future[LockInfo]: ...
    def force_release(self, name: _Name) -> asyncio.Future[int]: ...
    def _list(self, pattern: _Name) -> Cursor: ...
    def _watch(self, name: _Name, interval: float) -> Cursor: ...
    def close(self) -> asyncio.Future[None]:
        """As ``Client.close``; pending acquires fail with ``ClientClosed``."""

def _after_fork_in_child() -> None: ...
def _metrics_enable() -> None: ...
def _metrics_snapshot() -> List[_Family]: ...
def _shutdown() -> None: ...
