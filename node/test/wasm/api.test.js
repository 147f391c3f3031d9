'use strict'
// fencelock/wasm under Node (ci/test-wasm.sh runs this with
// FENCELOCK_FORCE_WASM=1, so nothing here can lean on the native addon):
// the public API through the ioredis and node-redis adapters, against real
// redis-servers.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { createClient } = require('redis')
const wasm = require('fencelock/wasm')
const errors = require('../../errors.js')
const { Client, Lease, LockLostError, NotAcquiredError, RedisError, ClientClosedError } = wasm
const { startRedis, redisUrl, redlockUrls, uniqueName, lockKey, within, aborted, Raw } = require('../helpers.js')
const { renewalTests } = require('../renewal-cases.js')

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

test('the main entry refuses to load under FENCELOCK_FORCE_WASM=1 and names fencelock/wasm', () => {
  const run = spawnSync(process.execPath, ['-e', "require('fencelock')"], {
    cwd: path.join(__dirname, '..', '..'),
    env: { ...process.env, FENCELOCK_FORCE_WASM: '1' },
    encoding: 'utf8',
  })
  assert.notEqual(run.status, 0)
  assert.match(run.stderr, /native addon cannot be loaded here \(FENCELOCK_FORCE_WASM=1 is set\)/)
  assert.match(run.stderr, /require\('fencelock\/wasm'\).*Client\.fromRedis\(new Redis\(url\)\)/)
  assert.match(run.stderr, /ERR_FENCELOCK_NATIVE_UNAVAILABLE/)
})

test('the ESM entry (import \'fencelock/wasm\') exports the very same classes as require()', async () => {
  const esm = await import('fencelock/wasm')
  for (const k of ['Client', 'Lease', 'LockError', 'NotAcquiredError', 'LockLostError', 'RedisError', 'ClientClosedError']) assert.equal(esm[k], wasm[k], k)
})

test('error classes are the main entry\'s (one module, instanceof works across flavours)', () => {
  for (const k of ['LockError', 'NotAcquiredError', 'LockLostError', 'RedisError', 'ClientClosedError']) assert.equal(wasm[k], errors[k], k)
  assert.ok(new LockLostError('x') instanceof errors.LockError)
})

test('fromRedis rejects what is not a Redis client, and bad options, before any IO', () => {
  for (const bad of [undefined, null, 42, 'redis://x', {}, []]) {
    assert.throws(() => Client.fromRedis(bad), TypeError, util.inspect(bad))
  }
  const fake = { evalsha() {}, eval() {}, isServerError() {}, subscribe() {}, unsubscribe() {}, close() {} }
  assert.throws(() => Client.fromRedis(fake, { prefix: 'a{b' }), RangeError)
  assert.throws(() => Client.fromRedis(fake, { prefix: 7 }), TypeError)
  assert.throws(() => Client.fromRedis(fake, { responseTimeout: -1 }), RangeError)
  assert.throws(() => new Client(), /Client\.fromRedis\(redis\)/)
})

/** Resolves once someone listens for `name`'s release notifications on this server. */
async function subscribed(raw, name) {
  const channel = `fencelock:{${name}}:released`
  await within(3_000, (async () => {
    while ((await raw.cmd('PUBSUB', 'NUMSUB', channel))[1] < 1) await new Promise((r) => setImmediate(r))
  })(), 'subscription')
}

/** A fresh lock client on `app`'s Redis client, with its acquire's lease. */
function separateClient(app) {
  const client = Client.fromRedis(app.redis)
  return { acquire: async (name, options) => ({ client, lease: await client.acquire(name, options) }) }
}

