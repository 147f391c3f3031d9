// The package works from ESM (`import`) and CommonJS (`require`), with the
// same classes either way.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import * as viaFile from '../index.mjs'
import { Client, Lease, LockError, NotAcquiredError, LockLostError, RedisError } from 'fencelock'
import helpers from './helpers.js'

const require = createRequire(import.meta.url)

test('ESM and CommonJS expose the same classes', () => {
  const cjs = require('fencelock')
  const cjsFile = require('../index.js')
  for (const [key, value] of Object.entries({ Client, Lease, LockError, NotAcquiredError, LockLostError, RedisError })) {
    assert.equal(typeof value, 'function', key)
    assert.equal(cjs[key], value, key)
    assert.equal(cjsFile[key], value, key)
    assert.equal(viaFile[key], value, key)
  }
  assert.ok(new NotAcquiredError('x') instanceof LockError)
  assert.ok(new LockLostError('x') instanceof LockError)
  assert.ok(new RedisError('x') instanceof Error)
  assert.equal(new RedisError('x').code, 'REDIS')
})

test('ESM: acquire and release against Redis', async () => {
  const client = await Client.connect(await helpers.redisUrl())
  try {
    const name = helpers.uniqueName('esm')
    const lease = await client.acquire(name, { ttl: 5_000 })
    assert.ok(lease instanceof Lease)
    assert.equal(typeof lease.fence, 'bigint')
    assert.equal(await client.tryAcquire(name, { ttl: 5_000 }), null)
    await lease.release()
  } finally {
    await client.close()
  }
})

test('fencelock/sql: the same function from ESM and CommonJS', async () => {
  const esm = await import('fencelock/sql')
  assert.equal(typeof esm.fencedUpdate, 'function')
  assert.equal(esm.fencedUpdate, require('fencelock/sql').fencedUpdate)
  const { StaleFenceError } = await import('fencelock')
  assert.equal(StaleFenceError, require('fencelock').StaleFenceError)
  assert.ok(new StaleFenceError('x') instanceof LockLostError)
})
