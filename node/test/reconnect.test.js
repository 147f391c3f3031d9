'use strict'
// A Redis restart is invisible to the next call: a command that provably
// never reached the server is sent on a fresh connection, retried with a
// short backoff within the call's bounds (the wait for acquire).
const test = require('node:test')
const assert = require('node:assert/strict')
const { Client, RedisError } = require('..')
const { startRedis, uniqueName, lockKey, within } = require('./helpers.js')


// A call written before the client hears of the crash (broken pipe, EOF) has
// an unknown outcome and fails at once, never resent; a try-once call fails
// either way and leaves the connection known dead, so the next call waits for
// the server instead.
async function untilKnownDown (client, name) {
  await assert.rejects(client.acquire(`${name}-probe`, { ttl: 5000, wait: 0 }), RedisError)
}

test('the first call after a restart succeeds', async () => {
  const server = await startRedis()
  const client = await Client.connect(server.url)
  const name = uniqueName('restart')
  try {
    await (await client.acquire(name, { ttl: 5000, wait: 0 })).release()
    for (const wait of [0, 2000, undefined]) {
      await server.kill()
      await server.start()
      const t = performance.now()
      const lease = await client.acquire(name, { ttl: 5000, wait })
      assert.ok(performance.now() - t < 500, `${performance.now() - t} ms`)
      const raw = await server.raw()
      assert.equal(await raw.cmd('GET', lockKey(name)), lease.token)
      raw.close()
      await lease.release()
    }
  } finally {
    await client.close()
    await server.stop()
  }
})

test('a blocking acquire succeeds once the server is back', async () => {
  const server = await startRedis()
  const client = await Client.connect(server.url)
  const name = uniqueName('down-up')
  try {
    await (await client.acquire(name, { ttl: 5000, wait: 0 })).release()
    await server.kill()
    await untilKnownDown(client, name)
    const t = performance.now()
    const acquiring = client.acquire(name, { ttl: 5000, wait: 10_000 })
    // The outage the test is about.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    await server.start()
    const lease = await within(5000, acquiring, 'acquire after the restart')
    assert.ok(performance.now() - t >= 1000)
    await lease.release()
  } finally {
    await client.close()
    await server.stop()
  }
})

test('a down server is a RedisError at the end of the wait', async () => {
  const server = await startRedis()
  const client = await Client.connect(server.url)
  try {
    await (await client.acquire(uniqueName('up'), { ttl: 5000, wait: 0 })).release()
    await server.kill()
    await untilKnownDown(client, uniqueName('probe'))
    const t = performance.now()
    await assert.rejects(client.acquire(uniqueName('down'), { ttl: 5000, wait: 500 }), (err) => {
      assert.ok(err instanceof RedisError, String(err))
      assert.match(err.message, /refused/)
      return true
    })
    const elapsed = performance.now() - t
    assert.ok(elapsed > 200 && elapsed < 1500, `${elapsed} ms`)
  } finally {
    await client.close()
    await server.stop()
  }
})