for (const [kind, connect] of Object.entries(ADAPTERS)) {
  describe(`${kind} adapter`, () => {
    let url
    let app
    let client
    let raw
    before(async () => {
      url = await redisUrl()
      app = await connect(url)
      client = Client.fromRedis(app.redis)
      raw = await Raw.connect(url)
    })
    after(async () => {
      await client?.close()
      await app?.quit()
      raw?.close()
    })

    test('several locks at once are not supported here: a typed error, nothing written', async () => {
      const name = uniqueName(`wasm-many-${kind}`)
      for (const method of ['acquireMany', 'tryAcquireMany']) {
        await assert.rejects(client[method]([name, `${name}:2`], { ttl: 1_000 }), (err) => {
          assert.ok(err instanceof TypeError)
          assert.equal(err.code, 'ERR_FENCELOCK_UNSUPPORTED')
          return true
        })
      }
      await assert.rejects(client.withLocks([name], { ttl: 1_000 }, () => {}), TypeError)
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    })

    test('acquire, contention, pub/sub handoff, fences increase, release twice is a no-op', async () => {
      const name = uniqueName(`wasm-${kind}`)
      const other = Client.fromRedis(app.redis)
      try {
        const first = await client.acquire(name, { ttl: 10_000 })
        assert.ok(first instanceof Lease)
        assert.equal(typeof first.fence, 'bigint')
        assert.equal((await raw.cmd('GET', lockKey(name))).toString(), first.token)
        assert.ok(first.validFor > 9_000 && first.validFor <= 10_000, String(first.validFor))
        assert.equal(await other.tryAcquire(name, { ttl: 1_000 }), null)
        const waiting = other.acquire(name, { ttl: 10_000, wait: 5_000 })
        // Released well before the holder's TTL, once the waiter listens:
        // only the notification can wake it this fast.
        await subscribed(raw, name)
        const t0 = performance.now()
        await first.release()
        await first.release()
        const second = await within(900, waiting, 'handoff')
        assert.ok(performance.now() - t0 < 900)
        assert.ok(second.fence > first.fence)
        assert.equal(first.validFor, 0)
        await second.release()
        assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
      } finally {
        await other.close()
      }
    })

    test('the token is readable but never printed', async () => {
      const lease = await client.acquire(uniqueName('wasm-print'), { ttl: 5_000 })
      try {
        for (const shown of [util.inspect(lease), String(lease), JSON.stringify(lease), util.format('%o', lease)]) {
          assert.ok(!shown.includes(lease.token), shown)
        }
        assert.match(lease.token, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      } finally {
        await lease.release()
      }
    })

    test('a bounded wait ends in NotAcquiredError; extend and release after loss are LockLostError', async () => {
      const name = uniqueName('wasm-lost')
      const lease = await client.acquire(name, { ttl: 10_000 })
      const other = Client.fromRedis(app.redis)
      try {
        const err = await other.acquire(name, { ttl: 1_000, wait: 100 }).catch((e) => e)
        assert.ok(err instanceof NotAcquiredError && err.code === 'NOT_ACQUIRED', String(err))
        assert.match(err.message, new RegExp(name))
        await lease.extend(20_000)
        assert.ok(lease.validFor > 19_000)
        await raw.cmd('DEL', lockKey(name))
        await assert.rejects(lease.extend(), LockLostError)
        await assert.rejects(lease.release(), (e) => e instanceof LockLostError && !e.message.includes(lease.token))
      } finally {
        await other.close()
      }
    })

    test('autoRenew keeps the lock past its TTL; a failed renewal aborts lease.signal', async () => {
      const name = uniqueName('wasm-renew')
      // Past its 1 s TTL only through renewals (each may run ~650 ms late under load).
      const lease = await client.acquire(name, { ttl: 1_000, autoRenew: true })
      await new Promise((r) => setTimeout(r, 1_500))
      assert.equal(lease.lost, false)
      assert.equal((await raw.cmd('GET', lockKey(name))).toString(), lease.token)
      await raw.cmd('DEL', lockKey(name))
      const reason = await within(3_000, aborted(lease.signal), 'loss') // the next renewal, ~333 ms away
      assert.ok(reason instanceof LockLostError)
      assert.equal(lease.lost, true)
      assert.equal(lease.validFor, 0)
      await assert.rejects(lease.release(), LockLostError)
    })

    renewalTests(`${kind}: `, () => ({ client, raw, url, LockLostError }))

    test('AbortSignal cancels a waiting acquire and leaves no key behind', async () => {
      const name = uniqueName('wasm-abort')
      const lease = await client.acquire(name, { ttl: 10_000 })
      const other = Client.fromRedis(app.redis)
      try {
        const controller = new AbortController()
        const waiting = other.acquire(name, { ttl: 10_000, signal: controller.signal })
        setTimeout(() => controller.abort(), 50)
        await assert.rejects(waiting, { name: 'AbortError' })
        await lease.release()
        // The aborted waiter must not have taken the lock after the release.
        const again = await other.acquire(name, { ttl: 1_000, wait: 0 })
        await again.release()
      } finally {
        await other.close()
      }
    })

    test('withLock returns the body\'s result and releases; one client\'s waiters queue in FIFO order', async () => {
      const name = uniqueName('wasm-fifo')
      const order = []
      const runs = [1, 2, 3].map((i) =>
        client.withLock(name, { ttl: 5_000, wait: 5_000 }, async (lease) => {
          order.push([i, lease.fence])
          return i * 10
        }),
      )
      assert.deepEqual(await within(3_000, Promise.all(runs), 'three turns'), [10, 20, 30])
      assert.deepEqual(order.map(([i]) => i), [1, 2, 3])
      assert.ok(order[0][1] < order[1][1] && order[1][1] < order[2][1])
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    })

    test('SCRIPT FLUSH mid-run: the driver falls back to EVAL and goes on', async () => {
      const name = uniqueName('wasm-flush')
      await raw.cmd('SCRIPT', 'FLUSH')
      const lease = await client.acquire(name, { ttl: 5_000 })
      await raw.cmd('SCRIPT', 'FLUSH')
      await lease.extend()
      await raw.cmd('SCRIPT', 'FLUSH')
      await lease.release()
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    })

    test('close() fails pending and later acquires with ClientClosedError (a RedisError) and leaves the app\'s client open', async () => {
      const name = uniqueName('wasm-close')
      const lease = await client.acquire(name, { ttl: 10_000 })
      const other = Client.fromRedis(app.redis)
      const waiting = other.acquire(name, { ttl: 1_000 }).then(
        () => assert.fail('acquired after close'),
        (e) => e,
      )
      await new Promise((r) => setTimeout(r, 30))
      await other.close()
      const closed = (e) => {
        assert.ok(e instanceof ClientClosedError && e instanceof RedisError, String(e))
        assert.equal(e.code, 'CLIENT_CLOSED')
        assert.equal(e.lockName, name)
        assert.equal(e.message, `cannot acquire lock ${JSON.stringify(name)}: the client is closed`)
        return true
      }
      await assert.rejects(waiting.then((e) => Promise.reject(e)), closed)
      await assert.rejects(other.acquire(name, { ttl: 1_000 }), closed)
      await assert.rejects(other.tryAcquire(name, { ttl: 1_000 }), closed)
      assert.equal(await app.redis.ping(), 'PONG')
      await lease.release()
      // A lease of a closed client still extends and releases (through the
      // app's open client): no ClientClosedError there.
      const kept = await separateClient(app).acquire(name, { ttl: 10_000 })
      await kept.client.close()
      await kept.lease.extend()
      await kept.lease.release()
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    })
  })
}

test('an autoRenew lease garbage-collected unreleased stops renewing and expires', async () => {
  const url = await redisUrl()
  const name = uniqueName('wasm-gc')
  const script = `
    const Redis = require('ioredis')
    const { Client } = require('fencelock/wasm')
    ;(async () => {
      const app = new Redis(${JSON.stringify(url)})
      const client = Client.fromRedis(app)
      await client.acquire(${JSON.stringify(name)}, { ttl: 300, autoRenew: true }) // dropped at once
      for (let i = 0; i < 5; i++) { await new Promise((r) => setTimeout(r, 20)); globalThis.gc() }
      // Renewals ran every 100 ms while the lease lived; now the key must expire.
      const until = Date.now() + 2000
      while ((await app.exists(${JSON.stringify(lockKey(name))})) === 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
      console.log('exists', await app.exists(${JSON.stringify(lockKey(name))}))
      app.disconnect()
    })()`
  const run = spawnSync(process.execPath, ['--expose-gc', '-e', script], {
    cwd: path.join(__dirname, '..', '..'),
    env: { ...process.env, FENCELOCK_FORCE_WASM: '1' },
    encoding: 'utf8',
    timeout: 10_000,
  })
  assert.equal(run.status, 0, run.stderr)
  assert.match(run.stdout, /exists 0/)
})

describe('a private server: bad inputs write nothing; unknown outcomes and server errors', () => {
  let server
  let app
  let client
  let raw
  before(async () => {
    server = await startRedis()
    app = new Redis(server.url)
    client = Client.fromRedis(app)
    raw = await server.raw()
  })
  after(async () => {
    raw?.close()
    await client?.close()
    await app?.quit()
    await server?.stop()
  })

  test('every bad name, ttl, wait and option is a TypeError/RangeError and sends nothing', async () => {
    const cases = [
      ['', { ttl: 1_000 }, RangeError],
      ['x'.repeat(1025), { ttl: 1_000 }, RangeError],
      [Buffer.alloc(1025, 97), { ttl: 1_000 }, RangeError],
      [42, { ttl: 1_000 }, TypeError],
      [null, { ttl: 1_000 }, TypeError],
      ['n', { ttl: 0 }, RangeError],
      ['n', { ttl: -5 }, RangeError],
      ['n', { ttl: NaN }, RangeError],
      ['n', { ttl: Infinity }, RangeError],
      ['n', { ttl: 2 ** 40 + 1 }, RangeError],
      ['n', { ttl: '1000' }, TypeError],
      ['n', { ttl: 1000n }, TypeError],
      ['n', {}, TypeError],
      ['n', undefined, TypeError],
      ['n', { ttl: 1_000, wait: -1 }, RangeError],
      ['n', { ttl: 1_000, wait: NaN }, RangeError],
      ['n', { ttl: 1_000, wait: '5' }, TypeError],
      ['n', { ttl: 1_000, autoRenew: 'yes' }, TypeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: 0 }, RangeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: -1 }, RangeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: NaN }, RangeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: 2 ** 40 + 1 }, RangeError],
      ['n', { ttl: 1_000, maxHold: Infinity }, RangeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: '5000' }, TypeError],
      ['n', { ttl: 1_000, autoRenew: true, maxHold: true }, TypeError],
      ['n', { ttl: 1_000, signal: {} }, TypeError],
    ]
    for (const [name, options, cls] of cases) {
      await assert.rejects(client.acquire(name, options), (e) => e.constructor === cls, util.inspect([name, options]))
    }
    const stats = await raw.cmd('INFO', 'commandstats')
    assert.doesNotMatch(stats, /cmdstat_(evalsha|eval|set|incr|pexpire|del|publish)/, stats)
    assert.equal(await raw.cmd('DBSIZE'), 0)
    const lease = await client.acquire('ok', { ttl: 1_000 })
    const scripts = async () => (await raw.cmd('INFO', 'commandstats')).match(/cmdstat_eval(sha)?:calls=\d+/g).join()
    const sent = await scripts()
    await assert.rejects(lease.extend(0), RangeError)
    await assert.rejects(lease.extend('1'), TypeError)
    assert.equal(await scripts(), sent)
    await lease.release()
  })

  test('a reply later than responseTimeout is an unknown outcome: RedisError, and the compensating release leaves no key', async () => {
    const name = uniqueName('wasm-unknown')
    const slow = Client.fromRedis(app, { responseTimeout: 100 })
    await raw.cmd('CLIENT', 'PAUSE', '400', 'WRITE') // scripts wait; reads (EXISTS) do not
    const err = await slow.acquire(name, { ttl: 30_000, wait: 0 }).catch((e) => e)
    assert.ok(err instanceof RedisError && /no reply within 100 ms/.test(err.message), String(err))
    // After the pause both the acquire and its compensating release ran, in order.
    await within(3_000, (async () => {
      while ((await raw.cmd('EXISTS', lockKey(name))) !== 0 || (await raw.cmd('EXISTS', `${lockKey(name)}:fence`)) === 0) {
        await new Promise((r) => setTimeout(r, 10))
      }
    })(), 'compensation')
    await slow.close()
  })

  test('a lock key holding the wrong type is a RedisError; a server that is gone is a RedisError', async () => {
    await raw.cmd('HSET', lockKey('wrongtype'), 'f', 'v')
    await assert.rejects(client.acquire('wrongtype', { ttl: 1_000, wait: 0 }), (e) => e instanceof RedisError && /WRONGTYPE/.test(e.message))
    const gone = await startRedis()
    const dead = new Redis(gone.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
    await dead.connect()
    const c = Client.fromRedis(dead, { responseTimeout: 500 })
    await gone.kill() // the port stays ours: nothing else can answer there
    await assert.rejects(within(3_000, c.acquire('down', { ttl: 1_000, wait: 0 })), RedisError)
    await c.close()
    dead.disconnect()
    await gone.stop()
  })
})

