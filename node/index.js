'use strict'
// fencelock for Node.js: a thin Promise API over the Rust driver, through
// the napi addon. Where the addon cannot load, native.js says to use
// `fencelock/wasm` (the same API over the app's own Redis client).
const native = require('./native.js')
// The addon's asynchronous calls as promise-returning methods (calls.js).
const { connect } = require('./calls.js').install(native)
const base = require('./client.js')
const primitives = require('./primitives.js')
// The error classes are exported as errors.js defines them (one set for both entries).
const { fromNative, ...errorClasses } = require('./errors.js')

/** A connection to one Redis (URL) or to N independent nodes (Redlock). */
class Client extends base.Client {
  static howToCreate = '`await Client.connect(url)`'

  /** Connect to a Redis URL, or to an array of independent nodes (Redlock). */
  static async connect(urls, options) {
    let handle
    try {
      handle = await connect(urls, options)
    } catch (err) {
      throw fromNative(err)
    }
    return new Client(base.kCreate, handle, native.CancelHandle, native.Kind)
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
  /** Lock metrics for prom-client: `metrics.install(registry)` (see metrics.js). */
  metrics: require('./metrics.js'),
}
