'use strict'
// A Redlock node that stalls without refusing (its writes paused: it takes
// commands and answers none), the same case for the addon (stalled.test.js)
// and fencelock/wasm (wasm/stalled.test.js): `connect(urls, options)` opens a
// client. An acquire and a release are decided by the other two nodes'
// replies: with a response timeout longer than the TTL, a call that waited
// for the stalled node would end with no validity left (NotAcquiredError).
const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const { startRedis, uniqueName, lockKey, within } = require('./helpers.js')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function stalledCases({ connect }) {
  // Stopped after the file, once the application's clients on them quit.
  const servers = []
  after(() => Promise.all(servers.map((s) => s.stop())))

  test('a Redlock acquire and release do not wait for a stalled node', async () => {
    servers.push(...(await Promise.all([0, 1, 2].map(() => startRedis()))))
    const raws = await Promise.all(servers.map((s) => s.raw()))
    const [live, stalled] = [raws.slice(0, 2), raws[2]]
    const name = uniqueName('stalled')
    const key = lockKey(name)
    const client = await connect(servers.map((s) => s.url), { responseTimeout: 60_000 })
    try {
      // The two live nodes' counters agree and run ahead of the clocks, so
      // they issue the same fence: a majority that needs no write-back.
      const ahead = 9_000_000_000_000_000n
      await Promise.all(live.map((r) => r.cmd('SET', `${key}:fence`, String(ahead))))
      await stalled.cmd('CLIENT', 'PAUSE', '60000', 'WRITE')
      const lease = await within(10_000, client.acquire(name, { ttl: 10_000, wait: 5_000 }), 'acquire beside a stalled node')
      assert.equal(lease.fence, ahead + 1n)
      assert.deepEqual(await Promise.all(raws.map((r) => r.cmd('GET', key))), [lease.token, lease.token, null])
      await within(10_000, lease.release(), 'release beside a stalled node')
      assert.deepEqual(await Promise.all(live.map((r) => r.cmd('EXISTS', key))), [0, 0])
    } finally {
      await stalled.cmd('CLIENT', 'UNPAUSE')
      await client.close()
    }
    // Back, the node runs the acquire queued there and then its release.
    await within(10_000, (async () => {
      while ((await stalled.cmd('EXISTS', key)) !== 0) await sleep(10)
    })(), 'nothing held on the node that stalled')
    for (const r of raws) r.close()
  })
}

module.exports = { stalledCases }
