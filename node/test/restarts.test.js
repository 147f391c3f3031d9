'use strict'
// What production Redis does to a lock, through the Node API: restarts
// without persistence, Redlock nodes lost and found, rolling restarts, names
// used once, tiny TTLs, the `lost` flag and why an acquire failed. Private
// redis-servers that the tests kill and start again (empty).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client, NotAcquiredError, LockLostError } = require('..')
const { Raw, startRedis, redisUrl, uniqueName, lockKey } = require('./helpers.js')

const fast = { connectTimeout: 500, responseTimeout: 500 }

/** Kill (no goodbye) and start again on the same port, empty. */
async function restart(server) {
  await server.kill()
  await server.start()
}

/** Poll `condition` until it holds (the state the test waits for), failing after `ms`. */
async function eventually(ms, what, condition) {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await sleep(5)
  }
}

async function scanCount(raw, pattern) {
  let cursor = '0'
  let n = 0
  do {
    const [next, batch] = await raw.cmd('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = next.toString()
    n += batch.length
  } while (cursor !== '0')
  return n
}

/** EVAL + EVALSHA calls since the last CONFIG RESETSTAT. */
async function scriptCalls(raw) {
  const info = String(await raw.cmd('INFO', 'commandstats'))
  let calls = 0
  for (const m of info.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm)) calls += Number(m[1])
  return calls
}

test('the fence after a restart without persistence is above every earlier fence', async () => {
  const server = await startRedis()
  const name = uniqueName('restart-fence')
  try {
    let client = await Client.connect(server.url, fast)
    let highest = 0n
    for (let i = 0; i < 50; i++) {
      const lease = await client.acquire(name, { ttl: 10_000, wait: 0 })
      assert.ok(lease.fence > highest)
      highest = lease.fence
      await lease.release()
    }
    await client.close()
    await restart(server)
    const raw = await server.raw()
    assert.equal(await raw.cmd('GET', `${lockKey(name)}:fence`), null, 'the counter is gone')
    raw.close()
    client = await Client.connect(server.url, fast)
    const lease = await client.acquire(name, { ttl: 10_000, wait: 0 })
    assert.ok(lease.fence > highest, `${lease.fence} after, ${highest} before`)
    await lease.release()
    await client.close()
  } finally {
    await server.stop()
  }
})

test('20,000 names used once leave no key once the grace has passed', async () => {
  const server = await startRedis()
  const run = uniqueName('once')
  const client = await Client.connect(server.url, { fenceGrace: 300 })
  const raw = await server.raw()
  try {
    const batch = 100
    for (let i = 0; i < 20_000; i += batch) {
      await Promise.all(
        Array.from({ length: batch }, async (_, j) => {
          const lease = await client.acquire(`${run}:${i + j}`, { ttl: 1000, wait: 0 })
          // A machine stalled past the 1 s ttl makes this LOCK_LOST (the key
          // expired first): keys must leave Redis either way.
          await lease.release().catch((e) => {
            if (e.code !== 'LOCK_LOST') throw e
          })
        }),
      )
    }
    await eventually(30_000, 'every key of the 20,000 locks expired', async () => (await scanCount(raw, `fencelock:{${run}:*`)) === 0)
    assert.equal(await raw.cmd('DBSIZE'), 0)
  } finally {
    raw.close()
    await client.close()
    await server.stop()
  }
})

test('Redlock 3 of 5, 2 restarted empty and 2 down: acquired within the wait; too few: reason unreachable, at once with wait 0', async () => {
  const servers = await Promise.all([0, 1, 2, 3, 4].map(() => startRedis()))
  const name = uniqueName('redlock')
  const client = await Client.connect(servers.map((s) => s.url), fast)
  let probe
  try {
    const first = await client.acquire(name, { ttl: 10_000, wait: 5000 })
    await first.release()
    await restart(servers[0])
    await restart(servers[1])
    await servers[2].kill()
    await servers[3].kill()
    // For the wait: 0 check below: a second client, connected while a quorum is up.
    probe = await Client.connect(servers.map((s) => s.url), fast)
    let t = Date.now()
    const lease = await client.acquire(name, { ttl: 10_000, wait: 5000 })
    assert.ok(Date.now() - t < 5000)
    assert.ok(lease.fence > first.fence)
    await lease.release()

    await servers[4].kill()
    t = Date.now()
    const err = await client.acquire(name, { ttl: 10_000, wait: 400 }).catch((e) => e)
    assert.ok(err instanceof NotAcquiredError, String(err))
    assert.ok(Date.now() - t >= 400, 'retried until the wait ran out')
    assert.equal(err.reason, 'unreachable')
    assert.match(err.message, /3 of 5 nodes unreachable/)
    assert.equal(err.lockName, name)
    assert.equal(err.name, 'NotAcquiredError')
    await client.close() // awaits its background (compensating) releases

    // wait: 0 fails at once: one round (an acquire on each reachable node,
    // then its compensating release), no retry, no backoff.
    const raw = await servers[0].raw()
    await raw.cmd('CONFIG', 'RESETSTAT')
    try {
      t = performance.now()
      const failed = await probe.acquire(name, { ttl: 10_000, wait: 0 }).catch((e) => e)
      const took = performance.now() - t
      assert.ok(failed instanceof NotAcquiredError, String(failed))
      assert.equal(failed.reason, 'unreachable')
      assert.match(failed.message, /3 of 5 nodes unreachable/)
      // Refused connections answer in milliseconds: far below the 500 ms
      // connect/response timeouts and the retry backoff's 1 s cap.
      assert.ok(took < 500, `${took} ms`)
    } finally {
      await probe.close() // awaits the compensating release
    }
    assert.equal(await scriptCalls(raw), 2, 'one round on node 0: acquire + compensating release, no retry')
    raw.close()
  } finally {
    await client.close()
    await probe?.close()
    await Promise.all(servers.map((s) => s.stop()))
  }
})

