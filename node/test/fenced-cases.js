'use strict'
// lease.fencedSet / lease.fencedHSet, the same cases for the addon
// (fenced.test.js) and fencelock/wasm (wasm/fenced.test.js): `connect(urls)`
// opens a client, `errors` are the flavour's classes.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { redisUrl, redlockUrls, uniqueName, Raw } = require('./helpers.js')

function fencedWriteCases({ connect, errors }) {
  const { StaleFenceError, LockLostError, RedisError, ClientClosedError } = errors

  test('a stale holder is refused; the same holder may write again', async () => {
    const url = await redisUrl()
    // The stale holder has a client of its own: one client's next acquire of
    // the name would find out its lease is gone (it waits in line behind it).
    const [client, stuck] = await Promise.all([connect(url), connect(url)])
    const raw = await Raw.connect(url)
    const [name, key] = [uniqueName('fenced'), uniqueName('fenced-data')]
    const zombie = await stuck.acquire(name, { ttl: 30_000 })
    await zombie.fencedSet(key, 'first')
    await zombie.fencedSet(key, Buffer.from('second')) // equal fences pass
    assert.equal(await raw.cmd('HGET', key, 'value'), 'second')
    assert.equal(await raw.cmd('HGET', key, 'fence'), String(zombie.fence))

    await client.forceRelease(name) // the zombie hung; an operator took it back
    const next = await client.acquire(name, { ttl: 30_000 })
    await next.fencedHSet(key, 'note', 'taken over')

    const err = await zombie.fencedSet(key, 'late').then(() => null, (e) => e)
    assert.ok(err instanceof StaleFenceError && err instanceof LockLostError, String(err))
    assert.equal(err.code, 'STALE_FENCE')
    assert.deepEqual([err.lockName, err.resource, err.fence, err.accepted], [name, key, zombie.fence, next.fence])
    assert.ok(!err.message.includes(zombie.token) && err.message.includes(key), err.message)
    await assert.rejects(zombie.fencedHSet(key, 'note', 'late'), StaleFenceError)
    assert.equal(await raw.cmd('HGET', key, 'value'), 'second')
    assert.equal(await raw.cmd('HGET', key, 'note'), 'taken over')
    await next.release()
    raw.close()
    await Promise.all([client.close(), stuck.close()])
  })

  test('bad calls write nothing', async () => {
    const url = await redisUrl()
    const client = await connect(url)
    const raw = await Raw.connect(url)
    const [name, key] = [uniqueName('fenced-bad'), uniqueName('fenced-bad-data')]
    const lease = await client.acquire(name, { ttl: 30_000 })
    await assert.rejects(lease.fencedSet('', 'v'), RangeError)
    await assert.rejects(lease.fencedHSet(key, '', 'v'), RangeError)
    await assert.rejects(lease.fencedHSet(key, 'fence', 'v'), RangeError)
    for (const bad of [42, null, undefined, {}, 1n]) {
      await assert.rejects(lease.fencedSet(bad, 'v'), TypeError)
      await assert.rejects(lease.fencedSet(key, bad), TypeError)
      await assert.rejects(lease.fencedHSet(key, bad, 'v'), TypeError)
    }
    assert.equal(await raw.cmd('EXISTS', key), 0)

    await raw.cmd('SET', key, 'plain') // not a hash: WRONGTYPE, untouched
    await assert.rejects(lease.fencedSet(key, 'v'), (e) => e instanceof RedisError && /WRONGTYPE/.test(e.message))
    assert.equal(await raw.cmd('GET', key), 'plain')

    await lease.release()
    const fresh = `${key}:fresh`
    await assert.rejects(lease.fencedSet(fresh, 'v'), (e) => e instanceof LockLostError && !(e instanceof StaleFenceError))
    const other = await client.acquire(name, { ttl: 30_000 })
    await client.close()
    await assert.rejects(other.fencedSet(fresh, 'v'), (e) => e instanceof ClientClosedError && e.lockName === name)
    assert.equal(await raw.cmd('EXISTS', fresh), 0)
    raw.close()
  })

  test('Redlock clients refuse fenced writes', async () => {
    const urls = await redlockUrls()
    const client = await connect(urls)
    const [name, key] = [uniqueName('fenced-redlock'), uniqueName('fenced-redlock-data')]
    const lease = await client.acquire(name, { ttl: 30_000 })
    await assert.rejects(lease.fencedSet(key, 'v'), (e) => e instanceof RangeError && /Redlock/.test(e.message))
    for (const u of urls) {
      const raw = await Raw.connect(u)
      assert.equal(await raw.cmd('EXISTS', key), 0, u)
      raw.close()
    }
    await lease.release()
    await client.close()
  })
}

module.exports = { fencedWriteCases }
