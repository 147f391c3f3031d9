'use strict'
// The README's least-privilege ACL line (read from the README, so the two
// cannot drift apart) is enough for the core cases: acquire, extend, wait,
// hand-off on release, auto-renewal, release. A user without channel rights
// still releases (the refused PUBLISH is not an error; waiters use their timer).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { startRedis, uniqueName, lockKey } = require('./helpers.js')

function readmeAcl() {
  const readme = fs.readFileSync(path.join(__dirname, '../../README.md'), 'utf8')
  const line = readme.split('\n').find((l) => l.startsWith('ACL SETUSER app on '))
  return line.split(/\s+/).slice(1).map((part) => (part === '>password' ? '>acl-pass' : part))
}

test('the README ACL line is enough for the core cases', async () => {
  const server = await startRedis()
  const admin = await server.raw()
  await admin.cmd('ACL', ...readmeAcl())
  admin.close()
  const url = `redis://app:acl-pass@127.0.0.1:${server.port}/0`
  const holderClient = await Client.connect(url)
  const other = await Client.connect(url)
  const name = uniqueName('acl')
  try {
    const holder = await holderClient.acquire(name, { ttl: 5000, wait: 5000 })
    await holder.extend()
    assert.equal(await other.tryAcquire(name, { ttl: 5000 }), null)
    const waiting = other.acquire(name, { ttl: 5000, wait: 5000 }).then((lease) => [lease, performance.now()])
    await new Promise((resolve) => setTimeout(resolve, 200)) // let the waiter subscribe
    const released = performance.now()
    await holder.release()
    const [lease, got] = await waiting
    assert.ok(got - released < 500, `${got - released} ms`)
    await lease.release()
    // Past its 1 s TTL only through renewals (each may run ~650 ms late under load).
    const renewed = await holderClient.acquire(name, { ttl: 1_000, autoRenew: true })
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    assert.equal(renewed.lost, false)
    assert.equal(await other.tryAcquire(name, { ttl: 5000 }), null) // still held in Redis
    await renewed.release()
  } finally {
    await holderClient.close()
    await other.close()
    await server.stop()
  }
})

/** EVALSHA calls since the last CONFIG RESETSTAT. */
async function evalshaCalls(raw) {
  const info = String(await raw.cmd('INFO', 'commandstats'))
  const m = /^cmdstat_evalsha:calls=(\d+)/m.exec(info)
  return m ? Number(m[1]) : 0
}

/** Poll `condition` until it holds (the state the test waits for), failing after `ms`. */
async function eventually(ms, what, condition) {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

test('a user without channel rights releases; waiters in other clients fall back to their timer', async () => {
  // The README's line minus its channel grant: Redis refuses the release
  // script's PUBLISH (and the waiters' SUBSCRIBE) for this user.
  const acl = readmeAcl().map((part) => (part.startsWith('&') ? 'resetchannels' : part))
  assert.ok(acl.includes('resetchannels'))
  const server = await startRedis()
  const admin = await server.raw()
  await admin.cmd('ACL', ...acl)
  const url = `redis://app:acl-pass@127.0.0.1:${server.port}/0`
  const holderClient = await Client.connect(url)
  const other = await Client.connect(url)
  const name = uniqueName('acl-nochannel')
  const key = lockKey(name)
  const denied = await admin.cmd('ACL', 'DRYRUN', 'app', 'PUBLISH', `${key}:released`, 'x')
  assert.match(String(denied), /channel/, 'the case under test: PUBLISH is refused') // 'OK' if allowed
  try {
    // release() itself: no RedisError, the DEL stands although PUBLISH failed.
    const lease = await holderClient.acquire(name, { ttl: 10_000, wait: 0 })
    await lease.release()
    assert.equal(await admin.cmd('EXISTS', key), 0)
    assert.equal(lease.lost, false)

    // The end of withLock, while a waiter in another client waits.
    let waiting
    const result = await holderClient.withLock(name, { ttl: 10_000, wait: 0 }, async () => {
      await admin.cmd('CONFIG', 'RESETSTAT')
      waiting = other.acquire(name, { ttl: 10_000, wait: 10_000 })
      waiting.catch(() => {}) // awaited below
      await eventually(5000, "the waiter's first (refused) attempt", async () => (await evalshaCalls(admin)) >= 1)
      return 'done'
    })
    const released = performance.now()
    assert.equal(result, 'done') // withLock resolved: its release did not throw
    const got = await waiting
    assert.ok(performance.now() - released < 5000, 'woken by its timer, long before its wait ran out')
    assert.equal(await admin.cmd('GET', key), got.token)
    await got.release()
    assert.equal(await admin.cmd('EXISTS', key), 0)
    // Nothing left but the fence counter, which expires by itself.
    assert.deepEqual(await admin.cmd('KEYS', 'fencelock:*'), [`${key}:fence`])
    assert.ok((await admin.cmd('PTTL', `${key}:fence`)) > 0)
  } finally {
    await holderClient.close()
    await other.close()
    admin.close()
    await server.stop()
  }
})
