'use strict'
// Promises for the addon's asynchronous calls (bindings/node/src/completions.rs).
//
// A native `start*` call takes a small integer id and returns at once; its
// result comes back later, in a batch: the addon rings one threadsafe
// function per environment (the doorbell, drain() below), and drain() takes
// every finished call and settles its promise. One wake-up of this thread
// per batch, instead of napi's promise, threadsafe function and two tokio
// tasks per call.
//
// Calls go out in batches the same way: the addon starts a call at once when
// none is in flight, and otherwise queues it until flush(), which runs as a
// microtask after the JS job that made it (and the calls the same job made
// after it), so one wake-up of the runtime thread carries them all.
//
// The doorbell never keeps the process alive; a referenced timer does, while
// any call is pending (as a pending promise of the addon always did).

const resolves = []
const rejects = []
const free = []
let pending = 0
let keepAlive = null
let completions = null
let flushing = false

function noop() {}

function flush() {
  flushing = false
  completions.flush()
}

/** Settle every finished call: `[id, value, ...]`, a failure as `~id, message`. */
function drain() {
  const batch = completions.take()
  for (let i = 0; i < batch.length; i += 2) {
    const id = batch[i]
    if (id >= 0) {
      const resolve = resolves[id]
      done(id)
      resolve(batch[i + 1])
    } else {
      const reject = rejects[~id]
      done(~id)
      reject(new Error(batch[i + 1]))
    }
  }
}

function done(id) {
  resolves[id] = undefined
  rejects[id] = undefined
  free.push(id)
  if (--pending === 0) keepAlive.unref()
}

function promise(id) {
  if (pending++ === 0) {
    if (keepAlive === null) keepAlive = setInterval(noop, 2 ** 30)
    else keepAlive.ref()
  }
  return new Promise((resolve, reject) => {
    resolves[id] = resolve
    rejects[id] = reject
  })
}

/**
 * A promise-returning method over a native `start(id, a, b, c, d)`: the
 * native call validates its arguments (throwing synchronously, as before)
 * and starts the work; the promise settles when its result is drained.
 */
function promised(start) {
  return function (a, b, c, d) {
    const id = free.length > 0 ? free.pop() : resolves.length
    try {
      start.call(this, id, a, b, c, d)
    } catch (err) {
      free.push(id)
      throw err
    }
    if (!flushing) {
      flushing = true
      queueMicrotask(flush)
    }
    return promise(id)
  }
}

// The keys of an acquire's options (bindings/node/src/lib.rs, LOCK_OPTIONS).
const LOCK_KEYS = new Set(['ttl', 'wait', 'autoRenew', 'maxHold', 'fair', 'signal'])

/**
 * An acquire's options with their values passed as arguments
 * (`startAcquireFields`) when they are an object whose every enumerable key
 * is known (for-in sees what the addon's key check sees): five napi
 * arguments instead of a property lookup per key. Anything else goes to
 * `startAcquire` / `startTryAcquire`, which check the object and report
 * what is wrong with it.
 */
function acquireWith(start, once) {
  return function (id, name, options, cancel, kind) {
    if (options !== null && typeof options === 'object') {
      let known = true
      for (const key in options) {
        if (!LOCK_KEYS.has(key)) {
          known = false
          break
        }
      }
      if (known) {
        const { ttl, wait, autoRenew, maxHold, fair } = options
        return this.startAcquireFields(id, name, ttl, wait, autoRenew, maxHold, fair, cancel, kind, once)
      }
    }
    return start.call(this, id, name, options, cancel, kind)
  }
}

/** The addon's classes, given promise-returning methods over its `start*` calls. */
function install(native) {
  completions = new native.Completions(drain)
  const { NativeClient, NativeLease, NativeLockGroup, NativeLockList, NativeLockWatch } = native
  const startConnect = promised(function (id, urls, options) {
    native.startConnect(completions, id, urls, options)
  })
  for (const [cls, methods] of [
    [NativeClient, ['acquire', 'tryAcquire', 'acquireMany', 'tryAcquireMany', 'inspect', 'forceRelease', 'close']],
    [NativeLockGroup, ['release']],
    [NativeLease, ['extend', 'release', 'held', 'fencedSet', 'fencedHset']],
    [NativeLockList, ['next']],
    [NativeLockWatch, ['next']],
  ]) {
    for (const method of methods) {
      let start = cls.prototype[`start${method[0].toUpperCase()}${method.slice(1)}`]
      if (cls === NativeClient && (method === 'acquire' || method === 'tryAcquire')) {
        start = acquireWith(start, method === 'tryAcquire')
      }
      Object.defineProperty(cls.prototype, method, { value: promised(start), writable: true, configurable: true })
    }
  }
  return { connect: startConnect }
}

module.exports = { install }
