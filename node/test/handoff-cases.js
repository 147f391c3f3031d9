'use strict'
// The one-round-trip handoff, the same cases for the addon (handoff.test.js)
// and fencelock/wasm (wasm/handoff.test.js): `connect(urls)` opens a client.
// A release while a waiter of the same client is in line hands it the lock
// inside the release script (MONITOR: one EVALSHA of the handoff script, no
// acquire of the waiter's), with a greater fence; a waiter aborted while
// that is in flight leaves nothing held; Redlock; a waiter of another
// client still gets its turn.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { redisUrl, redlockUrls, uniqueName, lockKey, within, Raw } = require('./helpers.js')
const { Monitor, scriptCalls, vectors } = require('../../tests/support/fltest.js')

const SCRIPTS = vectors('commands.json').scripts
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The scripts run on `name`'s lock key: [{ script, args: [string] }]. */
async function scriptsOn(monitor, name) {
  await monitor.sync()
  const lock = Buffer.from(lockKey(name))
  return scriptCalls(monitor.seen, SCRIPTS)
    .filter((c) => c.keys[0].equals(lock))
    .map((c) => ({ script: c.script, args: c.args.map(String) }))
}

/** Poll a condition (a state the test waits for, not a sleep-to-fix). */
async function until(what, condition) {
  const deadline = Date.now() + 10_000
  while (!(await condition())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(2)
  }
}

function handoffCases({ connect }) {
  test('a release hands the lock to a waiter of the same client in one round trip', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('handoff')
    const holder = await client.acquire(name, { ttl: 60_000 })
    // In line inside the call; its own ttl differs from the holder's.
    const waiting = client.acquire(name, { ttl: 5_000, wait: 30_000 })
    const monitor = await Monitor.start(url)
    await holder.release()
    const lease = await within(10_000, waiting, 'the waiter')
    const calls = await scriptsOn(monitor, name)
    monitor.close()
    assert.deepEqual(calls.map((c) => c.script), ['handoff'], 'no acquire of its own')
    assert.deepEqual(calls[0].args.slice(0, 3), [holder.token, lease.token, '5000'])
    assert.ok(lease.fence > holder.fence, `${lease.fence} after ${holder.fence}`)
    assert.equal(await raw.cmd('GET', lockKey(name)), lease.token)
    assert.equal(await raw.cmd('GET', `${lockKey(name)}:fence`), String(lease.fence))
    assert.ok(lease.validFor > 0 && lease.validFor <= 5_000, `validFor ${lease.validFor}`)
    await lease.release()
    assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
    raw.close()
    await client.close()
  })

  test('a waiter aborted while the handoff is in flight leaves nothing held', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const name = uniqueName('handoff-aborted')
    const holder = await client.acquire(name, { ttl: 60_000 })
    const controller = new AbortController()
    const waiting = client.acquire(name, { ttl: 60_000, signal: controller.signal })
    waiting.catch(() => {})
    const monitor = await Monitor.start(url)
    // Hold the server's writes: the release and its handoff wait there
    // while the waiter's caller gives up.
    await raw.cmd('CLIENT', 'PAUSE', '10000', 'WRITE')
    const release = holder.release()
    try {
      await until('the release to wait at the server', async () => /blocked_clients:[1-9]/.test(await raw.cmd('INFO', 'clients')))
      controller.abort()
    } finally {
      // A shared server: never leave it paused for the next test.
      await raw.cmd('CLIENT', 'UNPAUSE')
    }
    await release
    await assert.rejects(waiting, (err) => err.name === 'AbortError')
    await until('the waiter to give the lock back', async () => (await raw.cmd('EXISTS', lockKey(name))) === 0)
    const calls = await scriptsOn(monitor, name)
    monitor.close()
    assert.deepEqual(calls.map((c) => c.script), ['handoff', 'release'], 'handed over, then given back')
    assert.equal(calls[1].args[0], calls[0].args[1], 'by the waiter, with its token')
    const again = await client.tryAcquire(name, { ttl: 60_000 })
    assert.ok(again !== null, 'nothing held')
    await again.release()
    raw.close()
    await client.close()
  })

  test('Redlock: the lock is handed over on every node', async () => {
    const urls = await redlockUrls()
    const client = await connect(urls)
    const name = uniqueName('handoff-redlock')
    const holder = await client.acquire(name, { ttl: 60_000 })
    const waiting = client.acquire(name, { ttl: 60_000, wait: 30_000 })
    const monitors = await Promise.all(urls.map((u) => Monitor.start(u)))
    await holder.release()
    const lease = await within(10_000, waiting, 'the waiter')
    assert.ok(lease.fence > holder.fence)
    for (const [i, monitor] of monitors.entries()) {
      const calls = (await scriptsOn(monitor, name)).map((c) => c.script)
      monitor.close()
      // A node a millisecond behind may be raised to the majority's fence.
      assert.equal(calls[0], 'handoff', `${urls[i]}: ${calls}`)
      assert.ok(!calls.includes('acquire'), `${urls[i]}: ${calls}`)
    }
    await lease.release()
    for (const url of urls) {
      const raw = await Raw.connect(url)
      assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
      raw.close()
    }
    await client.close()
  })

  test('a waiter of another client still gets its turn', async () => {
    const url = await redisUrl()
    const [busy, other] = await Promise.all([connect(url), connect(url)])
    const name = uniqueName('handoff-fair')
    let stop = false
    let rounds = 0
    // Four workers of one client take the lock back to back: with nobody
    // else waiting, each release hands it to the next of them.
    const workers = [0, 1, 2, 3].map(async () => {
      while (!stop) {
        const lease = await busy.acquire(name, { ttl: 10_000, wait: 30_000 })
        rounds++
        await lease.release()
      }
    })
    await until('the busy client to get going', async () => rounds > 50)
    // The other client's waiter listens: releases then free the lock and
    // publish, and it gets its turn (the workers never stop on their own).
    for (let i = 0; i < 3; i++) {
      const lease = await within(30_000, other.acquire(name, { ttl: 10_000, wait: 30_000 }), 'the other client')
      await lease.release()
    }
    stop = true
    await Promise.all(workers)
    await Promise.all([busy.close(), other.close()])
  })
}

module.exports = { handoffCases }
