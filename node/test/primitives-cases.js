'use strict'
// client.semaphore(name, { permits }) and client.rwLock(name): the same cases
// for the addon (primitives.test.js) and fencelock/wasm
// (wasm/primitives.test.js): `connect(urls)` opens a client.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { redisUrl, redlockUrls, uniqueName, lockKey, within, aborted, Raw, allKeys, newKeys } = require('./helpers.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** holders, line, fence of a semaphore (README "Key layout"). */
const semKeys = (name) => {
  const base = `${lockKey(name)}:semaphore`
  return { holders: base, waiting: `${base}:waiting`, fence: `${base}:fence` }
}
const rwKeys = (name) => {
  const base = `${lockKey(name)}:rw`
  return { readers: `${base}:readers`, writer: `${base}:writer`, waiting: `${base}:waiting`, fence: `${base}:fence` }
}

async function until(what, check, ms = 10_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(5)
  }
}

function primitivesCases({ connect, Semaphore, RwLock, NotAcquiredError, LockLostError, RedisError, ClientClosedError }) {
  test('semaphore: permits are leases with increasing fences; try-once takes no place', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('sem')
    const sem = client.semaphore(name, { permits: 2 })
    assert.ok(sem instanceof Semaphore)
    assert.equal(sem.name, name)
    assert.equal(sem.permits, 2)
    const a = await sem.acquire({ ttl: 5_000 })
    const b = await sem.acquire({ ttl: 5_000, wait: 0 })
    assert.ok(b.fence > a.fence && typeof a.fence === 'bigint')
    const k = semKeys(name)
    assert.equal(await raw.cmd('TYPE', k.holders), 'zset')
    assert.deepEqual((await raw.cmd('ZRANGE', k.holders, 0, -1)).sort(), [a.token, b.token].sort())
    assert.equal(await raw.cmd('GET', k.fence), String(b.fence))
    assert.equal(await sem.tryAcquire({ ttl: 5_000 }), null)
    assert.equal(await raw.cmd('EXISTS', k.waiting), 0)
    assert.equal(await a.isHeld(), true)
    assert.equal((await sem.inspect()).heldByMe, true)
    await a.release()
    await a.release() // a second release is a no-op
    assert.equal(await a.isHeld(), false)
    const fence = await sem.withLock({ ttl: 5_000, wait: 1_000 }, async (c) => {
      assert.ok(c.fence > b.fence)
      return c.fence
    })
    await b.release()
    assert.equal(await raw.cmd('EXISTS', k.holders), 0)
    const info = await sem.inspect()
    assert.equal(info.held, false)
    assert.equal(info.fence, fence)
    raw.close()
    await client.close()
  })

  test('semaphore: waiters of other clients are served in arrival order', async () => {
    const url = await redisUrl()
    const [holder, c1, c2] = await Promise.all([connect(url), connect(url), connect(url)])
    const raw = await Raw.connect(url)
    const name = uniqueName('sem-fifo')
    const { waiting } = semKeys(name)
    const held = await holder.semaphore(name, { permits: 1 }).acquire({ ttl: 10_000 })
    const order = []
    const wait = (client, who) =>
      client.semaphore(name, { permits: 1 }).withLock({ ttl: 10_000, wait: 30_000 }, async () => {
        order.push(who)
        await sleep(20)
      })
    const first = wait(c1, 'first')
    await until('first in line', async () => (await raw.cmd('ZCARD', waiting)) === 1)
    const second = wait(c2, 'second')
    await until('second in line', async () => (await raw.cmd('ZCARD', waiting)) === 2)
    await held.release()
    await within(10_000, Promise.all([first, second]), 'both waiters')
    assert.deepEqual(order, ['first', 'second'])
    raw.close()
    await Promise.all([holder.close(), c1.close(), c2.close()])
  })

  test('semaphore: an aborted or timed-out waiter leaves the line and holds nothing', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('sem-abort')
    const k = semKeys(name)
    const sem = client.semaphore(name, { permits: 1 })
    const held = await sem.acquire({ ttl: 10_000 })
    const controller = new AbortController()
    const pending = sem.acquire({ ttl: 10_000, signal: controller.signal })
    await until('in line', async () => (await raw.cmd('ZCARD', k.waiting)) === 1)
    controller.abort()
    await assert.rejects(pending, (err) => err === controller.signal.reason)
    await until('left the line', async () => (await raw.cmd('ZCARD', k.waiting)) === 0)
    await assert.rejects(sem.acquire({ ttl: 10_000, wait: 100 }), NotAcquiredError)
    // Its way out of the line is sent before the rejection, not always answered.
    await until('left the line again', async () => (await raw.cmd('ZCARD', k.waiting)) === 0)
    assert.deepEqual(await raw.cmd('ZRANGE', k.holders, 0, -1), [held.token])
    await held.release()
    raw.close()
    await client.close()
  })

  test('semaphore: autoRenew keeps a permit; a removed one aborts lease.signal', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('sem-renew')
    const permit = await client.semaphore(name, { permits: 3 }).acquire({ ttl: 300, autoRenew: true })
    await sleep(700)
    assert.equal(permit.lost, false)
    assert.equal(await permit.isHeld(), true)
    await raw.cmd('ZREM', semKeys(name).holders, permit.token)
    const reason = await within(3_000, aborted(permit.signal), 'the loss')
    assert.ok(reason instanceof LockLostError)
    await assert.rejects(permit.release(), LockLostError)
    raw.close()
    await client.close()
  })

  test('semaphore: bad inputs throw typed errors and write nothing', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('sem-bad')
    const before = await allKeys(raw)
    for (const permits of [0, -1, 1.5, 1_000_001, NaN, Infinity]) {
      assert.throws(() => client.semaphore(name, { permits }), RangeError, String(permits))
    }
    for (const options of [undefined, {}, { permits: '3' }, { permits: 2n }, { permits: 2, wait: 1 }, 3, null]) {
      assert.throws(() => client.semaphore(name, options), TypeError, JSON.stringify(String(options)))
    }
    const sem = client.semaphore(name, { permits: 2 })
    for (const ttl of [0, -1, NaN, Infinity, 2 ** 41]) {
      await assert.rejects(sem.acquire({ ttl }), RangeError)
      await assert.rejects(sem.tryAcquire({ ttl }), RangeError)
    }
    await assert.rejects(sem.acquire({ ttl: '1' }), TypeError)
    await assert.rejects(sem.acquire({ ttl: 1_000, wait: -1 }), RangeError)
    await assert.rejects(client.semaphore('', { permits: 2 }).acquire({ ttl: 1_000 }), RangeError)
    await assert.rejects(client.semaphore(42, { permits: 2 }).acquire({ ttl: 1_000 }), TypeError)
    await assert.rejects(client.rwLock('').writer.acquire({ ttl: 1_000 }), RangeError)
    assert.deepEqual(await newKeys(raw, before), [])
    // A holders key of the wrong type: a RedisError, and nothing changes.
    const { holders } = semKeys(name)
    await raw.cmd('SET', holders, 'x')
    await assert.rejects(sem.acquire({ ttl: 1_000 }), RedisError)
    assert.equal(await raw.cmd('GET', holders), 'x')
    await raw.cmd('DEL', holders)
    await client.close()
    await assert.rejects(sem.acquire({ ttl: 1_000 }), ClientClosedError)
    assert.deepEqual(await newKeys(raw, before), [])
    raw.close()
  })

  test('semaphore: Redlock holds each permit on every node it needs', async () => {
    const urls = await redlockUrls()
    const client = await connect(urls)
    const name = uniqueName('sem-redlock')
    const sem = client.semaphore(name, { permits: 2 })
    const [a, b] = [await sem.acquire({ ttl: 5_000 }), await sem.acquire({ ttl: 5_000 })]
    assert.equal(await sem.tryAcquire({ ttl: 5_000 }), null)
    for (const url of urls) {
      const raw = await Raw.connect(url)
      assert.equal(await raw.cmd('ZCARD', semKeys(name).holders), 2)
      raw.close()
    }
    await a.release()
    await b.release()
    await client.close()
  })

  test('rwLock: readers share, a waiting writer holds new readers off', async () => {
    const url = await redisUrl()
    const [client, other] = await Promise.all([connect(url), connect(url)])
    const raw = await Raw.connect(url)
    const name = uniqueName('rw')
    const k = rwKeys(name)
    const rw = client.rwLock(name)
    assert.ok(rw instanceof RwLock)
    assert.equal(rw.name, name)
    const r1 = await rw.reader.acquire({ ttl: 10_000 })
    const r2 = await rw.reader.acquire({ ttl: 10_000, wait: 0 })
    assert.ok(r2.fence > r1.fence)
    assert.equal(await raw.cmd('ZCARD', k.readers), 2)
    assert.equal(await rw.writer.tryAcquire({ ttl: 10_000 }), null)
    const writing = other.rwLock(name).writer.acquire({ ttl: 10_000, wait: 30_000 })
    await until('the writer in line', async () => (await raw.cmd('ZCARD', k.waiting)) === 1)
    assert.equal(await rw.reader.tryAcquire({ ttl: 10_000 }), null, 'writer preference')
    await r1.release()
    await r2.release()
    const w = await within(10_000, writing, 'the writer')
    assert.ok(w.fence > r2.fence)
    assert.deepEqual(await raw.cmd('ZRANGE', k.writer, 0, -1), [w.token])
    assert.equal(await rw.reader.tryAcquire({ ttl: 10_000 }), null)
    await w.release()
    await rw.writer.withLock({ ttl: 5_000, wait: 1_000 }, async (lease) => assert.equal(await lease.isHeld(), true))
    // A writer that times out leaves the line: readers get in again.
    const reader = await rw.reader.acquire({ ttl: 10_000 })
    await assert.rejects(rw.writer.acquire({ ttl: 10_000, wait: 100 }), NotAcquiredError)
    await until('the writer left the line', async () => (await raw.cmd('EXISTS', k.waiting)) === 0)
    const again = await rw.reader.tryAcquire({ ttl: 10_000 })
    assert.ok(again !== null)
    await again.release()
    await reader.release()
    assert.equal(await raw.cmd('EXISTS', k.readers, k.writer, k.waiting), 0)
    raw.close()
    await Promise.all([client.close(), other.close()])
  })
}

module.exports = { primitivesCases }
