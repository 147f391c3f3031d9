'use strict'
// Renewal controls (`maxHold`, `lease.stopRenewing()`), the same cases for
// the native addon (renewal.test.js) and fencelock/wasm (wasm/api.test.js):
// the loss comes through lease.signal at about maxHold + ttl, and MONITOR
// (filtered by the test's own lock key) shows which renewals reached Redis.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const { Monitor } = require('../../tests/support/fltest.js')
const { uniqueName, lockKey, within, aborted } = require('./helpers.js')

/** How many times a script PEXPIREd `key` (what renewals and extends do). */
async function pexpires(monitor, key) {
  await monitor.sync()
  return monitor.seen.filter(
    (s) => s.client === 'lua' && s.args.length >= 2 && s.args[0].toString().toUpperCase() === 'PEXPIRE' && s.args[1].toString('latin1') === key,
  ).length
}

async function keyGone(raw, key) {
  await within(3_000, (async () => {
    while ((await raw.cmd('EXISTS', key)) !== 0) await new Promise((r) => setTimeout(r, 5))
  })(), 'the key expired in Redis')
}

/**
 * `env()` -> { client, raw, url, LockLostError }, read when a test runs
 * (the suites connect in their `before`).
 */
function renewalTests(label, env) {
  test(`${label}maxHold stops renewal: lease.signal aborts at about maxHold + ttl, no PEXPIRE after`, async () => {
    const { client, raw, url, LockLostError } = env()
    const monitor = await Monitor.start(url)
    try {
      const name = uniqueName('maxhold')
      const t0 = performance.now()
      const lease = await client.acquire(name, { ttl: 1_000, autoRenew: true, maxHold: 2_000 })
      const reason = await within(15_000, aborted(lease.signal), 'loss')
      const elapsed = performance.now() - t0
      // Renewed past its first ttl, then left to run out.
      assert.ok(elapsed >= 2_000 && elapsed <= 2_000 + 1_000 + 3_000, `lost after ${elapsed} ms`)
      assert.ok(reason instanceof LockLostError, String(reason))
      assert.equal(lease.lost, true)
      assert.equal(lease.validFor, 0)
      await keyGone(raw, lockKey(name))
      const renewals = await pexpires(monitor, lockKey(name))
      assert.ok(renewals >= 1 && renewals <= 6, `${renewals} renewals`) // every ttl/3 until maxHold
      await assert.rejects(lease.release(), LockLostError)
      assert.equal(await pexpires(monitor, lockKey(name)), renewals, 'nothing renews it after the loss')
    } finally {
      monitor.close()
    }
  })

  test(`${label}stopRenewing: no renewal, lost at its validity end; idempotent`, async () => {
    const { client, raw, url, LockLostError } = env()
    const monitor = await Monitor.start(url)
    try {
      const name = uniqueName('stoprenew')
      const t0 = performance.now()
      const lease = await client.acquire(name, { ttl: 1_000, autoRenew: true })
      // The first renewal is ttl/3 away: stopped long before it.
      assert.equal(lease.stopRenewing(), undefined)
      lease.stopRenewing()
      assert.equal(lease.lost, false)
      assert.ok(lease.validFor > 0)
      const reason = await within(15_000, aborted(lease.signal), 'loss')
      assert.ok(performance.now() - t0 <= 1_000 + 3_000)
      assert.ok(reason instanceof LockLostError, String(reason))
      await keyGone(raw, lockKey(name))
      assert.equal(await pexpires(monitor, lockKey(name)), 0, 'renewed after stopRenewing')
      lease.stopRenewing() // still a no-op once lost
      await assert.rejects(lease.release(), LockLostError)
    } finally {
      monitor.close()
    }
  })

  test(`${label}an explicit extend after stopRenewing extends once`, async () => {
    const { client, raw, url } = env()
    const monitor = await Monitor.start(url)
    try {
      const name = uniqueName('stopextend')
      const lease = await client.acquire(name, { ttl: 1_000, autoRenew: true })
      lease.stopRenewing()
      const t0 = performance.now()
      await lease.extend(2_000)
      assert.ok(lease.validFor > 1_000)
      await within(15_000, aborted(lease.signal), 'loss')
      const elapsed = performance.now() - t0
      assert.ok(elapsed >= 1_000 && elapsed <= 2_000 + 3_000, `lost after ${elapsed} ms`)
      await keyGone(raw, lockKey(name))
      assert.equal(await pexpires(monitor, lockKey(name)), 1, "only the caller's extend")
    } finally {
      monitor.close()
    }
  })

  test(`${label}maxHold and stopRenewing change nothing without autoRenew`, async () => {
    const { client, raw } = env()
    const name = uniqueName('norenew')
    const lease = await client.acquire(name, { ttl: 5_000, maxHold: 1 })
    lease.stopRenewing()
    await lease.extend()
    assert.equal(lease.lost, false)
    assert.ok(lease.validFor > 4_000)
    await lease.release()
    assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
  })

  test(`${label}withLock with maxHold releases when the body returns`, async () => {
    const { client, raw } = env()
    const name = uniqueName('withmaxhold')
    const result = await client.withLock(name, { ttl: 1_000, autoRenew: true, maxHold: 60_000 }, async (lease) => {
      assert.equal((await raw.cmd('GET', lockKey(name))).toString(), lease.token)
      return 7
    })
    assert.equal(result, 7)
    assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
  })
}

module.exports = { renewalTests }
