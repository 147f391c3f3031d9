'use strict'
// The addon's asynchronous calls settle in batches (node/calls.js,
// bindings/node/src/completions.rs): each promise gets its own call's
// result, in every environment, and only a pending call keeps the process
// alive.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { Client, NotAcquiredError } = require('..')
const { redisUrl, uniqueName, lockKey, within, Raw } = require('./helpers.js')

let url
let client
let other
let raw
before(async () => {
  url = await redisUrl()
  client = await Client.connect(url)
  other = await Client.connect(url)
  raw = await Raw.connect(url)
})
after(async () => {
  await client?.close()
  await other?.close()
  raw?.close()
})

test('concurrent calls settle each with its own outcome', async () => {
  const names = Array.from({ length: 300 }, (_, i) => uniqueName(`batch${i}`))
  // Every third name is held by another client: a try gives null, a
  // non-waiting acquire a NotAcquiredError naming that lock.
  const held = await Promise.all(names.filter((_, i) => i % 3 === 0).map((n) => other.acquire(n, { ttl: 10_000 })))
  const outcomes = await Promise.all(
    names.map((name, i) => {
      if (i % 3 !== 0) return client.acquire(name, { ttl: 10_000 })
      if (i % 2 === 0) return client.tryAcquire(name, { ttl: 10_000 })
      return client.acquire(name, { ttl: 10_000, wait: 0 }).catch((err) => err)
    }),
  )
  for (const [i, name] of names.entries()) {
    const outcome = outcomes[i]
    if (i % 3 !== 0) {
      assert.equal(outcome.name, name)
      assert.equal(await raw.cmd('GET', lockKey(name)), outcome.token)
    } else if (i % 2 === 0) {
      assert.equal(outcome, null, name)
    } else {
      assert.ok(outcome instanceof NotAcquiredError, String(outcome))
      assert.equal(outcome.lockName, name)
    }
  }
  const leases = outcomes.filter((o) => o !== null && !(o instanceof Error))
  const fences = await Promise.all(leases.map((l) => client.inspect(l.name).then((info) => [info.fence, l.fence])))
  for (const [seen, own] of fences) assert.equal(seen, own)
  await Promise.all([...leases, ...held].map((l) => l.release()))
  for (const name of names) assert.equal(await raw.cmd('EXISTS', lockKey(name)), 0)
})

test('calls made while another is in flight start together when the job ends', async () => {
  const name = uniqueName('queued')
  const held = await other.acquire(`${name}:held`, { ttl: 30_000 })
  // In flight until `held` is released: every call below is queued until
  // the flush at the end of the job that made it (node/calls.js).
  const waiting = client.acquire(`${name}:held`, { ttl: 30_000 })
  const names = Array.from({ length: 16 }, (_, i) => `${name}:${i}`)
  const leases = await within(5_000, Promise.all(names.map((n) => client.acquire(n, { ttl: 10_000 }))), 'queued acquires')
  for (const [i, lease] of leases.entries()) assert.equal(await raw.cmd('GET', lockKey(names[i])), lease.token)
  // Released from one job too: the same again for the releases.
  await within(5_000, Promise.all(leases.map((l) => l.release())), 'queued releases')
  for (const n of names) assert.equal(await raw.cmd('EXISTS', lockKey(n)), 0)
  await held.release()
  await (await within(5_000, waiting, 'the waiter')).release()
})

test('permits, fenced writes and cursor steps settle in the same batches', async () => {
  const [semName, name, key] = [uniqueName('batchsem'), uniqueName('batchlist'), uniqueName('batchkey')]
  const sem = client.semaphore(semName, { permits: 2 })
  const [permits, mutex] = await Promise.all([
    Promise.all([sem.acquire({ ttl: 10_000 }), sem.acquire({ ttl: 10_000 })]),
    client.acquire(name, { ttl: 10_000 }),
  ])
  const watch = client.watch(name)[Symbol.asyncIterator]()
  const [third, info, , , listed, watched] = await Promise.all([
    other.semaphore(semName, { permits: 2 }).tryAcquire({ ttl: 10_000 }),
    sem.inspect(),
    permits[0].fencedSet(key, 'value'),
    permits[1].fencedHSet(`${key}:h`, 'field', 'note'),
    (async () => {
      const items = []
      for await (const item of client.list(name)) items.push(item)
      return items
    })(),
    watch.next(),
  ])
  assert.equal(third, null) // both permits held: the kind reached the addon
  assert.equal(info.heldByMe, true)
  assert.equal(await raw.cmd('HGET', key, 'value'), 'value')
  assert.equal(await raw.cmd('HGET', `${key}:h`, 'field'), 'note')
  assert.deepEqual(listed.map((l) => [l.name, l.info.fence]), [[name, mutex.fence]])
  assert.equal(watched.value.fence, mutex.fence)
  await watch.return()
  await Promise.all([...permits, mutex].map((l) => l.release()))
  await raw.cmd('DEL', key, `${key}:h`)
})

test('worker threads: each environment settles its own calls', async () => {
  const name = uniqueName('worker')
  const source = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Client } = require(workerData.pkg)
    ;(async () => {
      const client = await Client.connect(workerData.url)
      const fences = []
      for (let i = 0; i < 50; i++) {
        const lease = await client.acquire(workerData.name + ':' + (i % 5), { ttl: 10_000 })
        fences.push(String(lease.fence))
        await lease.release()
      }
      await client.close()
      parentPort.postMessage(fences.length)
    })().catch((err) => parentPort.postMessage(String(err)))
  `
  const run = (i) =>
    new Promise((resolve, reject) => {
      const worker = new Worker(source, { eval: true, workerData: { pkg: path.join(__dirname, '..'), url, name: `${name}:${i}` } })
      let answer
      worker.on('message', (m) => (answer = m))
      worker.on('error', reject)
      worker.on('exit', (code) => resolve([code, answer]))
    })
  const local = (async () => {
    for (let i = 0; i < 50; i++) await (await client.acquire(`${name}:main`, { ttl: 10_000 })).release()
    return 50
  })()
  const results = await Promise.all([run(1), run(2), local])
  assert.deepEqual(results, [[0, 50], [0, 50], 50])
})

test('a pending call keeps the process alive; once settled nothing does, not even an open client', async () => {
  // No close(), no timers: the process stays for the waiting acquire, then exits.
  const source = `
    const { Client } = require('fencelock')
    ;(async () => {
      const client = await Client.connect(process.env.URL)
      await client.acquire(null, { ttl: 1000 }).catch((err) => console.log('bad argument:', err.name))
      await client.acquire(process.env.NAME, { ttl: 5000 })
      client.acquire(process.env.NAME, { ttl: 5000, wait: 300 }).catch((err) => console.log('settled:', err.code))
    })().catch((err) => { console.error(err); process.exit(3) })
  `
  const child = spawn(process.execPath, ['-e', source], {
    cwd: path.join(__dirname, '..'),
    env: { ...process.env, URL: url, NAME: uniqueName('alive') },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (out += d))
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
  const code = await new Promise((resolve) => child.on('exit', resolve))
  clearTimeout(timer)
  assert.equal(code, 0, out)
  assert.match(out, /bad argument: TypeError/)
  assert.match(out, /settled: NOT_ACQUIRED/)
})
