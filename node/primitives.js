'use strict'
// The semaphore and the read-write lock: handles made by `client.semaphore()`
// and `client.rwLock()` whose acquires resolve to the same Lease as the
// mutex (fence, extend, release, autoRenew, `lease.signal`), through the one
// Rust core. Only what the lease holds differs: a permit, a read lock or the
// write lock. Like client.js, nothing here decides anything about locks.

const kCreate = Symbol('fencelock.primitive')

/** Acquires leases of one kind of one name. */
class LockSide {
  #client
  #name
  #kind

  constructor(key, client, name, kind) {
    if (key !== kCreate) throw new TypeError('use client.semaphore() or client.rwLock()')
    this.#client = client
    this.#name = name
    this.#kind = kind
  }

  /** The name, as given. */
  get name() {
    return this.#name
  }

  /** Wait up to `options.wait` ms (forever if undefined); an aborted signal leaves nothing held and leaves the line. */
  acquire(options) {
    return this.#client[kAcquireAs]('acquire', this.#name, options, this.#kind)
  }

  /** One attempt, without standing in line: the lease, or null. */
  tryAcquire(options) {
    return this.#client[kAcquireAs]('tryAcquire', this.#name, options, this.#kind)
  }

  /** Run `fn(lease)` holding a lease; released on every exit path (see Client#withLock). */
  async withLock(options, fn) {
    return withLease(() => this.acquire(options), fn)
  }

  /** Read-only: `{ held, ttl, fence, heldByMe }` of this kind's holders. */
  inspect() {
    return this.#client[kInspectAs](this.#name, this.#kind)
  }

  get [Symbol.toStringTag]() {
    return this.constructor.name
  }
}

/**
 * `client.semaphore(name, { permits })`: up to `permits` leases at once,
 * granted in arrival order across every process. Each permit is a Lease
 * with its own fence.
 */
class Semaphore extends LockSide {
  #permits

  constructor(key, client, name, kind) {
    super(key, client, name, kind)
    this.#permits = kind.permits
  }

  /** The number of permits. */
  get permits() {
    return this.#permits
  }
}

/** `rwLock.reader` or `rwLock.writer`. */
class RwSide extends LockSide {}

/**
 * `client.rwLock(name)`: many readers (`reader`) or one writer (`writer`);
 * a waiting writer holds new readers off, so writers never starve.
 */
class RwLock {
  #name

  constructor(key, client, name, read, write) {
    if (key !== kCreate) throw new TypeError('use client.rwLock()')
    this.#name = name
    /** Read leases: shared. */
    this.reader = new RwSide(key, client, name, read)
    /** The write lease: exclusive. */
    this.writer = new RwSide(key, client, name, write)
    Object.freeze(this)
  }

  get name() {
    return this.#name
  }
}

/**
 * Run `fn(lease)` holding the lease `acquire()` resolves to; release on
 * every exit path. Rejects with LockLostError if the lease was lost while fn
 * ran (unless fn threw).
 */
async function withLease(acquire, fn) {
  if (typeof fn !== 'function') {
    const e = new TypeError('withLock needs a callback function as its last argument')
    e.code = 'ERR_INVALID_ARG_TYPE'
    throw e
  }
  const lease = await acquire()
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

// The client's entries for these handles (client.js implements them).
const kAcquireAs = Symbol('fencelock.acquireAs')
const kInspectAs = Symbol('fencelock.inspectAs')

module.exports = { LockSide, Semaphore, RwLock, RwSide, withLease, kAcquireAs, kInspectAs, kCreate }
