'use strict'
// The error classes of both flavours (`fencelock` and `fencelock/wasm`), one
// instance of each so `instanceof` works across them, and the one rule that
// maps the Rust side's tagged messages (`CODE: text`, from bindings/node and
// bindings/wasm alike) to them.

/** Base class of every lock outcome error (not of argument errors). */
class LockError extends Error {
  constructor(message, options) {
    super(message, options)
    Object.defineProperty(this, 'name', {
      value: new.target.name,
      enumerable: false,
      configurable: true,
      writable: true,
    })
  }
}

/** The lock was not acquired within the allowed wait. */
class NotAcquiredError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'NOT_ACQUIRED'
  }
}

/** The lease is no longer held (expired, taken over, or renewal failed). */
class LockLostError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'LOCK_LOST'
  }
}

/** Redis was unreachable or answered with an error. */
class RedisError extends LockError {
  constructor(message, options) {
    super(message, options)
    this.code = 'REDIS'
  }
}

// The native side prefixes every message with its kind (see
// bindings/node/src/lib.rs): the one rule that maps Rust errors to JS.
const TAGGED = /^(NOT_ACQUIRED|LOCK_LOST|REDIS|INVALID_ARGUMENT|INVALID_TYPE|ABORTED): ([\s\S]*)$/

function fromNative(err) {
  const match = err instanceof Error ? TAGGED.exec(err.message) : null
  if (!match) return err
  const [, code, message] = match
  switch (code) {
    case 'NOT_ACQUIRED':
      return new NotAcquiredError(message)
    case 'LOCK_LOST':
      return new LockLostError(message)
    case 'REDIS':
      return new RedisError(message)
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

module.exports = { LockError, NotAcquiredError, LockLostError, RedisError, fromNative }
