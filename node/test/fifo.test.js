'use strict'
// Waiters of one client for one name are served in the order acquire was
// called (the place in the local line is taken inside the call).
const test = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { redisUrl, uniqueName } = require('./helpers.js')

test('a thousand waiters are served in call order', async () => {
  const client = await Client.connect(await redisUrl())
  const name = uniqueName('fifo')
  try {
    const holder = await client.acquire(name, { ttl: 30_000 })
    const served = []
    const waiters = []
    for (let i = 0; i < 1000; i++) {
      waiters.push(
        client.acquire(name, { ttl: 30_000 }).then(async (lease) => {
          served.push([i, lease.fence])
          await lease.release()
        }),
      )
    }
    await holder.release()
    await Promise.all(waiters)
    assert.equal(served.length, 1000)
    let inversions = 0
    for (let i = 1; i < served.length; i++) if (served[i][0] < served[i - 1][0]) inversions++
    assert.equal(inversions, 0)
    for (let i = 1; i < served.length; i++) assert.ok(served[i][1] > served[i - 1][1])
  } finally {
    await client.close()
  }
})
