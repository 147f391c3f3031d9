'use strict'
// AbortSignal on acquire: prompt AbortError, no lock left behind.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const { Client, LockError } = require('..')
const { redisUrl, uniqueName, lockKey, within, Raw, startRedis } = require('./helpers.js')

let url
let client
let other
let raw
before(async () => {
  url = await redisUrl()
  client = await Client.connect(url)
  other = await Client.connect(url)
  raw = await Raw.connect(url)
})
after(async () => {
  await client?.close()
  await other?.close()
  raw?.close()
})

test('aborting a waiting acquire rejects promptly with an AbortError and leaves nothing held', async () => {
  const name = uniqueName('abort-wait')
  const holder = await client.acquire(name, { ttl: 60_000 })
  const controller = new AbortController()
  const waiting = other.acquire(name, { ttl: 60_000, signal: controller.signal })
  await new Promise((r) => setTimeout(r, 50))
  const t0 = performance.now()
  controller.abort()
  const err = await within(2_000, waiting.then(() => assert.fail('acquired'), (e) => e), 'aborted acquire')
  const took = performance.now() - t0
  assert.equal(err.name, 'AbortError')
  assert.ok(!(err instanceof LockError))
  // Not left to the waiter's next retry (~1 s) or its 60 s wait.
  assert.ok(took < 500, `abort took ${took} ms`)
  await holder.release()
  // The aborted waiter must not take the lock now that it is free: a fresh
  // acquire gets it at once (a leftover 60 s lock would make this fail).
  const next = await client.acquire(name, { ttl: 10_000, wait: 2_000 })
  assert.equal(await raw.cmd('GET', lockKey(name)), next.token)
  await next.release()
})

test('abort with a custom reason and AbortSignal.timeout', async () => {
  const name = uniqueName('abort-reason')
  const holder = await client.acquire(name, { ttl: 60_000 })
  try {
    const controller = new AbortController()
    const reason = new Error('my reason')
    const waiting = other.acquire(name, { ttl: 1_000, signal: controller.signal })
    controller.abort(reason)
    await assert.rejects(waiting, (e) => e === reason)

    const t0 = performance.now()
    await assert.rejects(other.acquire(name, { ttl: 1_000, signal: AbortSignal.timeout(100) }), (e) => e.name === 'TimeoutError')
    const took = performance.now() - t0
    assert.ok(took >= 90 && took < 1_000, `timeout took ${took}`)
    await assert.rejects(other.tryAcquire(name, { ttl: 1_000, signal: AbortSignal.abort() }), (e) => e.name === 'AbortError')
  } finally {
    await holder.release()
  }
})

test('an already aborted signal rejects before any Redis call', async () => {
  const server = await startRedis()
  const c = await Client.connect(server.url)
  const r = await server.raw()
  try {
    await assert.rejects(c.acquire('x', { ttl: 1_000, signal: AbortSignal.abort() }), (e) => e.name === 'AbortError')
    assert.equal(await r.cmd('DBSIZE'), 0)
  } finally {
    r.close()
    await c.close()
    await server.stop()
  }
})

for (const busy of [false, true]) {
  // Behind a waiter (another call of this environment in flight) each
  // acquire is queued until the end of the job that made it, so some are
  // aborted before they ever started.
  test(`aborting at any point of an uncontended acquire never leaves the lock held${busy ? ', behind a waiter' : ''}`, async () => {
    const name = uniqueName('abort-race')
    const blocked = busy ? await other.acquire(`${name}:held`, { ttl: 30_000 }) : null
    const waiting = busy ? client.acquire(`${name}:held`, { ttl: 30_000 }) : null
    await abortRace(name)
    if (busy) {
      await blocked.release()
      await (await within(5_000, waiting, 'the waiter')).release()
    }
  })
}

async function abortRace(name) {
  let aborts = 0
  let wins = 0
  for (let i = 0; i < 60; i++) {
    const controller = new AbortController()
    const attempt = client.acquire(name, { ttl: 60_000, signal: controller.signal })
    // Abort after 0..5 turns of the event loop: before, during or after the
    // request reached Redis.
    for (let k = 0; k < i % 6; k++) await new Promise((r) => setImmediate(r))
    controller.abort()
    try {
      const lease = await attempt
      wins++
      await lease.release()
    } catch (err) {
      assert.equal(err.name, 'AbortError', String(err))
      aborts++
    }
    // Whatever happened, the lock is free again: another client gets it
    // without waiting for the 60 s TTL.
    const check = await within(3_000, other.acquire(name, { ttl: 10_000, wait: 2_000 }), 'acquire after abort')
    await check.release()
  }
  assert.ok(aborts > 0)
  console.log(`abort race: ${aborts} aborted, ${wins} won before the abort`)
  assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
}

test('a bad signal is a TypeError', async () => {
  await assert.rejects(client.acquire(uniqueName('bad-signal'), { ttl: 1_000, signal: {} }), TypeError)
})
