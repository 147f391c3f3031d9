'use strict'
// `{ fair: true }`: the mutex's waiters of different clients and processes
// served in arrival order through a line in Redis, the same lock (key,
// token, fence) as without it. The same cases for the addon (fair.test.js)
// and fencelock/wasm (wasm/fair.test.js): `connect(urls)` opens a client,
// `waiterScript` is a child process that waits fairly on argv[2], argv[3].
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { redisUrl, redlockUrls, uniqueName, lockKey, within, Raw, allKeys, newKeys } = require('./helpers.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
/** The fair line and its expiries (README "Key layout"). */
const line = (name) => ({ waiting: `${lockKey(name)}:waiting`, until: `${lockKey(name)}:waiting:until` })

async function until(what, check, ms = 10_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(5)
  }
}

function fairCases({ connect, waiterScript, NotAcquiredError, RedisError }) {
  test('fair: waiters of other clients are served in arrival order, a plain holder first', async () => {
    const url = await redisUrl()
    const clients = await Promise.all([0, 1, 2, 3].map(() => connect(url)))
    const raw = await Raw.connect(url)
    const name = uniqueName('fair-fifo')
    const { waiting } = line(name)
    const held = await clients[0].acquire(name, { ttl: 10_000 })
    const order = []
    const wait = (client, who) =>
      client.withLock(name, { ttl: 10_000, wait: 30_000, fair: true }, async (lease) => {
        assert.equal(await raw.cmd('GET', lockKey(name)), lease.token)
        order.push(who)
        await sleep(20)
      })
    const waiters = []
    for (const [i, who] of ['first', 'second', 'third'].entries()) {
      waiters.push(wait(clients[i + 1], who))
      await until(`${who} in line`, async () => (await raw.cmd('ZCARD', waiting)) === i + 1)
    }
    await held.release()
    await within(10_000, Promise.all(waiters), 'the waiters')
    assert.deepEqual(order, ['first', 'second', 'third'])
    assert.equal(await raw.cmd('EXISTS', waiting), 0)
    raw.close()
    await Promise.all(clients.map((c) => c.close()))
  })

  test('fair: plain and fair exclude each other; a fair try-once does not jump the line', async () => {
    const url = await redisUrl()
    const [a, b] = await Promise.all([connect(url), connect(url)])
    const raw = await Raw.connect(url)
    const name = uniqueName('fair-mixed')
    const lease = await a.acquire(name, { ttl: 5_000, fair: true })
    assert.equal(await b.tryAcquire(name, { ttl: 5_000 }), null)
    assert.equal((await b.inspect(name)).fence, lease.fence)
    await lease.extend()
    await lease.release()
    const plain = await b.acquire(name, { ttl: 5_000 })
    assert.equal(await a.tryAcquire(name, { ttl: 5_000, fair: true }), null)
    await plain.release()
    const { waiting, until: expiries } = line(name)
    const [s, us] = (await raw.cmd('TIME')).map(Number)
    await raw.cmd('ZADD', waiting, String(s * 1_000_000 + us), 'someone')
    await raw.cmd('ZADD', expiries, String(s * 1000 + Math.floor(us / 1000) + 5_000), 'someone')
    assert.equal(await a.tryAcquire(name, { ttl: 5_000, fair: true }), null)
    await (await b.acquire(name, { ttl: 5_000, wait: 0 })).release() // a plain one jumps it
    await raw.cmd('DEL', waiting, expiries)
    raw.close()
    await Promise.all([a.close(), b.close()])
  })

  test("fair: a SIGKILLed waiter's place expires; an aborted or timed-out one leaves at once", async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('fair-kill')
    const { waiting } = line(name)
    const held = await client.acquire(name, { ttl: 30_000, fair: true })
    const controller = new AbortController()
    const pending = client.acquire(name, { ttl: 10_000, fair: true, signal: controller.signal })
    await until('in line', async () => (await raw.cmd('ZCARD', waiting)) === 1)
    controller.abort()
    await assert.rejects(pending, (err) => err === controller.signal.reason)
    await until('left the line', async () => (await raw.cmd('ZCARD', waiting)) === 0)
    await assert.rejects(client.acquire(name, { ttl: 10_000, wait: 100, fair: true }), NotAcquiredError)
    await until('left the line again', async () => (await raw.cmd('ZCARD', waiting)) === 0)
    const child = spawn(process.execPath, [waiterScript, url, name], { stdio: ['ignore', 'pipe', 'inherit'] })
    await until('the child in line', async () => (await raw.cmd('ZCARD', waiting)) === 1, 20_000)
    child.kill('SIGKILL')
    await new Promise((resolve) => child.once('exit', resolve))
    const later = client.acquire(name, { ttl: 5_000, wait: 10_000, fair: true })
    await until('second in line', async () => (await raw.cmd('ZCARD', waiting)) === 2)
    const started = Date.now()
    await held.release()
    const lease = await within(10_000, later, 'the lock after the dead place expired')
    const waited = Date.now() - started
    assert.ok(waited > 500 && waited < 5_000, `served after ${waited} ms`)
    assert.equal(await raw.cmd('ZCARD', waiting), 0)
    await lease.release()
    raw.close()
    await client.close()
  })

  test('fair: bad inputs throw typed errors and write nothing', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('fair-bad')
    const before = await allKeys(raw)
    for (const fair of ['yes', 1, {}]) {
      await assert.rejects(client.acquire(name, { ttl: 1_000, fair }), TypeError, String(fair))
      await assert.rejects(client.tryAcquire(name, { ttl: 1_000, fair }), TypeError)
    }
    for (const ttl of [0, -1, NaN, Infinity, 2 ** 41]) {
      await assert.rejects(client.acquire(name, { ttl, fair: true }), RangeError)
    }
    await assert.rejects(client.acquire('', { ttl: 1_000, fair: true }), RangeError)
    assert.deepEqual(await newKeys(raw, before), [])
    await raw.cmd('LPUSH', lockKey(name), 'x')
    await assert.rejects(client.acquire(name, { ttl: 1_000, fair: true }), RedisError)
    assert.deepEqual(await newKeys(raw, before), [lockKey(name)])
    await raw.cmd('DEL', lockKey(name))
    raw.close()
    await client.close()
  })

  test('fair: Redlock waiters follow in order', async () => {
    const urls = await redlockUrls()
    const [a, b] = await Promise.all([connect(urls), connect(urls)])
    const name = uniqueName('fair-redlock')
    const held = await a.acquire(name, { ttl: 5_000, fair: true })
    const later = b.acquire(name, { ttl: 5_000, wait: 10_000, fair: true })
    const raws = await Promise.all(urls.map((u) => Raw.connect(u)))
    const queued = async () => (await Promise.all(raws.map((r) => r.cmd('ZCARD', line(name).waiting)))).filter((n) => n === 1).length >= 3
    await until('in line on a majority', queued)
    await held.release()
    const next = await within(10_000, later, 'the next lease')
    assert.ok(next.fence > held.fence)
    await next.release()
    raws.forEach((r) => r.close())
    await Promise.all([a.close(), b.close()])
  })
}

module.exports = { fairCases }
