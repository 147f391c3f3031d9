'use strict'
// The Node side of `make bench`: one scenario, several implementations in the
// given order, one JSON line each on stdout.
//
//   node bench_node.js SCENARIO --impls a,b --url URL [--urls U1,U2,...]
//                      [--secs 1] [--workers 64] [--leases 10000]
//
// Scenarios as in bench_py.py (s1 s2 s3 s4 mem), plus two of the Node
// runner's own (issue 16), 8 workers on one name, ~0 ms hold, like S3:
//   sem  a semaphore of 3 permits: fencelock's client.semaphore, redis-semaphore's Semaphore
//   rw   a read-write lock, worker i writing when i % 4 === 0 and reading otherwise:
//        fencelock's client.rwLock; redis-semaphore has none, so its MultiSemaphore of
//        8 permits stands in (a reader takes 1, a writer all 8), the usual recipe
// Implementations:
//   fencelock                 this project (../../node, the built addon)
//   fencelock-wasm:ioredis, fencelock-wasm:node-redis
//                             this project's fencelock/wasm (the core compiled
//                             to WebAssembly) over an ioredis / node-redis client
//   redlock, redlock:tuned    node-redlock v5 over ioredis; default retries
//                             (10 x 200 ms +- 100 ms) / tuned (unbounded, 1 ms +- 1 ms)
//   semaphore, semaphore:tuned  redis-semaphore Mutex / RedlockMutex over
//                             ioredis; default retryInterval 10 ms / tuned 1 ms
//   floor                     hand-written SET NX PX + EVALSHA compare-and-delete
//                             on one ioredis connection
// Peers are resolved from $BENCH_NODE_MODULES (a node_modules outside the tree).
const path = require('node:path')
const fs = require('node:fs')
const crypto = require('node:crypto')
const readline = require('node:readline')

const peers = process.env.BENCH_NODE_MODULES || path.join(__dirname, '../../.build/bench-node/node_modules')
const need = (name) => require(path.join(peers, name))
let TTL_MS = 10_000 // 300 s for mem: holding 10,000 locks takes the slowest peer longer than 10 s
const RELEASE_LUA =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

function rssBytes() {
  const statm = fs.readFileSync('/proc/self/statm', 'utf8').split(' ')
  return Number(statm[1]) * 4096
}

function args() {
  const a = process.argv.slice(2)
  const out = { scenario: a[0], impls: 'fencelock', url: 'redis://127.0.0.1:6379/0', urls: '', secs: 1, workers: 1, leases: 10000 }
  for (let i = 1; i < a.length; i += 2) out[a[i].replace(/^--/, '')] = a[i + 1]
  out.impls = out.impls.split(',').filter(Boolean)
  out.urls = out.urls.split(',').filter(Boolean)
  out.secs = Number(out.secs)
  out.workers = Number(out.workers)
  out.leases = Number(out.leases)
  return out
}

async function ioredisClients(urls) {
  const Redis = need('ioredis')
  const clients = urls.map((u) => new Redis(u, { lazyConnect: true, enableAutoPipelining: false }))
  await Promise.all(clients.map((c) => c.connect()))
  return clients
}

const IMPLS = {
  async fencelock(urls) {
    const { Client } = require(process.env.BENCH_FENCELOCK_NODE || '../../node')
    const client = await Client.connect(urls.length === 1 ? urls[0] : urls)
    return {
      acquire: (name) => client.acquire(name, { ttl: TTL_MS }),
      release: (lease) => lease.release(),
      close: () => client.close(),
    }
  },
  'fencelock-wasm:ioredis': (urls) => wasmImpl(urls, 'ioredis'),
  'fencelock-wasm:node-redis': (urls) => wasmImpl(urls, 'node-redis'),
  async redlock(urls, tuned = false) {
    const Redlock = need('redlock').default
    const clients = await ioredisClients(urls)
    const settings = tuned ? { retryCount: -1, retryDelay: 1, retryJitter: 1 } : {}
    const redlock = new Redlock(clients, settings)
    redlock.on('error', () => {}) // contention shows up as ResourceLockedError events
    return {
      acquire: (name) => redlock.acquire([name], TTL_MS),
      release: (lock) => lock.release(),
      close: async () => { await Promise.all(clients.map((c) => c.quit())) },
    }
  },
  'redlock:tuned': (urls) => IMPLS.redlock(urls, true),
  async semaphore(urls, tuned = false) {
    const { Mutex, RedlockMutex } = need('redis-semaphore')
    const clients = await ioredisClients(urls)
    const opts = { lockTimeout: TTL_MS, acquireTimeout: 10_000, ...(tuned ? { retryInterval: 1 } : {}) }
    return {
      acquire: async (name) => {
        const m = clients.length === 1 ? new Mutex(clients[0], name, opts) : new RedlockMutex(clients, name, opts)
        await m.acquire()
        return m
      },
      release: (m) => m.release(),
      close: async () => { await Promise.all(clients.map((c) => c.quit())) },
    }
  },
  'semaphore:tuned': (urls) => IMPLS.semaphore(urls, true),
  async floor(urls) {
    const [r] = await ioredisClients(urls)
    const sha = await r.script('LOAD', RELEASE_LUA)
    const sleep = (ms) => new Promise((res) => setTimeout(res, ms))
    return {
      acquire: async (name) => {
        const token = crypto.randomUUID()
        while ((await r.set(name, token, 'PX', TTL_MS, 'NX')) !== 'OK') await sleep(1)
        return [name, token]
      },
      release: ([name, token]) => r.evalsha(sha, 1, name, token),
      close: () => r.quit(),
    }
  },
}

