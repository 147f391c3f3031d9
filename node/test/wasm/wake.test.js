'use strict'
// A fair mutex's release wakes only the first waiter in line on
// fencelock/wasm too, over ioredis and node-redis: the adapters pass each
// release message to the core (`Lock::handle_message`), which ignores a wake
// id naming another waiter. Counted by the test itself: each waiter's
// adapter is wrapped to count its fair_mutex_acquire calls and to note the
// message behind each call a message started.
const { test, after } = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const { Buffer } = require('node:buffer')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { Client, adapters } = require('fencelock/wasm')
const { redisUrl, uniqueName, lockKey, within, Raw } = require('../helpers.js')
const { vectors } = require('../../../tests/support/fltest.js')

const FAIR_ACQUIRE = vectors('commands.json').scripts.fair_mutex_acquire
const wakeId = (token) => crypto.createHash('sha1').update(token).digest('hex')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const APPS = {
  ioredis: async (url) => {
    const r = new Redis(url, { lazyConnect: true })
    await r.connect()
    return { adapter: adapters.ioredis(r), quit: () => r.quit() }
  },
  'node-redis': async (url) => {
    const r = await createClient({ url }).connect()
    return { adapter: adapters.nodeRedis(r), quit: () => r.quit() }
  },
}

const opened = []
after(() => Promise.all(opened.map((app) => app.quit().catch(() => {}))))

async function until(what, check, ms = 20_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await sleep(5)
  }
}

/** A lock client whose adapter counts its fair acquires (`tally.attempts`)
 * and lists the message behind each one a release message started
 * (`tally.woken`: sent while the message was being handled). */
async function countingClient(open, url) {
  const app = await open(url)
  opened.push(app)
  const inner = app.adapter
  const tally = { attempts: 0, woken: [] }
  let message = null
  const adapter = {
    ...inner,
    evalsha(sha, keys, args) {
      if (sha === FAIR_ACQUIRE) {
        tally.attempts++
        if (message !== null) tally.woken.push(message)
      }
      return inner.evalsha(sha, keys, args)
    },
    subscribe(channel, onMessage) {
      return inner.subscribe(channel, (m) => {
        message = m === undefined ? '(none)' : Buffer.from(m).toString()
        try {
          onMessage(m)
        } finally {
          message = null
        }
      })
    },
  }
  return { client: Client.fromRedis(adapter), tally }
}

for (const [kind, open] of Object.entries(APPS)) {
  test(`${kind}: a fair release wakes only the first of 3 waiters (one attempt per acquisition, not 5-6)`, async (t) => {
    const url = await redisUrl()
    const raw = await Raw.connect(url)
    const name = uniqueName('wasm-fair-wake')
    const waiting = `${lockKey(name)}:waiting`
    const holder = await countingClient(open, url)
    const held = await holder.client.acquire(name, { ttl: 30_000, fair: true })
    const waiters = []
    const started = Date.now()
    for (let i = 0; i < 3; i++) {
      const w = await countingClient(open, url)
      w.done = w.client.withLock(name, { ttl: 30_000, wait: 30_000, fair: true }, async (lease) => lease.token)
      waiters.push(w)
      // In line, having asked twice (turned away, then again once
      // subscribed), before the next one comes.
      await until(`waiter ${i} in line`, async () => w.tally.attempts >= 2 && (await raw.cmd('ZCARD', waiting)) === i + 1)
    }
    const before = waiters.map((w) => w.tally.attempts)
    await held.release()
    const tokens = await within(30_000, Promise.all(waiters.map((w) => w.done)), 'the waiters')
    const attempts = waiters.reduce((n, w, i) => n + w.tally.attempts - before[i], 0)
    t.diagnostic(`${attempts} fair_mutex_acquire calls for 3 acquisitions`)
    // Each release named the next in line, and only that waiter asked at
    // once: a message naming another (or carrying nothing) started nothing.
    waiters.forEach((w, i) => {
      for (const m of w.tally.woken) assert.equal(m, wakeId(tokens[i]), `waiter ${i} asked on a message for someone else`)
    })
    assert.ok(waiters.some((w) => w.tally.woken.length > 0), 'no waiter was woken by its own wake id')
    // One attempt each, the winning one. A waiter's retry timer fires 1 s
    // (plus jitter) after its last attempt, all made after `started`: on a
    // machine that stalled that long, one more each is allowed. (Every
    // waiter woken by every release makes it 3 + 2 + 1, or 5.)
    const timers = Date.now() - started < 950 ? 0 : 3
    assert.ok(attempts <= 3 + timers, `${attempts} attempts after the release`)
    assert.equal(await raw.cmd('EXISTS', lockKey(name), waiting), 0)
    raw.close()
    await Promise.all([holder, ...waiters].map((c) => c.client.close()))
  })
}
