'use strict'
// Interop agent, Node side: one fencelock Client driven by JSON lines on
// stdin (protocol: tests/python/test_interop.py), one reply line per request.
// Usage: node agent.js [--wasm] REDIS_URL[,URL2,...] (several: Redlock;
// --wasm: fencelock/wasm over ioredis clients instead of the native addon)
const readline = require('node:readline')

if (process.argv[2] === '--wasm') {
  process.env.FENCELOCK_NODE_FLAVOUR = 'wasm'
  process.argv.splice(2, 1)
}
const { fencelock, connect, name: lang } = require('../node/flavour.js')

const ERRORS = new Map([
  [fencelock.NotAcquiredError, 'NotAcquired'],
  [fencelock.LockLostError, 'LockLost'],
  [fencelock.RedisError, 'Redis'],
  [fencelock.ClientClosedError, 'Closed'],
])

// The request's `primitive` (a semaphore, a read-write lock side), or
// undefined for the mutex.
function side(client, req) {
  const primitive = req.primitive
  if (primitive == null) return undefined
  if ('semaphore' in primitive) return client.semaphore(req.name, { permits: primitive.semaphore })
  const rw = client.rwLock(req.name)
  return primitive.rw === 'read' ? rw.reader : rw.writer
}

async function handle(client, leases, req) {
  const lease = leases.get(req.lease)
  switch (req.op) {
    case 'acquire':
    case 'try': {
      const options = { ttl: req.ttl, wait: req.wait ?? undefined, autoRenew: Boolean(req.auto_renew) }
      const held = side(client, req)
      const acquire = req.op === 'acquire' ? 'acquire' : 'tryAcquire'
      const got = held === undefined ? await client[acquire](req.name, options) : await held[acquire](options)
      if (got === null) return { ok: true, lease: null }
      const id = String(leases.size)
      leases.set(id, got)
      return { ok: true, lease: id, fence: String(got.fence) }
    }
    case 'extend':
      await lease.extend(req.ttl ?? undefined)
      return { ok: true }
    case 'release':
      await lease.release()
      return { ok: true }
    case 'lost':
      return { ok: true, lost: lease.lost, aborted: lease.signal.aborted }
    default:
      return { ok: false, error: `unknown op ${req.op}` }
  }
}

async function main() {
  const urls = process.argv[2].split(',') // several URLs: Redlock
  const client = await connect(urls.length > 1 ? urls : urls[0])
  const leases = new Map()
  console.log(JSON.stringify({ ready: true, lang }))
  for await (const line of readline.createInterface({ input: process.stdin })) {
    let reply
    try {
      reply = await handle(client, leases, JSON.parse(line))
    } catch (err) {
      if (!ERRORS.has(err.constructor)) throw err
      reply = { ok: false, error: ERRORS.get(err.constructor), message: err.message }
    }
    console.log(JSON.stringify(reply))
  }
  await client.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
