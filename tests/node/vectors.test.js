'use strict'
// tests/vectors/*.json through Node's public API against a real
// redis-server: the keys a lock creates, argument validation (error
// classes, nothing sent), and the exact script calls of each scenario seen
// by MONITOR. Rust (tests/conformance) and Python (tests/python) check the
// same files.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { ROOT, vectors, asBytes, asName, number, Redis, Monitor, scriptCalls, TOKEN, redisUrlOrServer } = require('../support/fltest.js')
const { randomUUID } = require('node:crypto')
const { fencelock, connect, name: flavour } = require('./flavour.js') // FENCELOCK_NODE_FLAVOUR=wasm: fencelock/wasm

const COMMANDS = vectors('commands.json')
const SCRIPTS = COMMANDS.scripts
const KEYS = vectors('keys.json').cases
const VALIDATION = vectors('validation.json')
const LIST = vectors('list.json')

let server
let url
let raw
before(async () => {
  server = await redisUrlOrServer()
  url = server.url
  raw = await Redis.connect(url)
})
after(async () => {
  raw.close()
  await server.stop()
})

async function withMonitor(fn) {
  const monitor = await Monitor.start(url)
  try {
    await fn(monitor)
    await monitor.sync()
    return scriptCalls(monitor.seen, SCRIPTS)
  } finally {
    monitor.close()
  }
}

const keySet = async (prefix) => new Set((await raw.cmd('KEYS', `${prefix}*`)).map((k) => k.toString('hex')))
const hexes = (...bufs) => bufs.map((b) => b.toString('hex'))

// ------------------------------------------------------------------ keys.json

for (const c of KEYS) {
  test(`keys: ${c.prefix} ${c.why}`, async () => {
    const [lock, fence, channel] = ['lock', 'fence', 'channel'].map((k) => asBytes(c[k]))
    await raw.cmd('DEL', lock, fence)
    const before = await keySet(c.prefix)
    const name = asName(c.name)
    const calls = await withMonitor(async () => {
      const client = await connect(url, { prefix: c.prefix })
      try {
        const lease = await client.acquire(name, { ttl: 30_000, wait: 0 })
        assert.deepEqual(Buffer.isBuffer(name) ? Buffer.from(lease.name) : lease.name, name)
        const added = [...(await keySet(c.prefix))].filter((k) => !before.has(k)).sort()
        assert.deepEqual(added, hexes(lock, fence).sort())
        assert.equal(await raw.cmd('TYPE', lock), 'string')
        assert.equal((await raw.cmd('GET', lock)).toString(), lease.token)
        const pttl = await raw.cmd('PTTL', lock)
        assert.ok(pttl > 0 && pttl <= 30_000)
        assert.equal(await raw.cmd('TYPE', fence), 'string')
        assert.equal((await raw.cmd('GET', fence)).toString(), String(lease.fence))
        // The fence key expires: the lock's ttl + the grace (default 60 s).
        const fencePttl = await raw.cmd('PTTL', fence)
        assert.ok(fencePttl > 30_000 && fencePttl <= 90_000, String(fencePttl))
        await lease.release()
        assert.equal(await raw.cmd('EXISTS', lock), 0)
        const left = [...(await keySet(c.prefix))].filter((k) => !before.has(k))
        assert.deepEqual(left, hexes(fence))
      } finally {
        await client.close()
      }
    })
    const mine = calls.filter((x) => x.keys[0].equals(lock))
    assert.deepEqual(
      mine.map((x) => [x.script, hexes(...x.keys)]),
      [
        ['acquire', hexes(lock, fence)],
        ['release', hexes(lock, channel)],
      ],
    )
  })
}

// ------------------------------------------------------------------ list.json

