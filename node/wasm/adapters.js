'use strict'
// Adapters: the small interface the WebAssembly driver needs from the
// application's Redis client, for ioredis and node-redis (`redis` v4+).
// A custom adapter is any object with these members (see README):
//
//   evalsha(sha, keys, args) -> Promise<reply>   EVALSHA sha numkeys ...keys ...args
//   eval(source, keys, args) -> Promise<reply>   EVAL (after NOSCRIPT)
//   scriptThenWait(verb, shaOrSource, keys, args, replicas, timeoutMs)
//     -> Promise<[outcome, outcome]>   only for the `replicas` option: the
//                                   script (verb EVALSHA or EVAL), then
//                                   `WAIT replicas timeoutMs` right behind
//                                   it on the same connection; each outcome
//                                   is { reply } or { error }
//   isServerError(err) -> boolean   the server answered with an error (as
//                                   opposed to a connection failure/timeout)
//   subscribe(channel, onMessage) -> Promise<void>   on a SEPARATE
//                                   connection; resolves once confirmed;
//                                   onMessage(message) with each message
//                                   (a Buffer or string; none wakes every
//                                   waiter, so a fair release can't target)
//   unsubscribe(channel) -> Promise<void>
//   close() -> Promise<void>        closes only what the adapter opened
//
// keys, args and channel are Buffers; replies are null, integers (number or
// bigint), strings/Buffers, or arrays of those. Only the driver interprets
// them (in the wasm core); adapters never look inside.

const { Buffer } = require('node:buffer')

function isIoredis(client) {
  return typeof client.evalsha === 'function' && typeof client.duplicate === 'function' && 'status' in client
}

function isNodeRedis(client) {
  return typeof client.sendCommand === 'function' && typeof client.duplicate === 'function' && typeof client.evalsha !== 'function'
}

function isAdapter(client) {
  return ['evalsha', 'eval', 'isServerError', 'subscribe', 'unsubscribe', 'close'].every((m) => typeof client[m] === 'function')
}

/** The adapter for one client: ioredis, node-redis, or a custom adapter as is. */
function adapterFor(client) {
  if (client === null || typeof client !== 'object') return null
  if (isIoredis(client)) return ioredis(client)
  if (isAdapter(client)) return client
  if (isNodeRedis(client)) return nodeRedis(client)
  return null
}

/** ioredis (Redis or Cluster): its own duplicate() is the subscriber. */
function ioredis(client) {
  let sub = null
  const listeners = new Map() // channel (latin1) -> onMessage
  const subscriber = () => {
    if (sub === null) {
      sub = client.duplicate()
      sub.on('messageBuffer', (channel, message) => listeners.get(channel.toString('latin1'))?.(message))
      // Errors reconnect by themselves; without a listener they would crash the process.
      sub.on('error', () => {})
    }
    return sub
  }
  return {
    evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    // A pipeline: one connection (a Cluster sends it to the keys' node).
    async scriptThenWait(verb, script, keys, args, replicas, timeoutMs) {
      const replies = await client
        .pipeline([
          [verb.toLowerCase(), script, keys.length, ...keys, ...args],
          ['wait', replicas, timeoutMs],
        ])
        .exec()
      return replies.map(([error, reply]) => (error ? { error } : { reply }))
    },
    isServerError: (err) => err?.name === 'ReplyError',
    async subscribe(channel, onMessage) {
      listeners.set(channel.toString('latin1'), onMessage)
      await subscriber().subscribe(channel)
    },
    async unsubscribe(channel) {
      listeners.delete(channel.toString('latin1'))
      await sub?.unsubscribe(channel)
    },
    async close() {
      const s = sub
      sub = null
      listeners.clear()
      if (s !== null) await s.quit().catch(() => s.disconnect())
    },
  }
}

/** node-redis v4+: a connected duplicate() is the subscriber. */
function nodeRedis(client) {
  let sub = null
  const listeners = new Map() // channel -> its listener
  const evalsha = (verb, first, keys, args) => client.sendCommand([verb, first, String(keys.length), ...keys, ...args])
  const subscriber = () => {
    if (sub === null) {
      const s = client.duplicate()
      s.on('error', () => {}) // reconnects by itself
      sub = s.connect().then(() => s)
    }
    return sub
  }
  return {
    evalsha: (sha, keys, args) => evalsha('EVALSHA', sha, keys, args),
    eval: (source, keys, args) => evalsha('EVAL', source, keys, args),
    // Sent in the same tick: node-redis writes them in order on its one socket.
    async scriptThenWait(verb, script, keys, args, replicas, timeoutMs) {
      const settled = await Promise.allSettled([
        evalsha(verb, script, keys, args),
        client.sendCommand(['WAIT', String(replicas), String(timeoutMs)]),
      ])
      return settled.map((s) => (s.status === 'fulfilled' ? { reply: s.value } : { error: s.reason }))
    },
    isServerError: (err) => {
      for (let p = err?.constructor; p && p !== Error; p = Object.getPrototypeOf(p)) {
        if (p.name === 'ErrorReply') return true
      }
      return false
    },
    // node-redis finds listeners by the channel as a string, so a channel
    // that is not valid UTF-8 (a raw-bytes lock name) gets no wake-ups:
    // its waiters rely on the core's retry timer alone.
    // Each subscription's own listener is removed by unsubscribe, so one
    // that is still settling never takes a newer subscription's listener.
    async subscribe(channel, onMessage) {
      const text = channel.toString()
      if (!Buffer.from(text).equals(channel)) return
      const listener = (message) => onMessage(message) // a Buffer: bufferMode
      listeners.set(text, listener)
      await (await subscriber()).subscribe(text, listener, true)
    },
    async unsubscribe(channel) {
      const text = channel.toString()
      const listener = listeners.get(text)
      if (listener === undefined) return
      listeners.delete(text)
      if (sub !== null) await (await sub).unsubscribe(text, listener, true)
    },
    async close() {
      const s = sub
      sub = null
      if (s === null) return
      const c = await s.catch(() => null)
      if (c === null) return
      await (typeof c.close === 'function' ? c.close() : c.quit()).catch(() => c.disconnect?.())
    },
  }
}

module.exports = { adapterFor, ioredis, nodeRedis }
