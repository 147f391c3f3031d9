'use strict'
// The event loop never blocks and nothing keeps a process alive after
// close(): a script that connects, locks and closes exits on its own.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { redisUrl, uniqueName } = require('./helpers.js')

function runScript(source, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', source], {
      cwd: path.join(__dirname, '..'),
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`process still running after 15 s (a handle keeps it alive):\n${out}`))
    }, 15_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

const script = (body) => `
const { Client } = require('fencelock')
;(async () => {
  const client = await Client.connect(process.env.URL)
  ${body}
  await client.close()
  console.log('closed')
})().catch((e) => { console.error(e); process.exit(3) })
`

test('a process exits after close(): released lease', async () => {
  const { code, out } = await runScript(
    script(`const lease = await client.acquire(process.env.NAME, { ttl: 10000, autoRenew: true }); await lease.release()`),
    { URL: await redisUrl(), NAME: uniqueName('exit1') },
  )
  assert.equal(code, 0, out)
  assert.match(out, /closed/)
})

test('a process exits after close(): lease still held with autoRenew, pending timers in Rust', async () => {
  const { code, out } = await runScript(
    script(`
      const lease = await client.acquire(process.env.NAME, { ttl: 10000, autoRenew: true })
      lease.signal.addEventListener('abort', () => {})
      const waiter = await Client.connect(process.env.URL)
      await waiter.tryAcquire(process.env.NAME, { ttl: 1000 })
      await waiter.close()`),
    { URL: await redisUrl(), NAME: uniqueName('exit2') },
  )
  assert.equal(code, 0, out)
})

test('the event loop keeps running while acquire waits in Rust', async () => {
  const { code, out } = await runScript(
    script(`
      const holder = await client.acquire(process.env.NAME, { ttl: 10000 })
      const waiting = client.acquire(process.env.NAME, { ttl: 10000, wait: 1000 }).catch((e) => e.code)
      // A loop blocked for the wait would run the interval once at most; a
      // loaded machine still gives several of the ~100 ticks.
      let ticks = 0
      const t = setInterval(() => ticks++, 10)
      const result = await waiting
      clearInterval(t)
      if (result !== 'NOT_ACQUIRED' || ticks < 5) throw new Error('blocked: ' + result + ' ' + ticks)
      await holder.release()`),
    { URL: await redisUrl(), NAME: uniqueName('exit3') },
  )
  assert.equal(code, 0, out)
})

test('close() while an acquire waits: it rejects with RedisError and the process exits', async () => {
  const { code, out } = await runScript(
    script(`
      const { RedisError } = require('fencelock')
      const holder = await client.acquire(process.env.NAME, { ttl: 10000 })
      const other = await Client.connect(process.env.URL)
      const waiting = other.acquire(process.env.NAME, { ttl: 10000 }).then(() => 'acquired', (e) => e)
      await new Promise((r) => setTimeout(r, 50))
      await other.close()
      const result = await waiting
      if (!(result instanceof RedisError)) throw new Error('expected RedisError, got ' + result)
      const after = await other.acquire(process.env.NAME, { ttl: 10000 }).then(() => 'acquired', (e) => e)
      if (!(after instanceof RedisError)) throw new Error('acquire after close: ' + after)
      await holder.release()`),
    { URL: await redisUrl(), NAME: uniqueName('exit4') },
  )
  assert.equal(code, 0, out)
})
