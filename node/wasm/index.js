'use strict'
// fencelock/wasm: the same API as `fencelock`, with the lock core compiled to
// WebAssembly and driven through the application's own Redis client(s):
// no native addon, no connections of its own (only a duplicate of each
// client for pub/sub wake-ups). Error classes are the main entry's.
const base = require('../client.js')
// The error classes are exported as errors.js defines them (one set for both entries).
const { fromNative, ...errorClasses } = require('../errors.js')
const { WasmClient, CancelHandle, Kind } = require('./driver.js')
const primitives = require('../primitives.js')
const { adapterFor, ioredis, nodeRedis } = require('./adapters.js')

function typeError(message) {
  const e = new TypeError(message)
  e.code = 'ERR_INVALID_ARG_TYPE'
  return e
}

/** A lock client over the app's Redis client, or an array of them (Redlock). */
class Client extends base.Client {
  static howToCreate = '`Client.fromRedis(redis)`'

  /**
   * `redis`: an ioredis client (Redis or Cluster), a node-redis client
   * (`createClient()`, v4+, connected), or an adapter object; an array of
   * independent nodes' clients is Redlock. `options`: `{ prefix,
   * responseTimeout }`.
   */
  static fromRedis(redis, options) {
    const clients = Array.isArray(redis) ? redis : [redis]
    if (clients.length === 0) throw typeError('fromRedis needs a Redis client or a non-empty array of them')
    const adapters = clients.map((c, i) => {
      const adapter = adapterFor(c)
      if (adapter === null) {
        throw typeError(`${Array.isArray(redis) ? `redis[${i}]` : 'redis'} must be an ioredis or node-redis client, or an adapter`)
      }
      return adapter
    })
    let backend
    try {
      backend = new WasmClient(adapters, options)
    } catch (err) {
      throw fromNative(err)
    }
    return new Client(base.kCreate, backend, CancelHandle, Kind)
  }
}

module.exports = {
  Client,
  Lease: base.Lease,
  LockGroup: base.LockGroup,
  LockSide: primitives.LockSide,
  Semaphore: primitives.Semaphore,
  RwLock: primitives.RwLock,
  RwSide: primitives.RwSide,
  ...errorClasses,
  adapters: { ioredis, nodeRedis },
}
