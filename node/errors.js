'use strict'
// The error classes of both flavours (`fencelock` and `fencelock/wasm`), one
// instance of each so `instanceof` works across them, and the one rule that
// maps the Rust side's tagged messages (`CODE: text`, from bindings/node and
// bindings/wasm alike) to them.

/**
 * Base class of every lock outcome error (not of argument errors).
 * `lockName`: the lock's name as given to acquire (string or Buffer), or
 * undefined for an error of the client as a whole. (`name` is the class
 * name, as on every Error.)
 */
class LockError extends Error {
  constructor(message, options) {
    super(message, options)
    Object.defineProperty(this, 'name', {
      value: new.target.name,
      enumerable: false,
      configurable: true,
      writable: true,
    })
    this.lockName = options?.lockName
  }
}

/**
 * The lock was not acquired within the allowed wait. `reason`: 'held'
 * (someone else held it), 'unreachable' (too few Redlock nodes answered) or
 * 'replicas' (too few replicas acknowledged).
 */
class NotAcquiredError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'NOT_ACQUIRED'
    this.reason = options?.reason ?? 'held'
  }
}

/** The lease is no longer held (expired, taken over, or renewal failed). */
class LockLostError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'LOCK_LOST'
  }
}

/**
 * A fenced write was refused: the resource already accepted a newer fence
 * (a newer holder wrote, or the lock was force-released), so nothing was
 * written. A LockLostError: stop working as the holder. `resource`: the
 * Redis key or SQL table; `fence`: the refused fence; `accepted`: the newer
 * one the resource holds (bigints). `lockName` is undefined when a bare
 * fence, not a lease, was passed to fencelock/sql.
 */
class StaleFenceError extends LockLostError {
  constructor(message, options) {
    super(message, options)
    this.code = 'STALE_FENCE'
    this.resource = options?.resource
    this.fence = options?.fence
    this.accepted = options?.accepted
  }
}

/** Redis was unreachable or answered with an error. */
class RedisError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'REDIS'
  }
}

/**
 * The client was closed: before the call, or while an acquire waited. A
 * RedisError (what a closed client rejected with before this class
 * existed), so `instanceof RedisError` still holds; `code` tells them apart.
 */
class ClientClosedError extends RedisError {
  constructor(message, options) {
    super(message, options)
    this.code = 'CLIENT_CLOSED'
  }
}

// The native side prefixes every message with its kind (see
// bindings/node/src/lib.rs): the one rule that maps Rust errors to JS.
// NotAcquired carries its reason: `NOT_ACQUIRED(held): ...`, StaleFence
// the accepted fence: `STALE_FENCE(7): ...`; a call on several names which
// of them the error is about: `NOT_ACQUIRED(held)[1]: ...`.
const TAGGED = /^(NOT_ACQUIRED|LOCK_LOST|STALE_FENCE|REDIS|CLIENT_CLOSED|INVALID_ARGUMENT|INVALID_TYPE|ABORTED)(?:\((\w+)\))?(?:\[(\d+)\])?: ([\s\S]*)$/

/**
 * `lockName`: the name the failed call was about, if any, or for a call on
 * several names their array (the tag's `[i]` picks the one, as the caller
 * gave it); `fenced`: `{ resource, fence }` of a fenced write (a
 * StaleFenceError carries them).
 */
function fromNative(err, lockName, fenced) {
  const match = err instanceof Error ? TAGGED.exec(err.message) : null
  if (!match) return err
  const [, code, reason, index, message] = match
  if (Array.isArray(lockName)) lockName = index === undefined ? undefined : lockName[Number(index)]
  switch (code) {
    case 'NOT_ACQUIRED':
      return new NotAcquiredError(message, { lockName, reason })
    case 'LOCK_LOST':
      return new LockLostError(message, { lockName })
    case 'STALE_FENCE':
      return new StaleFenceError(message, { lockName, ...fenced, accepted: BigInt(reason) })
    case 'REDIS':
      return new RedisError(message, { lockName })
    case 'CLIENT_CLOSED':
      return new ClientClosedError(message, { lockName })
    case 'INVALID_TYPE': {
      const e = new TypeError(message)
      e.code = 'ERR_INVALID_ARG_TYPE'
      return e
    }
    case 'INVALID_ARGUMENT': {
      const e = new RangeError(message)
      e.code = 'ERR_INVALID_ARG_VALUE'
      return e
    }
    default: {
      const e = new Error(message)
      e.name = 'AbortError'
      e.code = 'ABORT_ERR'
      return e
    }
  }
}

module.exports = { LockError, NotAcquiredError, LockLostError, StaleFenceError, RedisError, ClientClosedError, fromNative }