// The `sem` and `rw` scenarios: per implementation, how worker `i` takes and
// gives back one lease of the shared name.
const PERMITS = 3
const RW_PERMITS = 8
const writes = (i) => i % 4 === 0
function fencelockPrimitive(client, scenario) {
  return {
    sem: (name) => client.semaphore(name, { permits: PERMITS }).acquire({ ttl: TTL_MS }),
    rw: (name, i) => client.rwLock(name)[writes(i) ? 'writer' : 'reader'].acquire({ ttl: TTL_MS }),
  }[scenario]
}
const PRIMITIVES = {
  async fencelock(urls, scenario) {
    const { Client } = require(process.env.BENCH_FENCELOCK_NODE || '../../node')
    const client = await Client.connect(urls[0])
    return { acquire: fencelockPrimitive(client, scenario), release: (lease) => lease.release(), close: () => client.close() }
  },
  async 'fencelock-wasm:ioredis'(urls, scenario) {
    const { Client } = require(path.join(process.env.BENCH_FENCELOCK_NODE || '../../node', 'wasm'))
    const [app] = await ioredisClients(urls)
    const client = Client.fromRedis(app)
    return {
      acquire: fencelockPrimitive(client, scenario),
      release: (lease) => lease.release(),
      close: async () => {
        await client.close()
        await app.quit()
      },
    }
  },
  async semaphore(urls, scenario, tuned = false) {
    const { Semaphore, MultiSemaphore } = need('redis-semaphore')
    const [client] = await ioredisClients(urls)
    const opts = { lockTimeout: TTL_MS, acquireTimeout: 10_000, ...(tuned ? { retryInterval: 1 } : {}) }
    const make = {
      sem: (name) => new Semaphore(client, name, PERMITS, opts),
      rw: (name, i) => new MultiSemaphore(client, name, RW_PERMITS, writes(i) ? RW_PERMITS : 1, opts),
    }[scenario]
    return {
      acquire: async (name, i) => {
        const s = make(name, i)
        await s.acquire()
        return s
      },
      release: (s) => s.release(),
      close: () => client.quit(),
    }
  },
  'semaphore:tuned': (urls, scenario) => PRIMITIVES.semaphore(urls, scenario, true),
}

async function wasmImpl(urls, kind) {
  const { Client } = require(path.join(process.env.BENCH_FENCELOCK_NODE || '../../node', 'wasm'))
  const apps =
    kind === 'ioredis'
      ? await ioredisClients(urls)
      : await Promise.all(urls.map((url) => need('redis').createClient({ url }).connect()))
  const client = Client.fromRedis(urls.length === 1 ? apps[0] : apps)
  return {
    acquire: (name) => client.acquire(name, { ttl: TTL_MS }),
    release: (lease) => lease.release(),
    close: async () => {
      await client.close()
      await Promise.all(apps.map((app) => app.quit()))
    },
  }
}

async function phase(imp, names, until, waitOnly) {
  const clock = () => performance.now()
  return Promise.all(names.map(async (name, i) => {
    const lat = []
    let errors = 0
    while (clock() < until) {
      const t0 = clock()
      try {
        const held = await imp.acquire(name, i)
        const got = clock()
        await imp.release(held)
        lat.push(((waitOnly ? got : clock()) - t0) * 1000)
      } catch {
        errors++
      }
    }
    return { lat, errors }
  }))
}

function cpuUs() {
  const u = process.cpuUsage()
  return u.user + u.system
}

