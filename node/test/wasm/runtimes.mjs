// fencelock/wasm in any JS runtime (ci/test-wasm.sh runs it under Node, Bun
// and Deno): through ioredis and node-redis against a real redis-server
// (FENCELOCK_TEST_REDIS_URL), the ESM entry's acquire, contention, pub/sub
// handoff, fences, AbortSignal, loss, errors and close. Plain node:assert, so
// it needs no runtime's test runner; exits non-zero on the first failure.
import assert from 'node:assert/strict'
import process from 'node:process'
import { Buffer } from 'node:buffer'
import Redis from 'ioredis'
import { createClient } from 'redis'
import { Client, Lease, LockLostError, NotAcquiredError, RedisError, LockError } from '../../wasm/index.mjs'

const url = process.env.FENCELOCK_TEST_REDIS_URL
assert.ok(url, 'FENCELOCK_TEST_REDIS_URL is not set')
const runtime = typeof Bun !== 'undefined' ? `bun ${Bun.version}` : typeof Deno !== 'undefined' ? `deno ${Deno.version.deno}` : `node ${process.version}`
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const unique = (label) => `test:runtime:${label}:${crypto.randomUUID().slice(0, 8)}`

async function within(ms, promise, what) {
  let timer
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms)))
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

// EVALSHA calls the server has run (the waiter's attempts; nothing else uses it meanwhile).
async function evalshaCalls(app) {
  const stats = String(await app.raw('INFO', 'commandstats'))
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0)
}

const adapters = {
  ioredis: async () => {
    const r = new Redis(url)
    return { redis: r, raw: (...a) => r.call(...a), quit: () => r.quit() }
  },
  'node-redis': async () => {
    const r = await createClient({ url }).connect()
    return { redis: r, raw: (...a) => r.sendCommand(a.map(String)), quit: () => r.quit() }
  },
}

for (const [kind, connect] of Object.entries(adapters)) {
  const app = await connect()
  const a = Client.fromRedis(app.redis)
  const b = Client.fromRedis(app.redis)
  const name = unique(kind)
  const key = `fencelock:{${name}}`

  const first = await a.acquire(name, { ttl: 10_000 })
  assert.ok(first instanceof Lease)
  assert.equal(typeof first.fence, 'bigint')
  assert.equal(String(await app.raw('GET', key)), first.token)
  assert.ok(!String(first).includes(first.token) && !JSON.stringify(first).includes(first.token))
  assert.equal(await b.tryAcquire(name, { ttl: 1_000 }), null)

  const bounded = await b.acquire(name, { ttl: 1_000, wait: 50 }).catch((e) => e)
  assert.ok(bounded instanceof NotAcquiredError && bounded instanceof LockError, String(bounded))

  const controller = new AbortController()
  const aborted = b.acquire(name, { ttl: 1_000, signal: controller.signal }).catch((e) => e)
  controller.abort()
  assert.equal((await aborted).name, 'AbortError')

  const waiting = b.acquire(name, { ttl: 10_000, wait: 60_000 })
  // Released once the waiter listens, just after one of its timed retries
  // (every <= 1 s): only the notification wakes it before the next one. The
  // first two waits only bound a loaded machine's scheduling.
  await within(20_000, (async () => {
    while (Number((await app.raw('PUBSUB', 'NUMSUB', `${key}:released`))[1]) < 1) await sleep(1)
  })(), 'subscription')
  const before = await evalshaCalls(app)
  await within(20_000, (async () => {
    while ((await evalshaCalls(app)) === before) await sleep(1)
  })(), 'a timed retry')
  await first.release()
  const second = await within(900, waiting, `${kind} handoff`) // the release notification woke it
  assert.ok(second.fence > first.fence)

  await app.raw('DEL', key)
  await assert.rejects(second.extend(), LockLostError)
  await assert.rejects(second.release(), LockLostError)

  // Past its 1 s TTL only through renewals (each may run ~650 ms late under load).
  const renewed = await a.acquire(name, { ttl: 1_000, autoRenew: true })
  await sleep(1_500)
  assert.equal(String(await app.raw('GET', key)), renewed.token)
  await app.raw('DEL', key)
  const reason = await within(3_000, new Promise((r) => renewed.signal.addEventListener('abort', () => r(renewed.signal.reason))), 'loss')
  assert.ok(reason instanceof LockLostError)

  await assert.rejects(a.acquire('', { ttl: 1_000 }), RangeError)
  await assert.rejects(a.acquire(Buffer.from('x'), { ttl: '1' }), TypeError)
  await app.raw('HSET', `fencelock:{${name}:wrongtype}`, 'f', 'v')
  await assert.rejects(a.acquire(`${name}:wrongtype`, { ttl: 1_000, wait: 0 }), RedisError)
  await app.raw('DEL', `fencelock:{${name}:wrongtype}`)

  assert.equal(await a.withLock(name, { ttl: 1_000 }, async (lease) => lease.fence > second.fence), true)

  await a.close()
  await b.close()
  assert.equal(await app.raw('PING'), 'PONG') // close() left the app's client open
  await app.quit()
  console.log(`runtimes: ${runtime} ${kind}: ok`)
}
