'use strict'
// The README's least-privilege ACL line (read from the README, so the two
// cannot drift apart) is enough for the core cases: acquire, extend, wait,
// hand-off on release, auto-renewal, release.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { startRedis, uniqueName } = require('./helpers.js')

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
    const renewed = await holderClient.acquire(name, { ttl: 300, autoRenew: true })
    await new Promise((resolve) => setTimeout(resolve, 700)) // two renewals
    assert.equal(renewed.lost, false)
    await renewed.release()
  } finally {
    await holderClient.close()
    await other.close()
    await server.stop()
  }
})