// Thread wake-ups of the whole process (every thread's voluntary context
// switches): what crossing between the JS thread and a native runtime costs.
function wakeUps() {
  return process.resourceUsage().voluntaryContextSwitches
}

async function runCycles(a, kind) {
  const shapes = {
    s1: [[a.url], 1, false, false],
    s2: [[a.url], a.workers, false, false],
    s3: [[a.url], a.workers, true, true],
    s4: [a.urls, 1, false, false],
    sem: [[a.url], a.workers, true, true],
    rw: [[a.url], a.workers, true, true],
  }
  const [urls, workers, shared, waitOnly] = shapes[a.scenario]
  const primitive = a.scenario === 'sem' || a.scenario === 'rw'
  const imp = primitive ? await PRIMITIVES[kind](urls, a.scenario) : await IMPLS[kind](urls)
  const run = crypto.randomUUID().replace(/-/g, '')
  const base = `bench:${a.scenario}:node-${kind}:${run}`
  const names = Array.from({ length: workers }, (_, i) => (shared ? base : `${base}:${i}`))
  await phase(imp, names, performance.now() + Math.min(a.secs / 4, 0.3) * 1000, waitOnly)
  const cpu0 = cpuUs()
  const wake0 = wakeUps()
  const t0 = performance.now()
  const results = await phase(imp, names, t0 + a.secs * 1000, waitOnly)
  const elapsed = (performance.now() - t0) / 1000
  const cpu = cpuUs() - cpu0
  const wakes = wakeUps() - wake0
  await imp.close()
  const lat = results.flatMap((r) => r.lat).sort((x, y) => x - y)
  const per = results.map((r) => r.lat.length)
  const pct = (p) => (lat.length ? lat[Math.round((lat.length - 1) * p)] : null)
  return {
    lang: 'node', scenario: a.scenario, impl: kind, cycles: lat.length,
    secs: Number(elapsed.toFixed(4)), rate: Number((lat.length / elapsed).toFixed(1)),
    p50_us: pct(0.5) && Number(pct(0.5).toFixed(1)), p99_us: pct(0.99) && Number(pct(0.99).toFixed(1)),
    p999_us: pct(0.999) && Number(pct(0.999).toFixed(1)),
    cpu_us_per_cycle: lat.length ? Number((cpu / lat.length).toFixed(2)) : null,
    wakeups_per_cycle: lat.length ? Number((wakes / lat.length).toFixed(2)) : null,
    errors: results.reduce((s, r) => s + r.errors, 0),
    min_per_worker: Math.min(...per), max_per_worker: Math.max(...per), workers,
  }
}

async function runMem(a, kind, lines) {
  const imp = await IMPLS[kind]([a.url])
  for (let i = 0; i < 100; i++) await imp.release(await imp.acquire(`bench:mem:warm:${i}`))
  globalThis.gc?.()
  const rss0 = rssBytes()
  const heap0 = process.memoryUsage().heapUsed
  const held = []
  for (let start = 0; start < a.leases; start += 256) {
    const batch = []
    for (let i = start; i < Math.min(start + 256, a.leases); i++) batch.push(imp.acquire(`bench:mem:node-${kind}:${i}`))
    held.push(...(await Promise.all(batch)))
  }
  globalThis.gc?.()
  const rss1 = rssBytes()
  const heap1 = process.memoryUsage().heapUsed
  console.log(JSON.stringify({
    lang: 'node', scenario: 'mem', impl: kind, leases: held.length,
    rss_bytes_per_lease: Number(((rss1 - rss0) / held.length).toFixed(1)), holding: true,
    // The part of the RSS growth that is live JavaScript objects (the rest
    // is native memory and heap pages V8 keeps).
    js_heap_bytes_per_lease: Number(((heap1 - heap0) / held.length).toFixed(1)),
  }))
  await lines.next()
  for (const h of held) await imp.release(h).catch(() => {})
  await imp.close()
}

async function main() {
  const a = args()
  if (a.scenario === 'mem') TTL_MS = 300_000
  const lines = a.scenario === 'mem' ? readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]() : null
  for (const kind of a.impls) {
    if (!(a.scenario === 'sem' || a.scenario === 'rw' ? PRIMITIVES : IMPLS)[kind]) throw new Error(`unknown implementation ${kind}`)
    if (a.scenario === 'mem') await runMem(a, kind, lines)
    else console.log(JSON.stringify(await runCycles(a, kind)))
  }
  process.exit(0)
}

main().catch((e) => { console.error(e); process.exit(1) })
