'use strict'
// The WebAssembly flavour's IO driver: the JavaScript twin of the Rust
// driver's lease actor (bindings/driver/src/driver.rs). One Actor pumps one
// core lock: it runs the core's commands on the application's Redis clients
// (EVALSHA, EVAL on NOSCRIPT), feeds the replies, release notifications and
// timer expiries back unchanged, and turns the core's events into promises.
// Every decision about locks is the core's (bindings/wasm -> fencelock-core).
//
// The objects here implement the backend interface of ../client.js, so the
// public Client and Lease classes are the very ones of the native flavour.
const { randomUUID, getRandomValues } = require('node:crypto')
const { Buffer } = require('node:buffer')
const { performance } = require('node:perf_hooks')
const core = require('./core.js')
const { NameQueues } = require('./queue.js')
const { Notifier } = require('./notifier.js')

/** What a plain acquire holds: the mutex. */
const MUTEX = new core.Kind('mutex')

/** The core's clock: monotonic milliseconds. */
const now = () => performance.now()

const buffer = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

// Jitter seeds for the core, drawn from the CSPRNG 256 at a time (one
// getRandomValues call per acquire cost ~3% of the CPU of a cycle).
const seeds = new BigUint64Array(256)
let nextSeed = seeds.length
function seed() {
  if (nextSeed === seeds.length) {
    getRandomValues(seeds)
    nextSeed = 0
  }
  return seeds[nextSeed++]
}

/** Lock timers never keep the process alive (as with the native addon). */
function unrefTimer(timer) {
  if (typeof timer?.unref === 'function') timer.unref()
  else if (typeof Deno !== 'undefined') Deno.unrefTimer(timer) // eslint-disable-line no-undef
  return timer
}

/** Cancels one pending acquire (the caller's AbortSignal fired). */
class CancelHandle {
  #listeners = []
  cancelled = false

  cancel() {
    if (this.cancelled) return
    this.cancelled = true
    for (const fn of this.#listeners.splice(0)) fn()
  }

  onCancel(fn) {
    if (this.cancelled) queueMicrotask(fn)
    else this.#listeners.push(fn)
  }
}

/**
 * Runs one core command on its node: `[kind, value]` with kind `reply`,
 * `error` (the server refused) or `unknown` (it may have run).
 */
function run(adapter, command, responseTimeout) {
  const keys = command.keys.map(buffer)
  const args = command.args.map(buffer)
  const attempt = command.waitReplicas === undefined ? () => script(adapter, command, keys, args) : () => scriptThenWait(adapter, command, keys, args)
  let timer
  const late = new Promise((resolve) => {
    timer = unrefTimer(setTimeout(() => resolve(['unknown', `no reply within ${responseTimeout} ms`]), responseTimeout))
  })
  return Promise.race([attempt(), late]).finally(() => clearTimeout(timer))
}

/** EVALSHA, and EVAL on NOSCRIPT. */
async function script(adapter, command, keys, args) {
  try {
    return ['reply', await adapter.evalsha(command.sha, keys, args)]
  } catch (err) {
    if (!adapter.isServerError(err)) return ['unknown', messageOf(err)]
    if (!/^NOSCRIPT/.test(err.message)) return ['error', err.message]
  }
  // SCRIPT FLUSH, a restart or a failover emptied the script cache: EVAL
  // runs the source and caches it again, so the next EVALSHA hits.
  try {
    return ['reply', await adapter.eval(core.scriptSource(command.sha), keys, args)]
  } catch (err) {
    return [adapter.isServerError(err) ? 'error' : 'unknown', messageOf(err)]
  }
}

/**
 * `replicas=N`: the script, then `WAIT` behind it on the same connection;
 * the core reads `[script reply, WAIT reply]` (a failed WAIT counts 0).
 */
async function scriptThenWait(adapter, command, keys, args) {
  if (typeof adapter.scriptThenWait !== 'function') return ['error', 'this Redis adapter has no scriptThenWait (needed by the replicas option)']
  const [replicas, timeoutMs] = command.waitReplicas
  let both
  try {
    both = await adapter.scriptThenWait('EVALSHA', command.sha, keys, args, replicas, timeoutMs)
    const [first] = both
    if (first.error !== undefined && adapter.isServerError(first.error) && /^NOSCRIPT/.test(first.error.message)) {
      both = await adapter.scriptThenWait('EVAL', core.scriptSource(command.sha), keys, args, replicas, timeoutMs)
    }
  } catch (err) {
    return ['unknown', messageOf(err)]
  }
  const [first, wait] = both
  if (first.error !== undefined) return [adapter.isServerError(first.error) ? 'error' : 'unknown', messageOf(first.error)]
  return ['reply', [first.reply, wait.error === undefined ? wait.reply : null]]
}

function messageOf(err) {
  return err instanceof Error ? err.message : String(err)
}

// A lease dropped without release stops renewing (as with the native addon).
const dropped = new FinalizationRegistry((actor) => actor.leaseDropped())

// ------------------------------------------------------------------ client

/** The backend of one `fencelock/wasm` Client: N adapters (N > 1: Redlock). */
class WasmClient {
  #adapters
  #config
  #queues = new NameQueues()
  #notifier
  #actors = new Set()
  // Each live actor's name (latin1 of its bytes) and token: `inspect`'s
  // heldByMe asks Redis about these (never shown).
  #owned = new Map()
  #closed = false

