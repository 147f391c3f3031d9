'use strict'
// Names that cannot alias and options that cannot be misspelled: a string
// with a lone surrogate is a RangeError (never rewritten to U+FFFD),
// lease.name is the string passed, an unknown option key is a TypeError.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { redisUrl, uniqueName, lockKey } = require('./helpers.js')
const { Redis } = require('../../tests/support/fltest.js')

test('a name with a lone surrogate is a RangeError and writes nothing', async () => {
  const url = await redisUrl()
  const client = await Client.connect(url)
  const raw = await Redis.connect(url, { text: true })
  try {
    const base = uniqueName('surrogate')
    for (const bad of [`${base}\uD800`, `${base}\uDC00`, `\uDBFF${base}`, `${base}\uDC00\uD800`]) {
      for (const call of [
        () => client.acquire(bad, { ttl: 1000 }),
        () => client.tryAcquire(bad, { ttl: 1000 }),
        () => client.withLock(bad, { ttl: 1000 }, async () => {}),
      ]) {
        await assert.rejects(call(), (err) => err instanceof RangeError && err.code === 'ERR_INVALID_ARG_VALUE')
      }
    }
    assert.equal(await raw.cmd('EXISTS', lockKey(`${base}\uFFFD`)), 0)
    // A well-formed pair is a valid name, returned exactly.
    const lease = await client.acquire(`${base}\uD83D\uDE00`, { ttl: 1000 })
    assert.equal(lease.name, `${base}\uD83D\uDE00`)
    await lease.release()
  } finally {
    raw.close()
    await client.close()
  }
})

test('unknown option keys are a TypeError', async () => {
  const client = await Client.connect(await redisUrl())
  try {
    const name = uniqueName('options')
    for (const call of [
      () => client.acquire(name, { ttl: 1000, wiat: 100 }),
      () => client.tryAcquire(name, { ttl: 1000, autorenew: true }),
      () => client.withLock(name, { ttl: 1000, Wait: 0 }, async () => {}),
    ]) {
      await assert.rejects(call(), (err) => err instanceof TypeError && /unknown key/.test(err.message))
    }
    await assert.rejects(Client.connect(await redisUrl(), { responsetimeout: 10 }), TypeError)
    await assert.rejects(Client.connect(await redisUrl(), { tls: { caFile: 'x' } }), TypeError)
    // Nothing was taken by the rejected calls.
    const lease = await client.tryAcquire(name, { ttl: 1000 })
    assert.ok(lease)
    await lease.release()
  } finally {
    await client.close()
  }
})
