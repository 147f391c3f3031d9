"""fencelock's exceptions (the README's error table).

Bad arguments raise the built-in ``ValueError`` / ``TypeError`` before any
Redis call, and a call the object's state does not allow (a lease used in a
forked child, a lock context entered twice) the built-in ``RuntimeError``.
Everything else derives from :class:`LockError`. Messages name the lock and
the cause, never a token or a password.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

__all__ = ["LockError", "NotAcquired", "LockLost", "StaleFence", "RedisError", "ClientClosed"]


class LockError(Exception):
    """Base class of every fencelock error except bad arguments.

    ``name``: the lock's name (``str``, or ``bytes`` if it is not UTF-8), or
    ``None`` for an error of the client as a whole. Never the token.
    """

    name: Optional[Union[str, bytes]] = None


class NotAcquired(LockError, TimeoutError):
    """The lock was not acquired within the allowed ``wait``.

    ``reason``: ``"held"`` (someone else held it until the wait ran out),
    ``"unreachable"`` (too few Redlock nodes answered, message says how many)
    or ``"replicas"`` (too few replicas acknowledged).
    """

    reason: Literal["held", "unreachable", "replicas"] = "held"


class LockLost(LockError):
    """The lease is no longer held (expired, taken over, or renewal failed)."""


class StaleFence(LockLost):
    """A fenced write was refused: the resource already accepted a newer
    fence than this one (a newer holder of the lock wrote, or an operator
    force-released it), so nothing was written. A :class:`LockLost`: stop
    working as the holder.

    ``resource``: the Redis key (``str``, or ``bytes`` if not UTF-8) or the
    SQL table; ``fence``: the refused fence; ``accepted``: the newer fence
    the resource holds. ``name`` is the lock's, or ``None`` when a bare fence
    (not a lease) was passed to :func:`fencelock.sql.fenced_update`.
    """

    resource: Optional[Union[str, bytes]] = None
    fence: int = 0
    accepted: int = 0


class RedisError(LockError):
    """Redis was unreachable or answered with an error."""


class ClientClosed(RedisError):
    """The client was closed: before the call, or while an acquire waited.

    The message names the call (``cannot acquire lock "x": the client is
    closed``). A subclass of :class:`RedisError`, which a closed client raised
    before this class existed, so ``except RedisError`` still catches it.
    """