if (flavour === 'node') {
  test('list: the names each pattern yields, the documented MATCH, never KEYS', async () => {
    const run = randomUUID().slice(0, 12)
    const monitor = await Monitor.start(url)
    const client = await connect(url, { prefix: `${LIST.prefix}${run}:` })
    try {
      const leases = []
      for (const n of LIST.held) leases.push(await client.acquire(asName(n), { ttl: 30_000 }))
      for (const n of LIST.released) await (await client.acquire(asName(n), { ttl: 30_000 })).release()
      for (const c of LIST.cases) {
        const found = []
        for await (const { name } of client.list(asName(c.pattern))) found.push(Buffer.from(name).toString('hex'))
        assert.deepEqual(found, c.names.map((n) => asBytes(n).toString('hex')), c.why)
      }
      for (const bad of LIST.bad) assert.throws(() => client.list(asName(bad)), RangeError)
      await monitor.sync()
      for (const lease of leases) await lease.release()
    } finally {
      await client.close()
      monitor.close()
    }
    const escaped = Buffer.from(LIST.prefix.replace(/[*[\]]/g, (c) => `\\${c}`))
    const sent = monitor.seen.filter((c) => c.args[0]?.toString().toUpperCase() === 'SCAN').map((c) => c.args[3].toString('hex'))
    for (const c of LIST.cases) {
      const match = asBytes(c.match)
      const at = match.indexOf(escaped) + escaped.length
      const withRun = Buffer.concat([match.subarray(0, at), Buffer.from(`${run}:`), match.subarray(at)])
      assert.ok(sent.includes(withRun.toString('hex')), c.why)
    }
    assert.ok(!monitor.seen.some((c) => c.args[0]?.toString().toUpperCase() === 'KEYS' && c.args.join(' ').includes(run)))
  })
} else {
  test('list: fencelock/wasm says it does not list (yet)', async () => {
    const client = await connect(url)
    try {
      assert.throws(() => client.list('*'), (err) => err.code === 'ERR_FENCELOCK_UNSUPPORTED')
      assert.throws(() => client.watch('x'), (err) => err.code === 'ERR_FENCELOCK_UNSUPPORTED')
    } finally {
      await client.close()
    }
  })
}

// ------------------------------------------------------------ validation.json

async function rejects(client, name, options, errorClass, what) {
  for (const call of [() => client.acquire(name, options), () => client.tryAcquire(name, options)]) {
    let caught
    try {
      await call()
    } catch (err) {
      caught = err
    }
    assert.ok(caught, `${what}: no error`)
    assert.equal(caught.constructor, errorClass, `${what}: ${caught}`)
  }
}

test('validation: bad names, ttls and waits throw RangeError/TypeError and send nothing', async () => {
  const calls = await withMonitor(async () => {
    const client = await connect(url)
    try {
      for (const c of VALIDATION.names.invalid) await rejects(client, asName(c.name), { ttl: 1000 }, RangeError, c.why)
      for (const bad of VALIDATION.names.wrong_type) await rejects(client, bad, { ttl: 1000 }, TypeError, JSON.stringify(bad))
      for (const c of VALIDATION.ttl.invalid) await rejects(client, 'vectors:ttl', { ttl: number(c.ms) }, RangeError, `ttl ${c.ms}`)
      for (const bad of VALIDATION.ttl.wrong_type) await rejects(client, 'vectors:ttl', { ttl: bad }, TypeError, `ttl ${JSON.stringify(bad)}`)
      for (const c of VALIDATION.wait.invalid) {
        await assert.rejects(client.acquire('vectors:wait', { ttl: 1000, wait: number(c.ms) }), RangeError, `wait ${c.ms}`)
      }
      for (const bad of VALIDATION.wait.wrong_type) {
        await assert.rejects(client.acquire('vectors:wait', { ttl: 1000, wait: bad }), TypeError, `wait ${JSON.stringify(bad)}`)
      }
    } finally {
      await client.close()
    }
  })
  assert.deepEqual(calls, [])
})

