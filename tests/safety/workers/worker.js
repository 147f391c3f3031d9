'use strict'
// The Node worker for tests/safety (see src/worker.rs for the Rust twin).
// Loop: acquire -> work -> fenced write to the resource -> release, recording
// every step as one JSON line (CLOCK_MONOTONIC ns via process.hrtime.bigint(),
// sha256 of the token, never the token). Bounded by --iterations and
// --seconds; every acquire is bounded by --wait-ms.
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const crypto = require('node:crypto')
// FENCELOCK_NODE_FLAVOUR=wasm (the checker's "wasm" workers): fencelock/wasm
// over an ioredis client per URL instead of the native addon.
const { fencelock, connect, name: lang } = require(path.join(__dirname, '..', '..', 'node', 'flavour.js'))
const { NotAcquiredError, LockLostError, RedisError } = fencelock

function args () {
  const a = {}
  const argv = process.argv.slice(2)
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1]
  return a
}

const now = () => process.hrtime.bigint()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const a = args()
  const fd = fs.openSync(a.history, 'a')
  const rec = (ev, fields = {}, t = now()) => {
    const r = { t, w: a.id, ev }
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) r[k] = v
    // BigInt timestamps are written as plain JSON integers.
    const line = JSON.stringify(r, (k, v) => typeof v === 'bigint' ? `@@${v}@@` : v)
      .replace(/"@@(\d+)@@"/g, '$1')
    fs.writeSync(fd, line + '\n') // one write(2) per line
  }
  rec('start', { pid: process.pid, lang })
  const deadline = now() + BigInt(Math.round(Number(a.seconds) * 1e9))
  const urls = a.urls.split(',')
  let client
  for (;;) {
    try {
      const [kind, service] = a.topology.split(':')
      client = await connect(urls.length === 1 ? urls[0] : urls, {
        connectTimeout: 500,
        responseTimeout: 1000,
        ...(Number(a.replicas) > 0 ? { replicas: Number(a.replicas) } : {}),
        ...(kind === 'standalone' ? {} : { topology: kind, service })
      })
      break
    } catch (err) {
      if (!(err instanceof RedisError) || now() >= deadline) throw err
      rec('connect_failed', { err: 'redis' })
      await sleep(50)
    }
  }

  const sock = net.connect(Number(a.resource), '127.0.0.1')
  sock.setNoDelay(true)
  await new Promise((resolve, reject) => { sock.once('connect', resolve); sock.once('error', reject) })
  let buf = ''
  const waiting = []
  sock.on('data', (d) => {
    buf += d.toString()
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      waiting.shift()(line.trim() === '1')
    }
  })
  const write = (op, fence, lease) => new Promise((resolve) => {
    waiting.push(resolve)
    sock.write(`${op} ${fence} ${lease} ${a.id}\n`)
  })
  // --primitive (see src/worker.rs): mutex, semaphore:N, or rw (write when i % 3 === 0).
  const [primitive, permits] = a.primitive.split(':')
  const roleOf = (i) => primitive === 'semaphore' ? ['permit', 'P'] : primitive === 'rw' ? (i % 3 === 0 ? ['write', 'W'] : ['read', 'R']) : [undefined, 'W']
  const acquire = (role, options) => {
    if (primitive === 'semaphore') return client.semaphore(a.lock, { permits: Number(permits) }).acquire(options)
    if (primitive === 'rw') return client.rwLock(a.lock)[role === 'write' ? 'writer' : 'reader'].acquire(options)
    return client.acquire(a.lock, options)
  }

  const ttl = Number(a['ttl-ms'])
  const wait = Number(a['wait-ms'])
  const workMs = Number(a['work-ms'])
  const thinkMs = Number(a['think-ms'])
  const iterations = Number(a.iterations)
  for (let i = 0; i < iterations && now() < deadline && !fs.existsSync(a['stop-file']); i++) {
    const [role, op] = roleOf(i)
    const t0 = now()
    rec('acquire_start', {}, t0)
    let lease
    try {
      lease = await acquire(role, { ttl, wait, autoRenew: a['auto-renew'] === '1' })
    } catch (err) {
      if (err instanceof NotAcquiredError) {
        rec('acquire_failed', { err: 'not_acquired' })
        continue
      }
      if (err instanceof RedisError) {
        rec('acquire_failed', { err: 'redis' })
        await sleep(20) // Redis is down (a fault): do not spin
        continue
      }
      throw err
    }
    let t = now() // timestamp first, then validity
    const h = crypto.createHash('sha256').update(lease.token).digest('hex')
    const fence = Number(lease.fence)
    rec('acquired', { lease: h, fence, valid_ms: lease.validFor, t0, role }, t)
    await sleep(workMs)
    t = now()
    rec('write_start', { lease: h, fence, valid_ms: lease.validFor }, t)
    const accepted = await write(op, fence, h)
    rec('write_end', { lease: h, fence, accepted })
    t = now()
    rec('release_start', { lease: h, valid_ms: lease.validFor }, t)
    try {
      await lease.release()
      rec('released', { lease: h })
    } catch (err) {
      if (err instanceof LockLostError) rec('release_lost', { lease: h })
      else rec('release_error', { lease: h, err: 'redis' })
    }
    if (thinkMs > 0) await sleep(thinkMs)
  }
  await client.close()
  sock.end()
  rec('done')
}

main().catch((err) => {
  console.error(`worker: ${err && err.message}`)
  process.exit(1)
})
