'use strict'
// Redis Cluster and Sentinel topologies, and replica acknowledgement, from
// Node (the harness's 3+3 cluster and its primary + replica + 3 Sentinels).
const { test, describe, before } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const { Client, NotAcquiredError } = require('..')
const { Raw, harnessEnv, uniqueName, lockKey, within, clusterGet } = require('./helpers.js')

let seeds
let sentinels
let service
before(() => {
  seeds = harnessEnv('FENCELOCK_TEST_CLUSTER_URLS').split(',')
  sentinels = harnessEnv('FENCELOCK_TEST_SENTINEL_URLS').split(',')
  service = harnessEnv('FENCELOCK_TEST_SENTINEL_SERVICE')
})

async function primaryUrl() {
  const raw = await Raw.connect(sentinels[0])
  try {
    const [host, port] = await raw.cmd('SENTINEL', 'get-master-addr-by-name', service)
    return `redis://${host}:${port}/0`
  } finally {
    raw.close()
  }
}

const asText = (v) => (v == null ? v : Buffer.isBuffer(v) ? v.toString() : String(v))

describe('cluster', () => {
  test('locks on every shard from one seed', async () => {
    const client = await Client.connect(seeds.slice(0, 1), { topology: 'cluster' })
    try {
      for (let i = 0; i < 12; i++) {
        const name = uniqueName(`cluster${i}`)
        const lease = await client.acquire(name, { ttl: 10_000, wait: 0 })
        assert.equal(asText(await clusterGet(seeds, lockKey(name))), lease.token)
        assert.equal(await client.tryAcquire(name, { ttl: 10_000 }), null)
        await lease.extend()
        await lease.release()
        assert.equal(await clusterGet(seeds, lockKey(name)), null)
      }
    } finally {
      await client.close()
    }
  })

  test('a release wakes a waiter in another client (sharded pub/sub)', async () => {
    const holder = await Client.connect(seeds, { topology: 'cluster' })
    const other = await Client.connect(seeds, { topology: 'cluster' })
    try {
      const name = uniqueName('cluster-wake')
      const lease = await holder.acquire(name, { ttl: 30_000 })
      const waiting = other.acquire(name, { ttl: 30_000, wait: 20_000 }).then((l) => [l, performance.now()])
      // The waiter is now between its 1 s retries.
      await new Promise((resolve) => setTimeout(resolve, 1300))
      const releasedAt = performance.now()
      await lease.release()
      const [won, at] = await within(10_000, waiting, 'the waiter')
      assert.ok(at - releasedAt < 600, `woken after ${at - releasedAt} ms`)
      await won.release()
    } finally {
      await holder.close()
      await other.close()
    }
  })
})

describe('sentinel', () => {
  test('locks on the primary the Sentinels name', async () => {
    const client = await Client.connect(sentinels, { topology: 'sentinel', service })
    const raw = await Raw.connect(await primaryUrl())
    try {
      const name = uniqueName('sentinel')
      const lease = await client.acquire(name, { ttl: 10_000 })
      assert.equal(asText(await raw.cmd('GET', lockKey(name))), lease.token)
      await lease.release()
      assert.equal(await raw.cmd('GET', lockKey(name)), null)
    } finally {
      raw.close()
      await client.close()
    }
  })

  test('replicas: 1 is acknowledged; 2 (one replica exists) is NotAcquired and released', async () => {
    const name = uniqueName('sentinel-replicas')
    const one = await Client.connect(sentinels, { topology: 'sentinel', service, replicas: 1 })
    await (await one.acquire(name, { ttl: 10_000, wait: 0 })).release()
    await one.close()
    const two = await Client.connect(sentinels, { topology: 'sentinel', service, replicas: 2, responseTimeout: 400 })
    try {
      await assert.rejects(two.acquire(name, { ttl: 10_000, wait: 0 }), (e) => e instanceof NotAcquiredError && e.reason === 'replicas' && /only 1 of 2 replicas acknowledged/.test(e.message))
    } finally {
      await two.close()
    }
    const raw = await Raw.connect(await primaryUrl())
    try {
      assert.equal(await raw.cmd('GET', lockKey(name)), null)
    } finally {
      raw.close()
    }
  })
})

describe('bad topology options', () => {
  const cases = [
    [{ topology: 'sentinel' }, RangeError],
    [{ topology: 'cluster', service: 'mymaster' }, RangeError],
    [{ service: 'mymaster' }, RangeError],
    [{ topology: 'ring' }, RangeError],
    [{ topology: 3 }, TypeError],
    [{ replicas: -1 }, RangeError],
    [{ replicas: 1.5 }, RangeError],
    [{ replicas: '1' }, TypeError],
  ]
  for (const [options, expected] of cases) {
    test(JSON.stringify(options), async () => {
      await assert.rejects(Client.connect('redis://127.0.0.1:1', options), expected)
    })
  }
})
