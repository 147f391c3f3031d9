"""fencelock's exceptions (the README's error table).

Bad arguments raise the built-in ``ValueError`` / ``TypeError`` before any
Redis call. Everything else derives from :class:`LockError`. Messages name the
lock and the cause, never a token or a password.
"""

from __future__ import annotations

__all__ = ["LockError", "NotAcquired", "LockLost", "RedisError"]


class LockError(Exception):
    """Base class of every fencelock error except bad arguments."""


class NotAcquired(LockError, TimeoutError):
    """The lock was not acquired within the allowed ``wait``."""


class LockLost(LockError):
    """The lease is no longer held (expired, taken over, or renewal failed)."""


class RedisError(LockError):
    """Redis was unreachable or answered with an error."""
