'use strict'
// fencelock/wasm: client.inspect(name) and lease.isHeld() through the
// ioredis and node-redis adapters (ci/test-wasm.sh: FENCELOCK_FORCE_WASM=1).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { Client, ClientClosedError } = require('fencelock/wasm')
const { redisUrl, redlockUrls, uniqueName, lockKey, Raw } = require('../helpers.js')

const ADAPTERS = {
  ioredis: async (url) => {
    const r = new Redis(url, { lazyConnect: true })
    await r.connect()
    return { redis: r, quit: () => r.quit() }
  },
  'node-redis': async (url) => {
    const r = await createClient({ url }).connect()
    return { redis: r, quit: () => r.quit() }
  },
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

for (const [flavour, open] of Object.entries(ADAPTERS)) {
  describe(`inspect over ${flavour}`, () => {
    let url
    const apps = []
    const connect = async (urls) => {
      const list = Array.isArray(urls) ? urls : [urls]
      const opened = await Promise.all(list.map(open))
      apps.push(...opened)
      const redis = opened.map((o) => o.redis)
      return Client.fromRedis(Array.isArray(urls) ? redis : redis[0])
    }
    before(async () => {
      url = await redisUrl()
    })
    after(async () => {
      await Promise.all(apps.map((a) => a.quit().catch(() => {})))
    })

    test('free, held by another client, by this one, released, expired', async () => {
      const client = await connect(url)
      const other = await connect(url)
      const name = uniqueName('wasm-inspect')
      assert.deepEqual({ ...(await client.inspect(name)) }, { held: false, ttl: null, fence: null, heldByMe: false })
      const lease = await other.acquire(name, { ttl: 10_000 })
      const info = await client.inspect(name)
      assert.equal(info.held, true)
      assert.equal(info.heldByMe, false)
      assert.ok(info.ttl > 8_000 && info.ttl <= 10_000, `ttl ${info.ttl}`)
      assert.equal(info.fence, lease.fence)
      assert.equal((await other.inspect(name)).heldByMe, true)
      assert.equal(await lease.isHeld(), true)
      assert.ok(!util.inspect(info).includes(lease.token))
      await lease.release()
      assert.equal(await lease.isHeld(), false)
      assert.deepEqual({ ...(await client.inspect(name)) }, { held: false, ttl: null, fence: lease.fence, heldByMe: false })
      const mine = await client.acquire(name, { ttl: 300 })
      assert.equal((await client.inspect(name)).heldByMe, true)
      await sleep(450)
      assert.equal((await client.inspect(name)).held, false)
      assert.equal(await mine.isHeld(), false)
      await assert.rejects(client.inspect(''), RangeError)
      await assert.rejects(client.inspect(42), TypeError)
      await client.close()
      await assert.rejects(client.inspect(name), (err) => err instanceof ClientClosedError && err.lockName === name)
      await other.close()
    })

    test('Redlock: the majority decides', async () => {
      const urls = await redlockUrls()
      const client = await connect(urls)
      const name = uniqueName('wasm-inspect-redlock')
      const lease = await client.acquire(name, { ttl: 10_000 })
      for (const u of urls.slice(0, 3)) {
        const raw = await Raw.connect(u)
        await raw.cmd('DEL', lockKey(name))
        raw.close()
        const info = await client.inspect(name)
        const majority = u !== urls[2]
        assert.deepEqual([info.held, info.heldByMe], [majority, majority])
        assert.equal(await lease.isHeld(), majority)
      }
      await client.close()
    })
  })
}
