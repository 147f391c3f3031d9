"""fencelock's exceptions (the README's error table).

Bad arguments raise the built-in ``ValueError`` / ``TypeError`` before any
Redis call. Everything else derives from :class:`LockError`. Messages name the
lock and the cause, never a token or a password.
"""

from __future__ import annotations

from typing import Literal, Optional, Union

__all__ = ["LockError", "NotAcquired", "LockLost", "RedisError"]


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


class RedisError(LockError):
    """Redis was unreachable or answered with an error."""