for (const [kind, connect] of Object.entries(ADAPTERS)) {
  describe(`redlock over five ${kind} clients`, () => {
    let apps
    let client
    before(async () => {
      apps = await Promise.all((await redlockUrls()).map(connect))
      client = Client.fromRedis(apps.map((a) => a.redis))
    })
    after(async () => {
      await client?.close()
      await Promise.all((apps ?? []).map((a) => a.quit()))
    })

    test('a lagging fence counter is written back to a majority; waiters hand over', async () => {
      const name = uniqueName(`wasm-redlock-${kind}`)
      const fenceKey = `fencelock:{${name}}:fence`
      const raws = await Promise.all((await redlockUrls()).map((u) => Raw.connect(u)))
      try {
        // Three counters ahead of the clocks, all different: every majority
        // mixes values, so the acquire hears every node and takes the highest.
        const ahead = BigInt(Date.now()) * 1024n + 1_000_000n
        await Promise.all(raws.slice(0, 3).map((r, i) => r.cmd('SET', fenceKey, String(ahead + 10n * BigInt(i)))))
        const lease = await client.acquire(name, { ttl: 10_000 })
        assert.equal(lease.fence, ahead + 21n)
        const values = await Promise.all(raws.map(async (r) => String(await r.cmd('GET', fenceKey))))
        assert.ok(values.filter((v) => v === String(lease.fence)).length >= 3, values.join())
        const other = Client.fromRedis(apps.map((a) => a.redis))
        try {
          const waiting = other.acquire(name, { ttl: 10_000, wait: 5_000 })
          await Promise.all(raws.map((r) => subscribed(r, name)))
          await lease.release()
          const next = await within(900, waiting, 'redlock handoff')
          assert.ok(next.fence > lease.fence)
          await next.release()
        } finally {
          await other.close()
        }
      } finally {
        for (const r of raws) r.close()
      }
    })
  })
}
