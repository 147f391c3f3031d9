'use strict'
// client.forceRelease(name), the same cases for the addon (force.test.js)
// and fencelock/wasm (wasm/force.test.js): `connect(urls)` opens a client.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const { redisUrl, redlockUrls, uniqueName, lockKey, within, Raw, allKeys, newKeys } = require('./helpers.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function forceReleaseCases({ connect, ClientClosedError, LockLostError }) {
  test('fences off the holder, wakes a waiter, warns', async () => {
    const url = await redisUrl()
    const [admin, holder, other] = await Promise.all([connect(url), connect(url), connect(url)])
    const name = uniqueName('force')
    const zombie = await holder.acquire(name, { ttl: 30_000 })
    const waiting = other.acquire(name, { ttl: 30_000, wait: 20_000 })
    const raw = await Raw.connect(url)
    const deadline = Date.now() + 20_000
    while (Number((await raw.cmd('PUBSUB', 'NUMSUB', `${lockKey(name)}:released`))[1]) < 1) {
      assert.ok(Date.now() < deadline, 'the waiter never subscribed')
      await sleep(5)
    }
    const warned = once(process, 'warning')
    const fence = await admin.forceRelease(name)
    const [warning] = await warned
    assert.equal(typeof fence, 'bigint')
    assert.ok(fence > zombie.fence, `${fence} after ${zombie.fence}`)
    assert.equal(warning.code, 'FENCELOCK_FORCE_RELEASE')
    assert.ok(warning.message.includes(name) && warning.message.includes(String(fence)), warning.message)
    assert.ok(!warning.message.includes(zombie.token))
    // Woken by the release notification, long before the 30 s TTL.
    const next = await within(10_000, waiting, 'the woken waiter')
    assert.ok(next.fence > fence)
    await assert.rejects(zombie.extend(), LockLostError)
    await assert.rejects(zombie.release(), LockLostError)
    await next.release()
    // A free lock: nothing removed, the fence still moves on.
    const again = await admin.forceRelease(name)
    assert.ok(again > next.fence)
    assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    assert.equal(String(await raw.cmd('GET', `${lockKey(name)}:fence`)), String(again))
    raw.close()
    await Promise.all([admin.close(), holder.close(), other.close()])
  })

  test('bad names reject, nothing is written; a closed client names the lock', async () => {
    const url = await redisUrl()
    const raw = await Raw.connect(url)
    const before = await allKeys(raw)
    const client = await connect(url)
    await assert.rejects(client.forceRelease(''), RangeError)
    await assert.rejects(client.forceRelease(42), TypeError)
    await client.close()
    const name = uniqueName('force-closed')
    await assert.rejects(client.forceRelease(name), (err) => err instanceof ClientClosedError && err.lockName === name)
    assert.deepEqual(await newKeys(raw, before), [])
    raw.close()
  })

  test('Redlock: removed on every node', async () => {
    const urls = await redlockUrls()
    const [admin, holder] = await Promise.all([connect(urls), connect(urls)])
    const name = uniqueName('force-redlock')
    const zombie = await holder.acquire(name, { ttl: 30_000 })
    const fence = await admin.forceRelease(name)
    assert.ok(fence > zombie.fence)
    for (const u of urls) {
      const raw = await Raw.connect(u)
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0, u)
      raw.close()
    }
    await Promise.all([admin.close(), holder.close()])
  })
}

module.exports = { forceReleaseCases }
