'use strict'
// Every bad input is a TypeError/RangeError raised before any Redis call;
// wrong password and server down are RedisErrors that never show secrets.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const { performance } = require('node:perf_hooks')
const { Client, RedisError, LockError } = require('..')
const { startRedis, claimPorts, releasePorts, within } = require('./helpers.js')

describe('bad inputs (private server: nothing may be written)', () => {
  let server
  let client
  let raw
  before(async () => {
    server = await startRedis()
    client = await Client.connect(server.url)
    raw = await server.raw()
  })
  after(async () => {
    raw?.close()
    await client?.close()
    await server?.stop()
  })

  async function assertNothingWritten() {
    assert.equal(await raw.cmd('DBSIZE'), 0)
    const stats = await raw.cmd('INFO', 'commandstats')
    assert.doesNotMatch(stats, /cmdstat_(evalsha|eval|set|incr|pexpire|del|publish)/, stats)
  }

  const big = 2 ** 40
  const tooLong = 'x'.repeat(1025)
  const tooLongUnicode = 'é'.repeat(513) // 1026 bytes, 513 characters
  const cases = [
    // [label, name, options, expected error]
    ['empty name', '', { ttl: 1_000 }, RangeError],
    ['empty Buffer name', Buffer.alloc(0), { ttl: 1_000 }, RangeError],
    ['name over 1024 bytes', tooLong, { ttl: 1_000 }, RangeError],
    ['unicode name over 1024 bytes', tooLongUnicode, { ttl: 1_000 }, RangeError],
    ['Buffer name over 1024 bytes', Buffer.alloc(1025, 97), { ttl: 1_000 }, RangeError],
    ['number name', 42, { ttl: 1_000 }, TypeError],
    ['undefined name', undefined, { ttl: 1_000 }, TypeError],
    ['null name', null, { ttl: 1_000 }, TypeError],
    ['object name', { name: 'x' }, { ttl: 1_000 }, TypeError],
    ['symbol name', Symbol('x'), { ttl: 1_000 }, TypeError],
    ['ttl 0', 'n', { ttl: 0 }, RangeError],
    ['ttl negative', 'n', { ttl: -5 }, RangeError],
    ['ttl NaN', 'n', { ttl: NaN }, RangeError],
    ['ttl Infinity', 'n', { ttl: Infinity }, RangeError],
    ['ttl -Infinity', 'n', { ttl: -Infinity }, RangeError],
    ['ttl over 2^40 ms', 'n', { ttl: big + 1 }, RangeError],
    ['ttl 1e300', 'n', { ttl: 1e300 }, RangeError],
    ['ttl string', 'n', { ttl: '1000' }, TypeError],
    ['ttl bigint', 'n', { ttl: 1000n }, TypeError],
    ['ttl missing', 'n', {}, TypeError],
    ['options missing', 'n', undefined, TypeError],
    ['options not an object', 'n', 1000, TypeError],
    ['wait negative', 'n', { ttl: 1_000, wait: -1 }, RangeError],
    ['wait NaN', 'n', { ttl: 1_000, wait: NaN }, RangeError],
    ['wait Infinity', 'n', { ttl: 1_000, wait: Infinity }, RangeError],
    ['wait string', 'n', { ttl: 1_000, wait: '5' }, TypeError],
    ['autoRenew string', 'n', { ttl: 1_000, autoRenew: 'yes' }, TypeError],
    ['maxHold 0', 'n', { ttl: 1_000, autoRenew: true, maxHold: 0 }, RangeError],
    ['maxHold negative', 'n', { ttl: 1_000, autoRenew: true, maxHold: -1 }, RangeError],
    ['maxHold NaN', 'n', { ttl: 1_000, autoRenew: true, maxHold: NaN }, RangeError],
    ['maxHold Infinity', 'n', { ttl: 1_000, autoRenew: true, maxHold: Infinity }, RangeError],
    ['maxHold over 2^40 ms', 'n', { ttl: 1_000, autoRenew: true, maxHold: big + 1 }, RangeError],
    ['maxHold 0 without autoRenew', 'n', { ttl: 1_000, maxHold: 0 }, RangeError],
    ['maxHold string', 'n', { ttl: 1_000, autoRenew: true, maxHold: '5000' }, TypeError],
    ['maxHold boolean', 'n', { ttl: 1_000, autoRenew: true, maxHold: true }, TypeError],
    ['signal not an AbortSignal', 'n', { ttl: 1_000, signal: 'stop' }, TypeError],
  ]
  for (const [label, name, options, Expected] of cases) {
    test(`${label} -> ${Expected.name}`, async () => {
      for (const method of ['acquire', 'tryAcquire']) {
        const err = await client[method](name, options).then(
          (l) => assert.fail(`${method} accepted ${label}: ${l}`),
          (e) => e,
        )
        assert.equal(err.constructor, Expected, `${method}: ${err}`)
        assert.ok(!(err instanceof LockError))
        assert.ok(err.message.length > 0)
        assert.doesNotMatch(err.message, /^(INVALID_|NOT_|LOCK_|REDIS)/)
      }
      await assert.rejects(client.withLock(name, options, async () => assert.fail('ran')), Expected)
      await assertNothingWritten()
    })
  }

  test('ttl exactly 2^40 ms and 3 ms are accepted', async () => {
    // Validated, then sent; use a private server scoped to this test.
    const other = await startRedis()
    const c = await Client.connect(other.url)
    try {
      const a = await c.acquire('max', { ttl: big })
      assert.equal(a.ttl, big)
      await a.release()
      // 3 ms is the smallest ttl that leaves validity after the drift allowance.
      const b = await c.acquire('min', { ttl: 3, wait: 0 }).catch((e) => e)
      assert.ok(!(b instanceof TypeError) && !(b instanceof RangeError), String(b))
    } finally {
      await c.close()
      await other.stop()
    }
  })

  test('withLock without a function is a TypeError', async () => {
    await assert.rejects(client.withLock('n', { ttl: 1_000 }), TypeError)
    await assert.rejects(client.withLock('n', { ttl: 1_000 }, 'nope'), TypeError)
    await assertNothingWritten()
  })

  test('malformed URLs and connect options', async () => {
    for (const bad of ['', 'not a url', 'http://127.0.0.1:6379', 'redis://127.0.0.1:notaport']) {
      await assert.rejects(Client.connect(bad), RangeError, bad)
    }
    await assert.rejects(Client.connect([]), RangeError)
    for (const bad of [undefined, null, 6379, {}, [1, 2]]) {
      await assert.rejects(Client.connect(bad), TypeError, String(bad))
    }
    await assert.rejects(Client.connect(server.url, { prefix: 5 }), TypeError)
    await assert.rejects(Client.connect(server.url, { prefix: 'a{b' }), RangeError)
    await assert.rejects(Client.connect(server.url, { connectTimeout: -1 }), RangeError)
    await assert.rejects(Client.connect(server.url, { responseTimeout: 'x' }), TypeError)
    await assertNothingWritten()
  })
})

