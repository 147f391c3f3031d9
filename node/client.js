'use strict'
// The public Client and Lease classes over a backend handle: the napi addon
// (index.js) or the WebAssembly driver (wasm/driver.js), which implement the
// same small interface (acquire/tryAcquire/close, resolving to the lease
// handle or, when given a CancelHandle, to a grant whose claim() gives the
// handle, or null if the acquire was cancelled after the grant: the backend
// then releases it; lease getters, extend/release, lostMessage/watchLost; a
// CancelHandle class).
//
// Everything about locks happens in Rust (the driver or the wasm core). This
// file only does what has to be JavaScript: AbortSignal plumbing,
// Symbol.asyncDispose, withLock's callback, and hiding the token from
// util.inspect / toString / JSON.
const os = require('node:os')
const util = require('node:util')
const { fromNative } = require('./errors.js')
const primitives = require('./primitives.js')

const kCreate = Symbol('fencelock.create')

async function call(fn, lockName, fenced) {
  try {
    return await fn()
  } catch (err) {
    throw fromNative(err, lockName, fenced)
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

// A string with a lone surrogate has no UTF-8 form: converting it would
// turn the surrogate into U+FFFD, so two different names would be one lock.
function checkName(name) {
  if (typeof name === 'string' && !name.isWellFormed()) {
    const e = new RangeError('name must be a well-formed string (it contains a lone UTF-16 surrogate)')
    e.code = 'ERR_INVALID_ARG_VALUE'
    throw e
  }
}

// `options` as an object whose keys are all `known` (a misspelled key would
// otherwise be ignored); `{}` for undefined.
function knownOptions(what, options, known) {
  if (options === undefined) return {}
  const bad = (message) => {
    const e = new TypeError(message)
    e.code = 'ERR_INVALID_ARG_TYPE'
    return e
  }
  if (options === null || typeof options !== 'object') throw bad(`${what} must be an object`)
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw bad(`${what} has an unknown key ${JSON.stringify(key)} (known: ${known.join(', ')})`)
  }
  return options
}

// ------------------------------------------------------------------ lease

/** A held lock. Its token never appears in inspect, toString or JSON. */
class Lease {
  #native
  #name
  #controller = null

  constructor(key, handle, name) {
    if (key !== kCreate) throw new TypeError('Lease objects come from Client#acquire()')
    this.#native = handle
    // The string exactly as passed (a Buffer comes back as the backend's copy).
    this.#name = typeof name === 'string' ? name : handle.name
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
      const abort = (message) => controller.abort(fromNative(new Error(message), this.#name))
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
    return call(() => this.#native.extend(ttl), this.#name)
  }

  /** Release; LockLostError if it was lost; a second call is a no-op. */
  release() {
    // As call(), without its async frame: release is half of every cycle.
    const name = this.#name
    const toError = (err) => {
      throw fromNative(err, name)
    }
    try {
      return Promise.resolve(this.#native.release()).then(undefined, toError)
    } catch (err) {
      return Promise.reject(fromNative(err, name))
    }
  }

  /** Ask Redis whether this lease still holds the lock (read-only). */
  isHeld() {
    return call(() => this.#native.held(), this.#name)
  }

  /** Stop auto-renewal: the lease runs out at its validity end (no command; a no-op without autoRenew). */
  stopRenewing() {
    this.#native.stopRenewing()
  }

  /**
   * Fenced write: the hash `key` gets `value` (field `value`) and this
   * lease's fence (field `fence`) unless it accepted a newer fence
   * (StaleFenceError, nothing written). Equal fences pass.
   */
  fencedSet(key, value) {
    return call(() => this.#native.fencedSet(key, value), this.#name, { resource: key, fence: this.fence })
  }

  /** `fencedSet` of one field of the hash `key` (not `fence`). */
  fencedHSet(key, field, value) {
    return call(() => this.#native.fencedHset(key, field, value), this.#name, { resource: key, fence: this.fence })
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

// ------------------------------------------------------------------ group

/**
 * Several locks held together (`client.acquireMany`): `leases` in the order
 * the names were given, each an ordinary Lease; `release()` releases them all.
 */
class LockGroup {
  #native
  #leases

  constructor(key, handle, names) {
    if (key !== kCreate) throw new TypeError('LockGroup objects come from Client#acquireMany()')
    this.#native = handle
    this.#leases = Object.freeze(handle.leases().map((lease, i) => new Lease(kCreate, lease, names[i])))
  }

  /** The leases, in the order the names were given (a frozen array). */
  get leases() {
    return this.#leases
  }
  /** True once any lease of the group is known to be lost. */
  get lost() {
    return this.#leases.some((lease) => lease.lost)
  }

  /** Release every lease; LockLostError if one was lost (the others are released all the same). */
  release() {
    return call(() => this.#native.release(), this.#leases.map((lease) => lease.name))
  }

  [Symbol.asyncDispose]() {
    return this.release()
  }

  [util.inspect.custom](depth, options, inspect) {
    if (depth < 0) return '[LockGroup]'
    return `LockGroup ${(inspect ?? util.inspect)([...this.#leases], { ...options, depth: options.depth == null ? null : options.depth - 1 })}`
  }

  toString() {
    return `LockGroup(${this.#leases.map(String).join(', ')})`
  }

  toJSON() {
    return this.#leases.map((lease) => lease.toJSON())
  }
}
Object.defineProperty(LockGroup.prototype, Symbol.toStringTag, { value: 'LockGroup' })

// ------------------------------------------------------------------ client

/** A native LockInfo as the frozen `{ held, ttl, fence, heldByMe }` of the API. */
function lockInfo(info) {
  return Object.freeze({
    held: info.held,
    ttl: info.ttl ?? null,
    fence: info.fence ?? null,
    heldByMe: info.heldByMe,
  })
}

/**
 * An async iterator over `next()` (null ends it). Not a generator: a
 * `for await` that breaks, or a step given up on, leaves nothing behind,
 * and a later `next()` goes on where the cursor is.
 */
function steps(next) {
  let done = false
  return {
    async next() {
      if (done) return { done: true, value: undefined }
      const value = await next()
      if (value === null) done = true
      return value === null ? { done: true, value: undefined } : { done: false, value }
    },
    async return() {
      done = true
      return { done: true, value: undefined }
    },
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

/**
 * A lock client over one backend handle. The flavours subclass it with their
 * constructor: `Client.connect(url)` (index.js), `Client.fromRedis(redis)`
 * (wasm/index.js).
 */
class Client {
  #native
  #CancelHandle
  #Kind
  #closed = false

  constructor(key, handle, CancelHandle, Kind) {
    if (key !== kCreate) throw new TypeError(`use ${new.target.howToCreate} to create a Client`)
    this.#native = handle
    this.#CancelHandle = CancelHandle
    this.#Kind = Kind
  }

  /** Acquire `name`, waiting up to `options.wait` ms (forever if undefined). */
  acquire(name, options) {
    return this.#acquire('acquire', name, options)
  }

  /** One attempt: the lease, or null if someone else holds the lock. */
  tryAcquire(name, options) {
    return this.#acquire('tryAcquire', name, options)
  }

  /**
   * Acquire every one of `names` (an array, at most 64, none twice), all or
   * nothing, waiting up to `options.wait` ms: a LockGroup. NotAcquiredError
   * when the wait runs out (nothing of the group is held then).
   */
  acquireMany(names, options) {
    return this.#acquireMany('acquireMany', names, options)
  }

  /** One attempt of acquireMany: the group, or null if any name is held. */
  tryAcquireMany(names, options) {
    return this.#acquireMany('tryAcquireMany', names, options)
  }

  /**
   * Run `fn(group)` holding every one of `names`; release them all on every
   * exit path (LockLostError if one was lost while fn ran, unless fn threw).
   */
  async withLocks(names, options, fn) {
    return primitives.withLease(() => this.acquireMany(names, options), fn)
  }

  async #acquireMany(method, names, options) {
    if (typeof this.#native[method] !== 'function') {
      const e = new TypeError(`client.${method}() is not available in fencelock/wasm: use the native client`)
      e.code = 'ERR_FENCELOCK_UNSUPPORTED'
      throw e
    }
    if (!Array.isArray(names)) {
      const e = new TypeError('names must be an array of lock names')
      e.code = 'ERR_INVALID_ARG_TYPE'
      throw e
    }
    names.forEach(checkName)
    const handle = await this.#start(
      options,
      (cancel) => this.#native[method](names, options, cancel),
      (err) => fromNative(err, names),
    )
    return handle == null ? null : new LockGroup(kCreate, handle, names)
  }

  /**
   * A counting semaphore of `options.permits` permits (a whole number from 1
   * to 1,000,000: RangeError outside, TypeError for a non-number). Its keys
   * live beside a mutex of the same name, never shared with it.
   */
  semaphore(name, options) {
    checkName(name)
    const { permits } = knownOptions('options', options, ['permits'])
    const kind = this.#kindOf('semaphore', permits)
    return new primitives.Semaphore(primitives.kCreate, this, name, kind)
  }

  /** A read-write lock: `rw.reader` (shared) and `rw.writer` (exclusive). */
  rwLock(name) {
    checkName(name)
    return new primitives.RwLock(primitives.kCreate, this, name, this.#kindOf('read'), this.#kindOf('write'))
  }

  #kindOf(what, permits) {
    try {
      return new this.#Kind(what, permits)
    } catch (err) {
      throw fromNative(err)
    }
  }

  [primitives.kAcquireAs](method, name, options, kind) {
    return this.#acquire(method, name, options, kind)
  }

  async [primitives.kInspectAs](name, kind) {
    return this.#inspect(name, kind)
  }

  #acquire(method, name, options, kind) {
    let signal
    try {
      checkName(name)
      signal = signalOf(options)
    } catch (err) {
      return Promise.reject(err)
    }
    if (signal !== undefined) return this.#acquireSignalled(method, name, options, kind)
    // No signal (the usual call): the backend's promise, mapped once, with
    // no async frames in between (each was a promise and a microtask more).
    let started
    try {
      started = this.#native[method](name, options, undefined, kind)
    } catch (err) {
      return Promise.reject(fromNative(err, name))
    }
    return started.then(
      (handle) => (handle == null ? null : new Lease(kCreate, handle, name)),
      (err) => {
        throw fromNative(err, name)
      },
    )
  }

  async #acquireSignalled(method, name, options, kind) {
    const handle = await this.#start(
      options,
      (cancel) => this.#native[method](name, options, cancel, kind),
      (err) => fromNative(err, name),
    )
    return handle == null ? null : new Lease(kCreate, handle, name)
  }

  /**
   * An acquire's native `start(cancel)` under `options.signal`: the
   * handle, or null (a try that found the lock held). Abort -> backend
   * cancel -> the driver gives up the acquire and sends a compensating
   * release if the request may have reached Redis, or, if the lock was
   * granted already, claim() below refuses and it is released.
   */
  async #start(options, start, toError) {
    const signal = signalOf(options)
    signal?.throwIfAborted()
    const cancel = signal ? new this.#CancelHandle() : undefined
    const onAbort = () => cancel.cancel()
    signal?.addEventListener('abort', onAbort, { once: true })
    let grant
    try {
      grant = await start(cancel)
    } catch (err) {
      if (signal?.aborted) throw signal.reason
      throw toError(err)
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
    if (grant == null) return null
    // With a signal the backend answers with a grant to claim: null if the
    // signal aborted after the grant (the backend then releases the lock).
    const handle = cancel === undefined ? grant : grant.claim()
    if (handle == null) throw signal.reason
    return handle
  }

  /**
   * What Redis says about `name` now, read-only: `{ held, ttl, fence,
   * heldByMe }` (`ttl` ms or null, `fence` bigint or null; never a token).
   */
  async inspect(name) {
    return this.#inspect(name, undefined)
  }

  async #inspect(name, kind) {
    checkName(name)
    return lockInfo(await call(() => this.#native.inspect(name, kind), name))
  }
  /**
   * An operator's force-release: delete the lock whoever holds it, wake its
   * waiters and advance its fence past every fence issued, so fenced
   * resources refuse the old holder. Resolves to the new fence (bigint).
   * Audited: a process warning (code FENCELOCK_FORCE_RELEASE) names the
   * lock, the fence, this pid and host.
   */
  async forceRelease(name) {
    checkName(name)
    const fence = await call(() => this.#native.forceRelease(name), name)
    process.emitWarning(`lock ${JSON.stringify(String(name))} force-released (fence ${fence}) by pid ${process.pid} on ${os.hostname()}`, { code: 'FENCELOCK_FORCE_RELEASE' })
    return fence
  }


  /**
   * The locks held now whose names match `pattern` (Redis's glob syntax over
   * lock names: `*`, `?`, `[a-z]`, `\` escapes; default `'*'`), as an async
   * iterator of `{ name, info }` in name order (`info` as from `inspect`;
   * `name` a string, or a Buffer if the pattern was one or the name is not
   * UTF-8). Found with SCAN on every node (every primary of a cluster),
   * never KEYS; read-only. A bad pattern throws here, at the call.
   */
  list(pattern = '*') {
    checkName(pattern)
    const cursor = this.#operatorTool('list', pattern, () => this.#native.list(pattern))
    return steps(async () => {
      const item = await call(() => cursor.next(), pattern)
      return item == null ? null : { name: item.name, info: lockInfo(item.info) }
    })
  }

  /**
   * Follow `name`: an async iterator of its `LockInfo` now, then one each
   * time its holder or fence changes (acquired, released, expired,
   * force-released; renewals are not changes). Releases are heard at once;
   * Redis is asked again every `options.interval` ms (default 250) and when
   * the holder's TTL runs out. Endless: `break` to stop watching.
   */
  watch(name, options) {
    checkName(name)
    const cursor = this.#operatorTool('watch', name, () => this.#native.watch(name, options))
    return steps(async () => lockInfo(await call(() => cursor.next(), name)))
  }

  #operatorTool(method, name, open) {
    if (typeof this.#native[method] !== 'function') {
      const e = new TypeError(`client.${method}() is not available in fencelock/wasm: use the native client or the fencelock CLI`)
      e.code = 'ERR_FENCELOCK_UNSUPPORTED'
      throw e
    }
    try {
      return open()
    } catch (err) {
      throw fromNative(err, name)
    }
  }

  /**
   * Run `fn(lease)` holding the lock; release on every exit path. Rejects
   * with LockLostError if the lease was lost while fn ran (unless fn threw).
   */
  async withLock(name, options, fn) {
    return primitives.withLease(() => this.acquire(name, options), fn)
  }

  /** Stop the client; held leases expire by their TTL. */
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

module.exports = { Client, Lease, LockGroup, kCreate }
