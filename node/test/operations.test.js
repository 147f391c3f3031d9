'use strict'
// client.list / client.watch (async iterators) and metrics.install on a
// real prom-client registry, against real servers.
const test = require('node:test')
const assert = require('node:assert/strict')
const { randomUUID } = require('node:crypto')
const { Client, ClientClosedError, metrics } = require('..')
const { Raw, allKeys, newKeys, redisUrl, redlockUrls, uniqueName, within, harnessEnv } = require('./helpers.js')

/** A client in a key space of its own: list('*') sees only this test's locks. */
async function isolated(urls, options = {}) {
  const prefix = `node-ls:${randomUUID().slice(0, 12)}:`
  return { client: await Client.connect(urls, { prefix, ...options }), prefix }
}

async function collect(iterable) {
  const items = []
  for await (const item of iterable) items.push(item)
  return items
}

const shown = (name) => (Buffer.isBuffer(name) ? `buf:${name.toString('hex')}` : name)

test('list: the held locks matching a pattern, in name order', async () => {
  const url = await redisUrl()
  const { client, prefix } = await isolated(url)
  const raw = await Raw.connect(url)
  try {
    const held = ['invoice:1', 'invoice:2', 'invoice:{7}', 'invoice:ключ', 'report:daily']
    const leases = new Map()
    for (const name of held) leases.set(name, await client.acquire(name, { ttl: 30_000 }))
    const binary = await client.acquire(Buffer.from([0x69, 0x6e, 0x76, 0x6f, 0x69, 0x63, 0x65, 0x3a, 0xff]), { ttl: 30_000 })
    await (await client.acquire('invoice:3', { ttl: 30_000 })).release()
    await raw.cmd('SET', `${prefix}{invoice:9}:other`, 'x')

    const listed = await collect(client.list('invoice:*'))
    assert.deepEqual(listed.map((l) => shown(l.name)), ['invoice:1', 'invoice:2', 'invoice:{7}', 'invoice:ключ', 'buf:696e766f6963653aff'])
    for (const { name, info } of listed) {
      assert.ok(Object.isFrozen(info) && info.held && info.heldByMe && info.ttl > 20_000)
      assert.equal(info.fence, (Buffer.isBuffer(name) ? binary : leases.get(name)).fence)
    }
    assert.equal((await collect(client.list())).length, 6)
    assert.deepEqual((await collect(client.list('invoice:[12]'))).map((l) => l.name), ['invoice:1', 'invoice:2'])
    assert.deepEqual((await collect(client.list('invoice:\\{7\\}'))).map((l) => l.name), ['invoice:{7}'])
    const buffers = await collect(client.list(Buffer.from('invoice:?')))
    assert.ok(buffers.every((l) => Buffer.isBuffer(l.name)) && buffers.length === 3)
    assert.deepEqual(await collect(client.list('nothing:*')), [])

    // Breaking out of the loop is fine; the iterator stays at its end.
    const iterator = client.list('invoice:*')
    for await (const first of iterator) {
      assert.equal(first.name, 'invoice:1')
      break
    }
    assert.deepEqual(await iterator.next(), { done: true, value: undefined })
  } finally {
    raw.close()
    await client.close()
  }
})

test('list and watch refuse bad arguments at the call and closed clients', async () => {
  const url = await redisUrl()
  const client = await Client.connect(url)
  const raw = await Raw.connect(url)
  const before = await allKeys(raw)
  try {
    for (const bad of ['', 'a[b', 'x\\', 'a'.repeat(1025)]) {
      assert.throws(() => client.list(bad), RangeError, JSON.stringify(bad))
    }
    assert.throws(() => client.list(42), TypeError)
    assert.throws(() => client.list('a\ud800'), RangeError)
    assert.throws(() => client.watch(''), RangeError)
    for (const interval of [0, -1, NaN, Infinity]) assert.throws(() => client.watch('a', { interval }), RangeError)
    assert.throws(() => client.watch('a', { interval: '1' }), TypeError)
    assert.throws(() => client.watch('a', { every: 1 }), TypeError)
    await client.close()
    assert.throws(() => client.list('a*'), (err) => err instanceof ClientClosedError && err.lockName === 'a*' && /list locks matching/.test(err.message))
    assert.throws(() => client.watch('a'), ClientClosedError)
    assert.deepEqual(await newKeys(raw, before), [])
  } finally {
    raw.close()
  }
})

