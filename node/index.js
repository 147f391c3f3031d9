'use strict'
// fencelock for Node.js: a thin Promise API over the Rust driver.
//
// Everything about locks (names, TTLs, waiting, fencing, renewal, release)
// happens in Rust (bindings/node -> fencelock -> fencelock-core). This file
// only does what has to be JavaScript: error classes, AbortSignal plumbing,
// Symbol.asyncDispose, withLock's callback, and hiding the token from
// util.inspect / toString / JSON.
const util = require('node:util')
const native = require('./native.js')

const kCreate = Symbol('fencelock.create')

// ------------------------------------------------------------------ errors

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

async function call(fn) {
  try {
    return await fn()
  } catch (err) {
    throw fromNative(err)
  }
}

function signalOf(options) {
  const signal = options !== null && typeof options === 'object' ? options.signal : undefined
  if (signal === undefined || signal === null) return undefined
  if (!(signal instanceof AbortSignal)) {
    const e = new TypeError('options.signal must be an AbortSignal')
    e.code = 'ERR_INVALID_ARG_TYPE'
    throw e
  }
  return signal
}

// ------------------------------------------------------------------ lease

/** A held lock. Its token never appears in inspect, toString or JSON. */
class Lease {
  #native
  #name
  #controller = null

  constructor(key, handle) {
    if (key !== kCreate) throw new TypeError('Lease objects come from Client#acquire()')
    this.#native = handle
    this.#name = handle.name
  }

  /** The lock name, as given to acquire (string or Buffer). */
  get name() {
    return this.#name
  }
  /** The random token stored in Redis (a UUID v4). Readable, never printed. */
  get token() {
    return this.#native.token
  }
  /** Fencing token: strictly increasing per lock name. */
  get fence() {
    return this.#native.fence
  }
  /** The TTL this lease was taken (and is extended) with, in ms. */
  get ttl() {
    return this.#native.ttl
  }
  /** Milliseconds left before the lease must be assumed lost. */
  get validFor() {
    return this.#native.validFor
  }
  /** True once the lease is known to be lost. */
  get lost() {
    return this.#native.lost || this.#controller?.signal.aborted === true
  }
  /** Aborted (with a LockLostError as reason) when the lease is lost. */
  get signal() {
    // Created on first use: leases nobody watches cost no watcher.
    if (this.#controller === null) {
      const controller = (this.#controller = new AbortController())
      const abort = (message) => controller.abort(fromNative(new Error(message)))
      const lost = this.#native.lostMessage()
      if (lost !== null) {
        abort(lost)
      } else {
        // Called once, from Rust, when the driver reports the loss. The
        // callback holds only the controller, so an unreleased lease can
        // still be garbage-collected; it never keeps the process alive.
        this.#native.watchLost(abort)
      }
    }
    return this.#controller.signal
  }

  /** Extend to `ttl` ms from now (default: the lease's ttl). */
  extend(ttl) {
    return call(() => this.#native.extend(ttl))
  }

  /** Release; LockLostError if it was lost; a second call is a no-op. */
  release() {
    return call(() => this.#native.release())
  }

  [Symbol.asyncDispose]() {
    return this.release()
  }

  #visible() {
    return { name: this.#name, fence: this.fence, validFor: this.validFor, lost: this.lost }
  }

  [util.inspect.custom](depth, options, inspect) {
    if (depth < 0) return '[Lease]'
    return `Lease ${(inspect ?? util.inspect)(this.#visible(), { ...options, depth: options.depth == null ? null : options.depth - 1 })}`
  }

  toString() {
    const name = typeof this.#name === 'string' ? JSON.stringify(this.#name) : `<Buffer ${this.#name.length} bytes>`
    return `Lease(name=${name}, fence=${this.fence})`
  }

  toJSON() {
    const { name, fence, validFor, lost } = this.#visible()
    return {
      name: typeof name === 'string' ? name : name.toString('base64'),
      fence: fence.toString(),
      validFor,
      lost,
    }
  }
}
Object.defineProperty(Lease.prototype, Symbol.toStringTag, { value: 'Lease' })

// ------------------------------------------------------------------ client

/** A connection to one Redis (URL) or to N independent nodes (Redlock). */
class Client {
  #native
  #closed = false

  constructor(key, handle) {
    if (key !== kCreate) throw new TypeError('use `await Client.connect(url)` to create a Client')
    this.#native = handle
  }

  /** Connect to a Redis URL, or to an array of independent nodes (Redlock). */
  static async connect(urls, options) {
    const handle = await call(() => native.connect(urls, options))
    return new Client(kCreate, handle)
  }

  /** Acquire `name`, waiting up to `options.wait` ms (forever if undefined). */
  acquire(name, options) {
    return this.#acquire('acquire', name, options)
  }

  /** One attempt: the lease, or null if someone else holds the lock. */
  tryAcquire(name, options) {
    return this.#acquire('tryAcquire', name, options)
  }

  async #acquire(method, name, options) {
    const signal = signalOf(options)
    signal?.throwIfAborted()
    // Abort -> native cancel -> the Rust future is dropped, and the driver
    // sends a compensating release if the request may have reached Redis.
    const cancel = signal ? new native.CancelHandle() : undefined
    const onAbort = () => cancel.cancel()
    signal?.addEventListener('abort', onAbort, { once: true })
    let handle
    try {
      handle = await this.#native[method](name, options, cancel)
    } catch (err) {
      if (signal?.aborted) throw signal.reason
      throw fromNative(err)
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
    if (handle == null) return null
    if (signal?.aborted) {
      // The abort raced the lock being granted: give it back, then report
      // the abort the caller asked for.
      await handle.release().catch(() => {})
      throw signal.reason
    }
    return new Lease(kCreate, handle)
  }

  /**
   * Run `fn(lease)` holding the lock; release on every exit path. Rejects
   * with LockLostError if the lease was lost while fn ran (unless fn threw).
   */
  async withLock(name, options, fn) {
    if (typeof fn !== 'function') {
      const e = new TypeError('withLock needs a callback function as its third argument')
      e.code = 'ERR_INVALID_ARG_TYPE'
      throw e
    }
    const lease = await this.acquire(name, options)
    let result
    try {
      result = await fn(lease)
    } catch (err) {
      await lease.release().catch(() => {})
      throw err
    }
    await lease.release()
    return result
  }

  /** Close the connections; held leases expire by their TTL. */
  async close() {
    if (this.#closed) return
    this.#closed = true
    await call(() => this.#native.close())
  }

  [Symbol.asyncDispose]() {
    return this.close()
  }

  [util.inspect.custom]() {
    return `Client { closed: ${this.#closed} }`
  }
}
Object.defineProperty(Client.prototype, Symbol.toStringTag, { value: 'Client' })

module.exports = {
  Client,
  Lease,
  LockError,
  NotAcquiredError,
  LockLostError,
  RedisError,
}