describe('connection failures', () => {
  test('wrong password: RedisError without the password', async () => {
    const password = 'right-pass-A81x'
    const server = await startRedis({ password })
    try {
      const wrong = 'wrong-pass-Z93q'
      const badUrl = `redis://:${wrong}@127.0.0.1:${server.port}/0`
      const err = await within(
        10_000,
        (async () => {
          const c = await Client.connect(badUrl)
          try {
            await c.acquire('pw', { ttl: 1_000, wait: 0 })
          } finally {
            await c.close()
          }
        })().then(() => assert.fail('accepted a wrong password'), (e) => e),
        'wrong password',
      )
      assert.ok(err instanceof RedisError, String(err))
      assert.equal(err.code, 'REDIS')
      for (const shown of [err.message, err.stack, util.inspect(err)]) {
        assert.ok(!shown.includes(wrong), shown)
        assert.ok(!shown.includes(password), shown)
      }
      const good = await Client.connect(server.url)
      assert.ok(!util.inspect(good).includes(password))
      const lease = await good.acquire('pw', { ttl: 1_000 })
      await lease.release()
      await good.close()
    } finally {
      await server.stop()
    }
  })

  test('server down: RedisError within seconds', async (t) => {
    const [port] = claimPorts() // ours, and nothing listens there
    t.after(() => releasePorts(port))
    const t0 = performance.now()
    const err = await within(
      10_000,
      (async () => {
        const c = await Client.connect(`redis://127.0.0.1:${port}/0`, { connectTimeout: 1_000, responseTimeout: 1_000 })
        try {
          await c.acquire('down', { ttl: 1_000, wait: 0 })
        } finally {
          await c.close()
        }
      })().then(() => assert.fail('connected to nothing'), (e) => e),
      'server down',
    )
    assert.ok(err instanceof RedisError, String(err))
    assert.ok(performance.now() - t0 < 5_000)
  })

  test('server stopped mid-run: RedisError, then works again after restart', async () => {
    const server = await startRedis()
    const c = await Client.connect(server.url, { connectTimeout: 1_000, responseTimeout: 1_000 })
    try {
      const lease = await c.acquire('mid', { ttl: 10_000 })
      await server.kill()
      const t0 = performance.now()
      await within(10_000, assert.rejects(lease.extend(), RedisError), 'extend on a dead server')
      await within(10_000, assert.rejects(c.acquire('mid2', { ttl: 1_000, wait: 0 }), RedisError), 'acquire on a dead server')
      assert.ok(performance.now() - t0 < 8_000)
      await server.start()
      // Reconnects on its own (no new client needed).
      let lease2
      for (let i = 0; i < 50 && !lease2; i++) {
        lease2 = await c.acquire('mid3', { ttl: 1_000, wait: 0 }).catch((e) => {
          if (!(e instanceof RedisError)) throw e
          return new Promise((r) => setTimeout(r, 100))
        })
      }
      assert.ok(lease2, 'never reconnected')
      await lease2.release()
    } finally {
      await c.close()
      await server.stop()
    }
  })
})