test('validation: valid ttls are sent in whole milliseconds, rounded up', async () => {
  const name = 'vectors:ttl-rounding'
  const lock = Buffer.from(`fencelock:{${name}}`)
  const calls = await withMonitor(async () => {
    const client = await connect(url)
    try {
      for (const c of VALIDATION.ttl.valid) {
        await raw.cmd('DEL', lock)
        const lease = await client.acquire(name, { ttl: c.ms, wait: 0 })
        try {
          await lease.release()
        } catch (err) {
          assert.ok(err instanceof fencelock.LockLostError && c.ms < 100, String(err)) // a 1 ms lock may expire first
        }
      }
    } finally {
      await client.close()
    }
  })
  const sent = calls.filter((x) => x.script === 'acquire').map((x) => x.args[1].toString())
  assert.deepEqual(sent, VALIDATION.ttl.valid.map((c) => c.sent))
})

// -------------------------------------------------------------- commands.json

function resolve(v, sc) {
  if (typeof v === 'string' && v.startsWith('$') && v.slice(1) in sc.keys) return asBytes(sc.keys[v.slice(1)])
  if (v === '$token' || v === '$waiter_token') return Buffer.from(v)
  return asBytes(v)
}

/** What the scenario's acquire calls: the mutex's, or a semaphore's or a read-write lock side's (its `primitive`). */
function acquirer(client, sc) {
  const name = asName(sc.lock_name)
  const primitive = sc.primitive
  if (primitive === undefined) return (options) => client.acquire(name, options)
  if (primitive.fair) return (options) => client.acquire(name, { ...options, fair: true })
  if ('semaphore' in primitive) {
    const sem = client.semaphore(name, { permits: primitive.semaphore })
    return (options) => sem.acquire(options)
  }
  const rw = client.rwLock(name)
  const side = primitive.rw === 'read' ? rw.reader : rw.writer
  return (options) => side.acquire(options)
}

const ERRORS = new Map([
  [fencelock.NotAcquiredError, 'NotAcquired'],
  [fencelock.LockLostError, 'LockLost'],
  [fencelock.RedisError, 'Redis'],
  [fencelock.ClientClosedError, 'Closed'],
])

async function outcomeOf(promise) {
  try {
    return [await promise, null]
  } catch (err) {
    if (!ERRORS.has(err.constructor)) throw err
    if (err instanceof fencelock.NotAcquiredError) return [null, { error: 'NotAcquired', reason: err.reason }]
    return [null, { error: ERRORS.get(err.constructor) }]
  }
}

