'use strict'
// client.acquireMany(names): several mutexes, all or nothing. Each name an
// ordinary Lease; a held name takes nothing and leaves nothing; waiting,
// AbortSignal, loss; bad inputs write nothing; Redlock refused; a cluster.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client, Lease, LockGroup, NotAcquiredError, LockLostError } = require('..')
const { Raw, allKeys, newKeys, redisUrl, redlockUrls, uniqueName, lockKey, harnessEnv, clusterGet } = require('./helpers.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const namesOf = (label, n = 3) => {
  const base = uniqueName(label)
  return Array.from({ length: n }, (_, i) => `${base}:${i}`)
}

// A client and a raw connection to the test Redis, both closed after `fn`.
async function withClient(fn) {
  const url = await redisUrl()
  const client = await Client.connect(url)
  const raw = await Raw.connect(url)
  try {
    return await fn({ url, client, raw })
  } finally {
    raw.close()
    await client.close()
  }
}

async function until(what, check, ms = 10_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(2)
  }
}

test('acquireMany: every name an ordinary lease, released together', () =>
  withClient(async ({ client, raw }) => {
    const names = namesOf('many')
    const group = await client.acquireMany(names, { ttl: 10_000 })
    assert.ok(group instanceof LockGroup)
    assert.deepEqual(group.leases.map((l) => l.name), names)
    for (const lease of group.leases) {
      assert.ok(lease instanceof Lease)
      assert.equal(await raw.cmd('GET', lockKey(lease.name)), lease.token)
      assert.equal(await raw.cmd('GET', `${lockKey(lease.name)}:fence`), String(lease.fence))
    }
    assert.ok(!String(group).includes(group.leases[0].token))
    assert.ok(!JSON.stringify(group).includes(group.leases[0].token))
    await group.leases[1].extend(20_000)
    assert.ok((await raw.cmd('PTTL', lockKey(names[1]))) > 19_000)
    await group.release()
    await group.release() // a second release is a no-op
    for (const name of names) assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    const fence = await client.withLocks(names, { ttl: 5_000 }, async (again) => {
      assert.ok(again.leases[0].fence > group.leases[0].fence)
      assert.equal(await raw.cmd('GET', lockKey(names[2])), again.leases[2].token)
      return again.leases[0].fence
    })
    assert.equal(typeof fence, 'bigint')
    for (const name of names) assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
  }),
)

test('acquireMany: one held name takes nothing, leaves nothing; a waiting group is woken', async () => {
  const url = await redisUrl()
  const client = await Client.connect(url)
  const other = await Client.connect(url)
  const raw = await Raw.connect(url)
  try {
    const names = namesOf('many-held')
    const held = await other.acquire(names[1], { ttl: 30_000 })
    assert.equal(await client.tryAcquireMany(names, { ttl: 10_000 }), null)
    await assert.rejects(client.acquireMany(names, { ttl: 10_000, wait: 100 }), (err) => {
      assert.ok(err instanceof NotAcquiredError)
      assert.ok(err.message.includes(names[1]), err.message)
      assert.equal(err.lockName, names[1]) // the held one, as given
      return true
    })
    const buffers = names.map((name) => Buffer.from(name))
    await assert.rejects(client.withLocks(buffers, { ttl: 10_000, wait: 0 }, async () => {}), (err) => {
      assert.ok(err instanceof NotAcquiredError)
      assert.ok(Buffer.isBuffer(err.lockName) && err.lockName.equals(buffers[1]), String(err.lockName))
      return true
    })
    assert.equal(await raw.cmd('EXISTS', lockKey(names[0])), 0)
    assert.equal(await raw.cmd('EXISTS', lockKey(names[2])), 0)
    const waiting = client.acquireMany(names, { ttl: 10_000, wait: 20_000 })
    await until('the group listens', async () => (await raw.cmd('PUBSUB', 'NUMSUB', `${lockKey(names[1])}:released`))[1] >= 1)
    await held.release()
    const group = await waiting
    assert.ok(group.leases[1].fence > held.fence)
    await group.release()
  } finally {
    raw.close()
    await client.close()
    await other.close()
  }
})

