'use strict'
// client.inspect(name) and lease.isHeld(): read-only views of a lock.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const { Client, ClientClosedError } = require('..')
const { redisUrl, redlockUrls, uniqueName, lockKey, Raw } = require('./helpers.js')

let url
let client
let other
before(async () => {
  url = await redisUrl()
  client = await Client.connect(url)
  other = await Client.connect(url)
})
after(async () => {
  await client?.close()
  await other?.close()
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

test('free, held by another client, by this one, released, expired', async () => {
  const name = uniqueName('inspect')
  assert.deepEqual(await client.inspect(name), { held: false, ttl: null, fence: null, heldByMe: false })

  const lease = await other.acquire(name, { ttl: 10_000 })
  const info = await client.inspect(name)
  assert.equal(info.held, true)
  assert.equal(info.heldByMe, false)
  assert.ok(info.ttl > 8_000 && info.ttl <= 10_000, `ttl ${info.ttl}`)
  assert.equal(info.fence, lease.fence)
  assert.equal((await other.inspect(name)).heldByMe, true)
  assert.equal(await lease.isHeld(), true)
  const shown = util.inspect(info) + JSON.stringify({ ...info, fence: String(info.fence) })
  assert.ok(!shown.includes(lease.token), shown)

  await lease.release()
  assert.equal(await lease.isHeld(), false)
  const after = await client.inspect(name)
  assert.deepEqual({ ...after }, { held: false, ttl: null, fence: lease.fence, heldByMe: false })

  const mine = await client.acquire(Buffer.from(name), { ttl: 300 })
  const seen = await client.inspect(name)
  assert.equal(seen.heldByMe, true)
  assert.equal(seen.fence, mine.fence)
  await sleep(450)
  assert.equal((await client.inspect(name)).held, false)
  assert.equal(await mine.isHeld(), false)
})

test('bad names reject as acquire does; a closed client names the lock', async () => {
  await assert.rejects(client.inspect(''), RangeError)
  await assert.rejects(client.inspect(42), TypeError)
  const c = await Client.connect(url)
  const name = uniqueName('inspect-closed')
  const lease = await c.acquire(name, { ttl: 5_000 })
  await c.close()
  await assert.rejects(c.inspect(name), (err) => err instanceof ClientClosedError && err.lockName === name)
  await assert.rejects(lease.isHeld(), ClientClosedError)
})

test('Redlock: the majority decides', async () => {
  const urls = await redlockUrls()
  const c = await Client.connect(urls)
  try {
    const name = uniqueName('inspect-redlock')
    const lease = await c.acquire(name, { ttl: 10_000 })
    for (const u of urls.slice(0, 2)) {
      const raw = await Raw.connect(u)
      await raw.cmd('DEL', lockKey(name))
      raw.close()
    }
    let info = await c.inspect(name)
    assert.equal(info.held && info.heldByMe, true)
    assert.equal(info.fence, lease.fence)
    assert.equal(await lease.isHeld(), true)
    const raw = await Raw.connect(urls[2])
    await raw.cmd('DEL', lockKey(name))
    raw.close()
    info = await c.inspect(name)
    assert.deepEqual([info.held, info.heldByMe, info.ttl], [false, false, null])
    assert.equal(await lease.isHeld(), false)
  } finally {
    await c.close()
  }
})
