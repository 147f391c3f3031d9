'use strict'
// Honest timeouts: an acquire whose reply does not come reports within the
// response timeout, not twice it (its compensating release goes on in the
// background), and close() waits for that release. A private server stalled
// by DEBUG SLEEP (the same scenario as bindings/driver/tests/timeouts.rs).
//
// Timing: with responseTimeout T the fix reports after T, the bug after 2T
// (the release waited out its own timeout first); the server sleeps S > 2T
// so that it answers neither in time. T = 2 s, S = 6 s: the bound 3 s leaves
// a second of scheduling delay either way, enough on a loaded 2-core machine.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { once } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client, RedisError } = require('..')
const { Raw, uniqueName, lockKey } = require('./helpers.js')
const { startServer } = require('../../tests/support/fltest.js')

const TIMEOUT = 2000
const SLEEP = 6

/** Does a PING on a new connection go unanswered for 100 ms? */
async function asleep(port) {
  const ping = net.connect(port, '127.0.0.1')
  try {
    await once(ping, 'connect')
    ping.write('PING\r\n')
    const answered = once(ping, 'data').then(() => true, () => true)
    return !(await Promise.race([answered, sleep(100).then(() => false)]))
  } finally {
    ping.destroy()
  }
}

/** DEBUG SLEEP on a connection of its own; resolves once the server is asleep. */
async function stall(port, secs) {
  const sleeper = net.connect(port, '127.0.0.1')
  await once(sleeper, 'connect')
  sleeper.on('error', () => {})
  const arg = String(secs)
  sleeper.write(`*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$${arg.length}\r\n${arg}\r\n`)
  const deadline = Date.now() + 5000
  while (!(await asleep(port))) {
    assert.ok(Date.now() < deadline, 'the server never stalled')
  }
  return sleeper
}

/** Poll `condition` until it holds (the state the test waits for), failing after `ms`. */
async function eventually(ms, what, condition) {
  const deadline = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await sleep(5)
  }
}

test('a timed-out acquire reports within the response timeout; close() waits for its release', async () => {
  // Redis 7 refuses DEBUG unless enabled.
  const server = await startServer({ args: ['--enable-debug-command', 'yes'] })
  const name = uniqueName('stalled')
  const client = await Client.connect(server.url, { responseTimeout: TIMEOUT })
  let sleeper
  try {
    const warm = await client.acquire(`${name}:warm-up`, { ttl: 5000, wait: 0 }) // scripts loaded
    await warm.release()
    sleeper = await stall(server.port, SLEEP)
    const t = performance.now()
    const err = await client.acquire(name, { ttl: 30_000, wait: 0 }).then(
      () => assert.fail('acquired from a sleeping server'),
      (e) => e,
    )
    const reported = performance.now() - t
    assert.ok(err instanceof RedisError, String(err))
    assert.ok(reported >= TIMEOUT - 100, `reported after ${reported} ms`)
    // Not doubled by the compensating release's own timeout (2T = 4 s).
    assert.ok(reported < 1.5 * TIMEOUT, `reported after ${reported} ms`)
    // close() waits for the compensating release (timed out at about 2T;
    // without the wait close() resolves right after the report).
    await client.close()
    const closed = performance.now() - t
    assert.ok(closed >= 2 * TIMEOUT - 100, `closed after ${closed} ms`)
    // Once awake, the server runs the acquire and then its release: the
    // lock is not left held (its TTL is 30 s).
    const raw = await Raw.connect(server.url)
    try {
      await eventually((SLEEP + 10) * 1000, 'the compensating release ran', async () => (await raw.cmd('EXISTS', lockKey(name))) === 0)
    } finally {
      raw.close()
    }
  } finally {
    await client.close()
    sleeper?.destroy()
    await server.stop()
  }
})