test('acquireMany: an aborted acquire leaves nothing behind', () =>
  withClient(async ({ client, raw }) => {
    const names = namesOf('many-abort')
    const held = await client.acquire(names[2], { ttl: 30_000 })
    const controller = new AbortController()
    const waiting = client.acquireMany(names, { ttl: 10_000, wait: 30_000, signal: controller.signal })
    await until('the group listens', async () => (await raw.cmd('PUBSUB', 'NUMSUB', `${lockKey(names[2])}:released`))[1] >= 1)
    controller.abort(new Error('stop'))
    await assert.rejects(waiting, /stop/)
    await held.release()
    for (const name of names) assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    // Aborted at once, from any moment: nothing comes back later.
    for (let i = 0; i < 20; i++) {
      const race = namesOf('many-race', 4)
      const c = new AbortController()
      const attempt = client.acquireMany(race, { ttl: 10_000, signal: c.signal })
      setImmediate(() => c.abort(new Error('race')))
      const group = await attempt.catch(() => null)
      if (group !== null) await group.release()
      await until('nothing left', async () => {
        for (const name of race) if ((await raw.cmd('EXISTS', lockKey(name))) !== 0) return false
        return true
      })
    }
  }),
)

test('acquireMany: a lost lease is LockLostError on release; the rest are released', () =>
  withClient(async ({ client, raw }) => {
    const names = namesOf('many-lost')
    const group = await client.acquireMany(names, { ttl: 10_000 })
    await raw.cmd('DEL', lockKey(names[1]))
    await assert.rejects(group.release(), (err) => {
      assert.ok(err instanceof LockLostError)
      assert.equal(err.lockName, names[1])
      return true
    })
    assert.equal(group.lost, true)
    for (const name of names) assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
  }),
)

test('acquireMany: bad inputs are typed errors and write nothing', () =>
  withClient(async ({ client, raw }) => {
    const before = await allKeys(raw)
    const many = Array.from({ length: 65 }, (_, i) => `n${i}`)
    for (const [names, options, error] of [
      [[], { ttl: 1000 }, RangeError],
      [['a', 'b', 'a'], { ttl: 1000 }, RangeError],
      [['a', ''], { ttl: 1000 }, RangeError],
      [many, { ttl: 1000 }, RangeError],
      [['a', 'b'], { ttl: 0 }, RangeError],
      [['a', 'b'], { ttl: 1000, wait: -1 }, RangeError],
      [['a', 'b'], { ttl: 1000, fair: true }, RangeError],
      ['ab', { ttl: 1000 }, TypeError],
      [['a', 7], { ttl: 1000 }, TypeError],
      [['a', 'b'], { ttl: '1000' }, TypeError],
      [['a', 'b'], { ttl: 1000, colour: 'red' }, TypeError],
      [['a', '\ud800'], { ttl: 1000 }, RangeError],
    ]) {
      for (const method of ['acquireMany', 'tryAcquireMany']) {
        await assert.rejects(client[method](names, options), error, `${method} ${JSON.stringify(names).slice(0, 40)} ${JSON.stringify(options)}`)
      }
    }
    assert.deepEqual(await newKeys(raw, before), [])
  }),
)

test('acquireMany: Redlock is refused', async () => {
  const urls = await redlockUrls()
  const client = await Client.connect(urls)
  try {
    const names = namesOf('many-redlock')
    await assert.rejects(client.acquireMany(names, { ttl: 1000 }), /Redlock/)
    for (const url of urls) {
      const raw = await Raw.connect(url)
      try {
        assert.equal(await raw.cmd('EXISTS', lockKey(names[0])), 0)
      } finally {
        raw.close()
      }
    }
  } finally {
    await client.close()
  }
})

test('acquireMany: a Redis Cluster takes names on several slots', async () => {
  const seeds = harnessEnv('FENCELOCK_TEST_CLUSTER_URLS').split(',')
  const client = await Client.connect(seeds, { topology: 'cluster' })
  try {
    const names = namesOf('many-cluster', 6)
    const group = await client.acquireMany(names, { ttl: 10_000 })
    for (const lease of group.leases) assert.equal(String(await clusterGet(seeds, lockKey(lease.name))), lease.token)
    const extra = `${names[0]}:extra`
    assert.equal(await client.tryAcquireMany([extra, names[4]], { ttl: 1000 }), null)
    assert.equal(await clusterGet(seeds, lockKey(extra)), null)
    await group.release()
    for (const name of names) assert.equal(await clusterGet(seeds, lockKey(name)), null)
  } finally {
    await client.close()
  }
})