for (const sc of COMMANDS.scenarios.filter((s) => s.real)) {
  test(`commands: ${sc.name}`, async () => {
    for (const cmd of sc.setup) await raw.cmd(...cmd.map((a) => resolve(a, sc)))
    const expected = []
    // The scenario's lease and, in handoff scenarios, the waiter of the same
    // client: its acquire starts at its call (it lines up inside the call)
    // and is awaited at its outcome.
    const leases = { first: null, waiter: null }
    const pending = { first: null, waiter: null }
    const calls = await withMonitor(async () => {
      const client = await connect(url, { prefix: sc.prefix })
      try {
        const got = {}
        const wantValidity = {}
        const settle = async (who) => {
          if (pending[who] === null) return
          const [lease, err] = await outcomeOf(pending[who])
          pending[who] = null
          leases[who] = lease
          got[who] = lease ? { acquired: String(lease.fence) } : err
          if (lease) assert.equal(typeof lease.fence, 'bigint')
          wantValidity[who] = lease ? lease.validFor : undefined
        }
        for (const step of sc.steps) {
          const who = step.lease ?? 'first'
          if (step.call === 'acquire') {
            const wait = sc.wait_ms === null ? undefined : sc.wait_ms
            pending[who] = acquirer(client, sc)({ ttl: sc.ttl_ms, wait })
            pending[who].catch(() => {}) // read at its outcome step
            if (who === 'first') await settle(who)
          } else if (step.call) {
            const lease = leases[who]
            const op = step.call === 'extend' ? lease.extend(step.ttl_ms) : lease.release()
            const [, err] = await outcomeOf(op)
            got[who] = err ?? 'ok'
          } else if (step.sent) {
            for (const c of step.sent) expected.push([c.script, c.keys.map((k) => resolve(k, sc)), c.args.map((a) => resolve(a, sc))])
          } else if (step.external) {
            for (const cmd of step.external) await raw.cmd(...cmd.map((a) => resolve(a, sc)))
          } else if (step.outcome !== undefined && step.outcome !== null) {
            await settle(who)
            const want = typeof step.outcome === 'object' ? { ...step.outcome } : step.outcome
            if (typeof want === 'object' && 'valid_until_ms' in want) {
              const validFor = wantValidity[who]
              assert.ok(validFor > 0 && validFor <= want.valid_until_ms, `validFor ${validFor}`)
              delete want.valid_until_ms
            }
            assert.deepEqual(got[who], want, JSON.stringify(step))
          }
        }
      } finally {
        await client.close()
      }
    })
    const lock = asBytes(sc.keys.lock)
    const fence = asBytes(sc.keys.fence)
    const mine = calls.filter((x) => x.keys[0].equals(lock) || x.keys[0].equals(fence))
    const tokens = new Set(mine.filter((x) => x.script !== 'raise_fence').map((x) => x.args[0].toString()))
    assert.ok(tokens.size <= (sc.waiter_token ? 2 : 1) && [...tokens].every((t) => TOKEN.test(t)), [...tokens].join())
    // Each lease's token is its placeholder; a failed first acquire's too.
    const masks = new Map()
    if (leases.first) masks.set(leases.first.token, '$token')
    if (leases.waiter) masks.set(leases.waiter.token, '$waiter_token')
    if (!leases.first) for (const t of tokens) if (!masks.has(t)) masks.set(t, '$token')
    assert.ok([...tokens].every((t) => masks.has(t)), 'every token is a lease\'s')
    const placeholder = (x) => (x === '$token' || x === '$waiter_token' ? x : null)
    const masked = mine.map((x) => [x.script, hexes(...x.keys), x.args.map((a) => masks.get(a.toString()) ?? a.toString('hex'))])
    const want = expected.map(([s, k, a]) => [s, hexes(...k), a.map((x) => placeholder(x.toString()) ?? x.toString('hex'))])
    assert.deepEqual(masked, want)
    for (const [key, value] of Object.entries(sc.final ?? {})) {
      const v = await raw.cmd('GET', resolve(key, sc))
      assert.equal(v === null ? null : v.toString(), value, key)
    }
  })
}

for (const c of COMMANDS.fenced_writes.cases) {
  test(`fenced writes: ${c.name}`, async () => {
    for (const cmd of c.setup) await raw.cmd(...cmd.map((a) => resolve(a, c)))
    const [key, value] = [resolve(c.key, c), resolve(c.value, c)]
    let got
    const calls = await withMonitor(async () => {
      const client = await connect(url)
      try {
        const lease = await client.acquire(asName(c.lock_name), { ttl: 10_000 })
        assert.equal(String(lease.fence), c.fence)
        try {
          await (c.field === undefined ? lease.fencedSet(key, value) : lease.fencedHSet(key, resolve(c.field, c), value))
          got = 'ok'
        } catch (err) {
          if (!(err instanceof fencelock.StaleFenceError)) throw err
          got = { error: 'StaleFence', accepted: String(err.accepted) }
        }
        await lease.release()
      } finally {
        await client.close()
      }
    })
    assert.deepEqual(got, c.outcome)
    const sent = calls.filter((x) => x.script === c.sent.script).map((x) => [hexes(...x.keys), hexes(...x.args)])
    assert.deepEqual(sent, [[hexes(...c.sent.keys.map((k) => resolve(k, c))), hexes(...c.sent.args.map((a) => resolve(a, c)))]])
    const fields = await raw.cmd('HGETALL', key)
    const pairs = []
    for (let i = 0; i < fields.length; i += 2) pairs.push(hexes(fields[i], fields[i + 1]).join(' '))
    assert.deepEqual(pairs.sort(), c.final.map(([f, v]) => hexes(resolve(f, c), resolve(v, c)).join(' ')).sort())
  })
}