test('watch: one LockInfo per change of holder or fence', async () => {
  const url = await redisUrl()
  const [watcher, holder] = await Promise.all([Client.connect(url), Client.connect(url)])
  const name = uniqueName('watch')
  try {
    const changes = watcher.watch(name, { interval: 100 })
    const next = async (what) => (await within(5_000, changes.next(), what)).value
    const now = await next('now')
    assert.ok(!now.held && now.fence === null)
    const lease = await holder.acquire(name, { ttl: 30_000 })
    const acquired = await next('acquired')
    assert.ok(acquired.held && !acquired.heldByMe && acquired.fence === lease.fence)
    await lease.release()
    const released = await next('released')
    assert.ok(!released.held && released.fence === lease.fence)
    const fence = await watcher.forceRelease(name)
    assert.equal((await next('forced')).fence, fence)
  } finally {
    await Promise.all([watcher.close(), holder.close()])
  }
})

test('list over Redlock nodes and a cluster', async () => {
  {
    const urls = await redlockUrls()
    const { client, prefix } = await isolated(urls)
    const minority = await Raw.connect(urls[0])
    try {
      const lease = await client.acquire('job:a', { ttl: 30_000 })
      await minority.cmd('SET', `${prefix}{job:b}`, 'someone')
      const listed = await collect(client.list('job:*'))
      assert.deepEqual(listed.map((l) => [l.name, l.info.fence]), [['job:a', lease.fence]])
    } finally {
      minority.close()
      await client.close()
    }
  }
  const seeds = harnessEnv('FENCELOCK_TEST_CLUSTER_URLS').split(',')
  const { client } = await isolated(seeds.slice(0, 1), { topology: 'cluster' })
  try {
    const names = Array.from({ length: 24 }, (_, i) => `shard:${String(i).padStart(2, '0')}`)
    for (const name of names) await client.acquire(name, { ttl: 30_000 })
    assert.deepEqual((await collect(client.list('shard:*'))).map((l) => l.name), names)
  } finally {
    await client.close()
  }
})

test('metrics.install exposes the driver counters on a prom-client registry', async () => {
  const { Registry } = require('prom-client')
  const registry = new Registry()
  assert.throws(() => metrics.install({}), TypeError)
  const url = await redisUrl()
  const [a, b] = await Promise.all([Client.connect(url), Client.connect(url)])
  const name = uniqueName('metrics')
  // Counted from install on (per process: read the changes).
  metrics.install(registry)
  assert.throws(() => metrics.install(registry), /already registered/)
  const before = metrics.snapshot()
  try {
    const lease = await a.acquire(name, { ttl: 10_000 })
    assert.equal(await b.tryAcquire(name, { ttl: 1_000 }), null)
    await lease.release()
    const renewed = await a.acquire(name, { ttl: 150, autoRenew: true })
    await within(10_000, (async () => {
      while (metrics.snapshot().fencelock_renewals.ok - before.fencelock_renewals.ok < 2) await new Promise((r) => setTimeout(r, 10))
    })(), 'two renewals')
    await b.forceRelease(name)
    await within(5_000, new Promise((resolve) => renewed.signal.addEventListener('abort', resolve, { once: true })), 'the loss')
    await renewed.release().catch(() => {})
  } finally {
    await Promise.all([a.close(), b.close()])
  }
  const after = metrics.snapshot()
  const delta = (family, outcome = '') => after[family][outcome] - before[family][outcome]
  assert.equal(delta('fencelock_acquires', 'acquired'), 2)
  assert.equal(delta('fencelock_acquires', 'not_acquired'), 1)
  assert.equal(delta('fencelock_contended_attempts'), 1)
  assert.ok(delta('fencelock_renewals', 'ok') >= 2)
  assert.equal(delta('fencelock_renewals', 'failed'), 1)
  assert.equal(delta('fencelock_losses'), 1)
  assert.equal(delta('fencelock_releases', 'ok'), 1)
  assert.equal(delta('fencelock_releases', 'lost'), 1)
  assert.equal(after.fencelock_wait_seconds.count - before.fencelock_wait_seconds.count, 2)

  // The text a Prometheus scrape reads.
  const text = await registry.metrics()
  const sample = (line) => {
    const found = text.split('\n').find((l) => l.startsWith(`${line} `))
    assert.ok(found, `${line} in\n${text}`)
    return Number(found.split(' ')[1])
  }
  assert.equal(sample('fencelock_acquires_total{outcome="acquired"}'), after.fencelock_acquires.acquired)
  assert.equal(sample('fencelock_losses_total'), after.fencelock_losses[''])
  assert.match(text, /# TYPE fencelock_wait_seconds histogram/)
  assert.equal(sample('fencelock_wait_seconds_bucket{le="+Inf"}'), after.fencelock_wait_seconds.count)
  assert.equal(sample('fencelock_wait_seconds_count'), after.fencelock_wait_seconds.count)
  assert.equal(sample('fencelock_acquire_latency_seconds_bucket{le="10"}'), after.fencelock_acquire_latency_seconds.count)
  assert.ok(sample('fencelock_acquire_latency_seconds_sum') > 0)
})
