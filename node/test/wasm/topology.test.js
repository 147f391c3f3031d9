'use strict'
// fencelock/wasm on the harness's topologies, through the application's own
// client doing the topology work: an ioredis Cluster, an ioredis client that
// finds the primary through Sentinels, and the `replicas` option (WAIT behind
// every grant and extension) over ioredis and node-redis.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { Client, NotAcquiredError } = require('fencelock/wasm')
const { Raw, harnessEnv, uniqueName, lockKey, within } = require('../helpers.js')

const hostPort = (url) => {
  const u = new URL(url)
  return { host: u.hostname, port: Number(u.port) }
}

/** Resolves once a waiter listens for `name`'s release notifications on `raw`'s server. */
async function subscribed(raw, name) {
  const channel = `fencelock:{${name}}:released`
  await within(3_000, (async () => {
    while ((await raw.cmd('PUBSUB', 'NUMSUB', channel))[1] < 1) await new Promise((r) => setImmediate(r))
  })(), 'subscription')
}

/** Holder, then a waiter on another lock client: handed over on release, fences increasing. */
async function handoff(redis, name, listening) {
  const a = Client.fromRedis(redis)
  const b = Client.fromRedis(redis)
  try {
    const first = await a.acquire(name, { ttl: 10_000 })
    assert.equal(await b.tryAcquire(name, { ttl: 1_000 }), null)
    const waiting = b.acquire(name, { ttl: 10_000, wait: 5_000 })
    await listening()
    await first.release()
    const second = await within(900, waiting, 'handoff')
    assert.ok(second.fence > first.fence)
    await second.release()
  } finally {
    await a.close()
    await b.close()
  }
}

describe('an ioredis Cluster', () => {
  let cluster
  before(() => {
    cluster = new Redis.Cluster(harnessEnv('FENCELOCK_TEST_CLUSTER_URLS').split(',').map(hostPort))
  })
  after(() => cluster?.quit())

  test('locks in different slots; waiters are woken by the release (PUBLISH reaches every node)', async () => {
    const names = [uniqueName('wasm-cluster-a'), uniqueName('wasm-cluster-b'), uniqueName('wasm-cluster-c')]
    const slots = await Promise.all(names.map((n) => cluster.cluster('KEYSLOT', lockKey(n))))
    assert.ok(new Set(slots).size > 1, slots.join())
    for (const name of names) {
      // Subscriptions live on the node the subscriber connected to: count them on all.
      const numsub = async () => {
        const counts = await Promise.all(cluster.nodes('all').map((n) => n.pubsub('NUMSUB', `fencelock:{${name}}:released`)))
        return counts.reduce((sum, [, n]) => sum + Number(n), 0)
      }
      await handoff(cluster, name, () =>
        within(3_000, (async () => { while ((await numsub()) < 1) await new Promise((r) => setImmediate(r)) })(), 'subscription'),
      )
    }
  })
})

describe('an ioredis client on Sentinels (primary discovery is ioredis\' job)', () => {
  let redis
  let primary
  before(async () => {
    const sentinels = harnessEnv('FENCELOCK_TEST_SENTINEL_URLS').split(',').map(hostPort)
    const service = harnessEnv('FENCELOCK_TEST_SENTINEL_SERVICE')
    redis = new Redis({ sentinels, name: service })
    const raw = await Raw.connect(harnessEnv('FENCELOCK_TEST_SENTINEL_URLS').split(',')[0])
    const [host, port] = await raw.cmd('SENTINEL', 'get-master-addr-by-name', service)
    raw.close()
    primary = `redis://${host}:${port}`
  })
  after(() => redis?.quit())

  test('acquire, handoff and release on the primary', async () => {
    const name = uniqueName('wasm-sentinel')
    const raw = await Raw.connect(primary)
    try {
      await handoff(redis, name, () => subscribed(raw, name))
    } finally {
      raw.close()
    }
  })

  test('replicas: 1 waits for the replica\'s acknowledgement (ioredis and node-redis); 2 cannot be met', async () => {
    const nodeRedis = await createClient({ url: primary }).connect()
    try {
      for (const app of [redis, nodeRedis]) {
        const client = Client.fromRedis(app, { replicas: 1 })
        const lease = await client.acquire(uniqueName('wasm-replicas'), { ttl: 10_000, wait: 0 })
        await lease.extend()
        await lease.release()
        await client.close()
      }
      const strict = Client.fromRedis(redis, { replicas: 2, responseTimeout: 1_000 })
      const name = uniqueName('wasm-replicas-2')
      const err = await strict.acquire(name, { ttl: 10_000, wait: 0 }).catch((e) => e)
      assert.ok(err instanceof NotAcquiredError && err.reason === 'replicas', String(err))
      assert.equal(await redis.exists(lockKey(name)), 0) // given back: too few acknowledgements
      await strict.close()
    } finally {
      await nodeRedis.quit()
    }
  })

  test('a bad replicas option is a TypeError/RangeError at fromRedis', () => {
    assert.throws(() => Client.fromRedis(redis, { replicas: -1 }), RangeError)
    assert.throws(() => Client.fromRedis(redis, { replicas: 1.5 }), RangeError)
    assert.throws(() => Client.fromRedis(redis, { replicas: '1' }), TypeError)
  })
})