test('a rolling restart of all 3 nodes keeps an auto-renewed lease', async () => {
  const servers = await Promise.all([0, 1, 2].map(() => startRedis()))
  const name = uniqueName('rolling')
  const client = await Client.connect(servers.map((s) => s.url), fast)
  try {
    // TTL and outage scaled together (were 300 ms and 1 s): a 1 s TTL lets a
    // renewal run ~650 ms late under load; the 2 s outage is still two TTLs,
    // so the restarted node comes back empty and only a renewal refills it.
    const lease = await client.acquire(name, { ttl: 1_000, wait: 0, autoRenew: true })
    for (const [n, server] of servers.entries()) {
      await server.kill()
      await sleep(2_000) // the outage itself: longer than the TTL
      assert.equal(lease.lost, false, `lost while node ${n} was down`)
      await server.start()
      const raw = await server.raw()
      await eventually(5000, 'a renewal put the key back on the restarted node', async () => {
        const v = await raw.cmd('GET', lockKey(name))
        return v !== null && v.toString() === lease.token
      })
      raw.close()
    }
    assert.equal(lease.lost, false)
    assert.ok(lease.validFor > 0)
    await lease.release()
  } finally {
    await client.close()
    await Promise.all(servers.map((s) => s.stop()))
  }
})

for (const nodes of [1, 3]) {
  test(`a tiny ttl is a RangeError with ${nodes} URL(s) and writes nothing`, async () => {
    const servers = await Promise.all(Array.from({ length: nodes }, () => startRedis()))
    const urls = servers.map((s) => s.url)
    const client = await Client.connect(nodes === 1 ? urls[0] : urls)
    try {
      for (const ttl of [1, 2, 1.5]) {
        await assert.rejects(client.acquire(uniqueName('tiny'), { ttl, wait: 0 }), RangeError)
        await assert.rejects(client.tryAcquire(uniqueName('tiny'), { ttl }), RangeError)
      }
      for (const s of servers) {
        const raw = await s.raw()
        assert.equal(await raw.cmd('DBSIZE'), 0)
        raw.close()
      }
    } finally {
      await client.close()
      await Promise.all(servers.map((s) => s.stop()))
    }
  })
}

test('lease.lost is true once release or extend rejected with LockLostError', async () => {
  const url = await redisUrl()
  const client = await Client.connect(url)
  const raw = await Raw.connect(url)
  try {
    for (const op of ['release', 'extend']) {
      const name = uniqueName('lost')
      const lease = await client.acquire(name, { ttl: 50, wait: 0 })
      await eventually(5000, 'the lock key expired', async () => (await raw.cmd('PTTL', lockKey(name))) === -2)
      const err = await lease[op]().catch((e) => e)
      assert.ok(err instanceof LockLostError, `${op}: ${err}`)
      assert.equal(err.lockName, name)
      assert.equal(lease.lost, true, op)
    }
  } finally {
    raw.close()
    await client.close()
  }
})

test('NotAcquiredError.reason is "held" when someone else holds the lock', async () => {
  const url = await redisUrl()
  const holder = await Client.connect(url)
  const other = await Client.connect(url)
  try {
    const name = uniqueName('held')
    const lease = await holder.acquire(name, { ttl: 10_000 })
    for (const wait of [0, 100]) {
      const err = await other.acquire(name, { ttl: 10_000, wait }).catch((e) => e)
      assert.ok(err instanceof NotAcquiredError, String(err))
      assert.equal(err.reason, 'held')
      assert.equal(err.lockName, name)
      assert.ok(!err.message.includes(lease.token))
    }
    const buf = Buffer.concat([Buffer.from(uniqueName('raw')), Buffer.from([0xff, 0x01])])
    const held = await holder.acquire(buf, { ttl: 10_000 })
    const err = await other.acquire(buf, { ttl: 10_000, wait: 0 }).catch((e) => e)
    assert.ok(Buffer.isBuffer(err.lockName) && err.lockName.equals(buf))
    await held.release()
    await lease.release()
  } finally {
    await holder.close()
    await other.close()
  }
})