  constructor(adapters, options) {
    this.#config = new core.ClientConfig(options)
    this.#adapters = adapters
    this.#notifier = new Notifier(adapters)
  }

  // `kind`: a core Kind (a semaphore permit, a read or a write lock); the
  // mutex's when undefined.
  acquire(name, options, cancel, kind) {
    return this.#start(name, options, cancel, false, kind)
  }

  tryAcquire(name, options, cancel, kind) {
    return this.#start(name, options, cancel, true, kind)
  }

  #start(name, options, cancel, tryOnce, kind = MUTEX) {
    // Throws (tagged) on bad arguments, before anything is sent.
    const token = randomUUID()
    const spec = new core.LockSpec(this.#config, name, options, token, this.#adapters.length, seed(), tryOnce, kind)
    if (this.#closed) throw new Error(spec.closedMessage())
    const shown = Buffer.isBuffer(name) ? Buffer.from(name) : name
    return new Promise((resolve, reject) => {
      const actor = new Actor(this, spec, shown, token, { resolve, reject, tryOnce }, kind)
      this.#actors.add(actor)
      this.#owned.set(actor, { key: buffer(spec.nameBytes).toString('latin1'), token })
      actor.start(cancel).catch(reject) // a bug, not an outcome: surface it to the caller
    })
  }

  // For actors.
  get adapters() {
    return this.#adapters
  }
  get responseTimeout() {
    return this.#config.responseTimeout
  }
  get queues() {
    return this.#queues
  }
  get notifier() {
    return this.#notifier
  }
  finished(actor) {
    this.#actors.delete(actor)
    this.#owned.delete(actor)
  }

  /** `client.inspect(name)`: the core's view over every node (read-only); `kind`: a semaphore's holders. */
  async inspect(name, kind = MUTEX) {
    // Throws (tagged) on a bad name, before anything is sent.
    const probe = core.WasmOneShot.inspect(this.#config, name, [], this.#adapters.length, kind)
    const key = buffer(probe.nameBytes).toString('latin1')
    const tokens = [...this.#owned.values()].filter((o) => o.key === key).map((o) => o.token)
    return this.runOnEveryNode(core.WasmOneShot.inspect(this.#config, name, tokens, this.#adapters.length, kind))
  }

  /** `client.forceRelease(name)`: resolves to the new fence (a bigint). */
  forceRelease(name) {
    return this.runOnEveryNode(core.WasmOneShot.forceRelease(this.#config, name, this.#adapters.length))
  }

  /** Run one `core.WasmOneShot` on every node; resolves to its result. */
  async runOnEveryNode(op) {
    if (this.#closed) throw new Error(op.closedMessage())
    const outcomes = await Promise.all(this.#adapters.map((adapter, node) => run(adapter, op.command(node), this.#config.responseTimeout)))
    for (const [kind, value] of outcomes) {
      if (kind === 'reply') op.handleReply(value)
      else if (kind === 'error') op.handleError(value)
      else op.handleUnknown(value)
    }
    return op.result()
  }

  /** `lease.isHeld()`: whether a majority (the kind's quorum) holds `token` for `name`. */
  async held(name, token, kind) {
    const info = await this.runOnEveryNode(core.WasmOneShot.inspect(this.#config, name, [token], this.#adapters.length, kind))
    return info.heldByMe
  }

  /** A lease's fencedSet / fencedHSet; the core refuses a bad one before anything is sent. */
  fencedSet(lock, key, value) {
    return this.runOnEveryNode(core.WasmOneShot.fencedSet(lock, now(), this.#adapters.length, key, value))
  }
  fencedHset(lock, key, field, value) {
    return this.runOnEveryNode(core.WasmOneShot.fencedHset(lock, now(), this.#adapters.length, key, field, value))
  }

  /**
   * Pending acquires fail with a ClientClosedError (their compensating releases
   * still run), held leases stop renewing and expire by their TTL, and the
   * adapters' own subscriber connections close. The app's clients stay open.
   */
  async close() {
    this.#closed = true
    for (const actor of [...this.#actors]) actor.close()
    await Promise.all(this.#adapters.map((a) => a.close()))
  }
}

// ------------------------------------------------------------------ actor

class Actor {
  #client
  #spec
  #name
  #token
  #caller // { resolve, reject, tryOnce } until the acquire is answered
  // Who may still ask something of this lock, as the Rust driver's Phase:
  // 'acquiring' (the caller waits), 'serving' (the caller holds the lease),
  // 'finishing' (nobody will ask more: the acquire failed or was cancelled,
  // the lease was won after the caller left, or dropped unreleased),
  // 'closing' (the client closes). What the lock itself has left to do is
  // the core's `progress`; the two decide when the actor stops.
  #phase = 'acquiring'
  #lock = null
  #turn = null
  #promise = null // the waiter our release in flight hands the lock to (queue.js)
  #subscription = null
  #timer = undefined
  #armed = undefined
  #inflight = 0
  #requests = [] // lease requests waiting for the one in progress
  #pending = null // { kind, resolve, reject }
  #lostWatchers = []
  #abandon = []
  #cancelHandle = undefined // the caller's, if it passed a signal
  cancelled = false // read by the local queue

  #kind

  constructor(client, spec, name, token, caller, kind) {
    this.#client = client
    this.#spec = spec
    this.#name = name
    this.#token = token
    this.#caller = caller
    this.#kind = kind
  }

  // ---- the local queue's view of us
  abandon(fn) {
    this.#abandon.push(fn)
  }
  /** What a release sends to hand us the lock (the core's Successor). */
  get spec() {
    return this.#spec
  }

  async start(cancel) {
    this.#cancelHandle = cancel
    cancel?.onCancel(() => this.#cancel())
    const started = now()
    const wait = this.#spec.wait
    const key = Buffer.from(this.#spec.nameBytes).toString('latin1')
    // Permits and readers are shared: the server's fair line orders them
    // (and nobody waits here to be handed one in a release).
    const turn = this.#spec.linesUpLocally
      ? await this.#client.queues.take(key, this, wait === undefined ? undefined : started + wait, now)
      : { release() {}, promiseNext: () => null }
    if (turn === null) {
      if (this.#caller !== null) this.#answer(null, this.#spec.notAcquiredMessage())
      return this.#finish()
    }
    this.#turn = turn
    if (this.#caller === null) {
      // Cancelled or closed while queued.
      if (turn.handoff === undefined) {
        turn.release()
        return this.#finish()
      }
      // A release handed us the lock meanwhile: give it back at once.
      this.cancelled = true
      this.#lock = this.#spec.start(now() - started)
      this.#lock.refuseHandoff(now(), turn.handoff)
      return this.#pump()
    }
    this.#lock = this.#spec.start(now() - started)
    try {
      // Handed the lock by a release: that is our first attempt's outcome.
      if (turn.handoff !== undefined) this.#lock.acceptHandoff(now(), turn.handoff)
      else this.#lock.acquire(now())
    } catch (err) {
      this.#answer(null, null, err)
      return this.#finish()
    }
    this.#pump()
  }

  #cancel() {
    if (this.#caller === null) return
    this.cancelled = true
    // The caller rejects with the signal's reason; nobody reads this.
    this.#answer(null, null, new Error('ABORTED: the operation was aborted'))
    if (this.#lock === null) {
      for (const fn of this.#abandon.splice(0)) fn()
      return
    }
    this.#lock.cancel(now())
    this.#pump()
  }

  /** The caller's Lease was garbage-collected unreleased: stop renewing, let the key expire. */
  leaseDropped() {
    if (this.#phase !== 'serving' || this.#lock.progress === 'finished') return
    this.#phase = 'finishing'
    this.#pump()
  }

  close() {
    this.#phase = 'closing'
    if (this.#caller !== null) {
      this.#answer(null, this.#spec.closedMessage())
      if (this.#lock === null) {
        for (const fn of this.#abandon.splice(0)) fn()
        return
      }
      this.#lock.cancel(now())
    }
    if (this.#lock !== null) this.#pump()
  }

  /** Settle the acquire: a lease handle, or a tagged error message. */
  #answer(lease, message, error) {
    const caller = this.#caller
    if (caller === null) return false
    this.#caller = null
    if (this.#phase === 'acquiring') this.#phase = lease !== null ? 'serving' : 'finishing'
    if (lease !== null) caller.resolve(lease)
    else if (caller.tryOnce && /^NOT_ACQUIRED[:(]/.test(message ?? '')) caller.resolve(null)
    else caller.reject(error ?? new Error(message))
    return true
  }

  // ---- the pump: drain commands and events after every input

  #pump() {
    const lock = this.#lock
    for (;;) {
      let progressed = false
      for (let c = lock.pollCommand(); c !== undefined; c = lock.pollCommand()) {
        progressed = true
        this.#send(c)
      }
      for (let e = lock.pollEvent(); e !== undefined; e = lock.pollEvent()) {
        progressed = true
        this.#onEvent(e)
      }
      if (!progressed && this.#pending === null && this.#requests.length > 0) {
        this.#onRequest(this.#requests.shift())
        continue
      }
      if (!progressed) break
    }
    const progress = lock.progress
    this.#arm(progress)
    if (this.#inflight === 0 && this.#mayStop(progress)) this.#finish()
  }

  /**
   * Nobody will ask anything more of a lock that is only held (no caller's
   * extend or release under way): it is left to expire by its TTL, unrenewed.
   */
  #letExpire(progress) {
    return progress === 'holding' && (this.#phase === 'finishing' || this.#phase === 'closing')
  }

  /**
   * Whether the actor may stop, once no reply is in flight: the Rust driver's
   * Phase::may_stop, except that a served lease stops once the core has
   * finished (a later release or extend is answered at once, with no command).
   */
  #mayStop(progress) {
    return progress === 'finished' ? this.#phase !== 'acquiring' : this.#letExpire(progress)
  }

  #send(command) {
    this.#inflight++
    const adapter = this.#client.adapters[command.node]
    run(adapter, command, this.#client.responseTimeout).then(([kind, value]) => {
      this.#inflight--
      const lock = this.#lock
      if (kind === 'reply') lock.handleReply(now(), command.id, value)
      else if (kind === 'error') lock.handleError(now(), command.id, value)
      else lock.handleUnknown(now(), command.id, value)
      this.#pump()
    })
  }

  #arm(progress) {
    const at = this.#letExpire(progress) ? undefined : this.#lock.pollTimeout()
    if (at === this.#armed) return
    clearTimeout(this.#timer)
    this.#armed = at
    if (at === undefined) return
    this.#timer = unrefTimer(
      setTimeout(() => {
        this.#armed = undefined
        // Never earlier than asked, whatever the timer's rounding.
        this.#lock.handleTimeout(Math.max(now(), at))
        this.#pump()
      }, Math.max(0, Math.ceil(at - now()))),
    )
  }

  #finish() {
    this.#promise?.withdraw()
    this.#promise = null
    clearTimeout(this.#timer)
    this.#armed = undefined
    this.#subscription?.close()
    this.#subscription = null
    this.#turn?.release()
    this.#turn = null
    this.#client.finished(this)
  }

  #onEvent(event) {
    const lock = this.#lock
    switch (event.type) {
      case 'subscribe':
        this.#subscription = this.#client.notifier.subscribe(buffer(lock.channel), (message) => {
          if (this.#lock.state !== 'acquiring') return
          if (message === undefined) this.#lock.handleWakeup(now())
          else this.#lock.handleMessage(now(), message)
          this.#pump()
        })
        break
      case 'unsubscribe':
        this.#subscription?.close()
        this.#subscription = null
        break
      case 'acquired': {
        this.#subscription?.close()
        this.#subscription = null
        const lease = new LeaseHandle(this, this.#name, this.#token, this.#spec.ttl, event.fence)
        if (this.#answer(lease)) dropped.register(lease, this)
        else {
          // The caller gave up just as we won: do not leave it held.
          lock.release(now())
        }
        break
      }
      case 'acquireFailed':
        this.#subscription?.close()
        this.#subscription = null
        this.#turn?.release()
        this.#turn = null
        this.#answer(null, event.error)
        break
      case 'extended':
        this.#settle('extend')
        break
      case 'extendFailed':
        this.#settle('extend', event.error)
        break
      case 'released':
        this.#turn?.release()
        this.#turn = null
        this.#subscription?.close()
        this.#subscription = null
        this.#lostWatchers = []
        this.#settle('release', event.error)
        break
      case 'handoff':
        // The turn goes with it, straight to the promised waiter.
        this.#promise.deliver(event.handoff)
        this.#promise = null
        this.#turn = null
        break
      case 'lost': {
        // The next local waiter may try now (unless our release is handing
        // it the lock: the turn goes with the handoff).
        if (this.#promise === null) {
          this.#turn?.release()
          this.#turn = null
        }
        const message = lock.lostMessage()
        for (const fn of this.#lostWatchers.splice(0)) fn(message)
        break
      }
    }
  }

  #settle(kind, message) {
    const pending = this.#pending
    if (pending === null || pending.kind !== kind) return
    this.#pending = null
    if (message === undefined) pending.resolve()
    else pending.reject(new Error(message))
  }

  #onRequest(request) {
    // A release while a waiter of ours is in line hands it the lock in the
    // same round trip.
    const promise = request.kind === 'release' ? (this.#turn?.promiseNext() ?? null) : null
    try {
      if (request.kind === 'extend') this.#lock.extend(now(), request.ttl)
      else if (promise !== null) this.#lock.releaseTo(now(), promise.spec)
      else this.#lock.release(now())
      this.#pending = request
      this.#promise = promise
    } catch (err) {
      promise?.withdraw()
      request.reject(err)
    }
  }

  // ---- for the lease handle

  held(name, token) {
    return this.#client.held(name, token, this.#kind)
  }

  fencedSet(key, value) {
    return this.#client.fencedSet(this.#lock, key, value)
  }
  fencedHset(key, field, value) {
    return this.#client.fencedHset(this.#lock, key, field, value)
  }

  request(kind, ttl) {
    return new Promise((resolve, reject) => {
      this.#requests.push({ kind, ttl, resolve, reject })
      this.#pump()
    })
  }
  /** The core decides what is left to stop; the timer follows its next timeout. */
  stopRenewing() {
    if (this.#lock.progress === 'finished') return
    this.#lock.stopRenewing(now())
    this.#pump()
  }
  get lock() {
    return this.#lock
  }
  watchLost(fn) {
    // Once released (the core finished), the lease can no longer be lost.
    if (this.#lock.progress !== 'finished') this.#lostWatchers.push(fn)
  }
  /** The caller takes the lease, unless it cancelled after the grant: then release it instead. */
  claim() {
    if (this.#cancelHandle?.cancelled !== true) return true
    this.request('release').catch(() => {})
    return false
  }
}

// ------------------------------------------------------------------ lease

/** The backend half of a Lease (../client.js wraps it). */
class LeaseHandle {
  #actor
  #name
  #token
  #fence
  #ttl

  constructor(actor, name, token, ttl, fence) {
    this.#actor = actor
    this.#name = name
    this.#token = token
    this.#ttl = ttl
    this.#fence = fence
  }

  get name() {
    return this.#name
  }
  get token() {
    return this.#token
  }
  get fence() {
    return this.#fence
  }
  get ttl() {
    return this.#ttl
  }
  get validFor() {
    return this.#actor.lock.validFor(now()) // 0 once lost or released
  }
  get lost() {
    return this.#actor.lock.lost
  }
  lostMessage() {
    return this.#actor.lock.lost ? this.#actor.lock.lostMessage() : null
  }
  watchLost(callback) {
    this.#actor.watchLost(callback)
  }
  /** This handle, now the caller's; null if the acquire was cancelled after the grant (released instead). */
  claim() {
    return this.#actor.claim() ? this : null
  }
  extend(ttl) {
    return this.#actor.request('extend', ttl)
  }
  release() {
    return this.#actor.request('release')
  }
  stopRenewing() {
    this.#actor.stopRenewing()
  }
  held() {
    return this.#actor.held(this.#name, this.#token)
  }
  fencedSet(key, value) {
    return this.#actor.fencedSet(key, value)
  }
  fencedHset(key, field, value) {
    return this.#actor.fencedHset(key, field, value)
  }
}

module.exports = { WasmClient, CancelHandle, Kind: core.Kind }
