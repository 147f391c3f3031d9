'use strict'
// Test fixtures: the harness's redis-servers (FENCELOCK_TEST_REDIS_URL,
// FENCELOCK_TEST_REDLOCK_URLS) or, when those are unset, private
// redis-servers started on ports from the harness's allocator (ci/ports.sh)
// and killed at exit. Tests that stop, restart or password-protect a server
// always start their own with startRedis().
const { once } = require('node:events')
const { randomUUID } = require('node:crypto')
const { Redis, startServer, claimPorts, releasePorts, harnessEnv } = require('../../tests/support/fltest.js')

// ---------------------------------------------------------------- raw RESP client

/** The tests' side channel (DBSIZE, DEL, ...): the shared RESP client, with
 * bulk replies as strings. */
const Raw = { connect: (url) => Redis.connect(url, { text: true }) }

// ---------------------------------------------------------------- servers

/**
 * Start a private redis-server on a port from the harness's allocator
 * (tests/support/fltest.js): { url, port, raw(), kill(), start(), stop() },
 * raw() being this file's string-replies client.
 */
async function startRedis({ password } = {}) {
  const server = await startServer({ password })
  server.raw = () => Raw.connect(server.url)
  return server
}

let sharedSingle
/** The single test server's URL (harness's or a private one). */
async function redisUrl() {
  if (process.env.FENCELOCK_TEST_REDIS_URL) return process.env.FENCELOCK_TEST_REDIS_URL
  sharedSingle ??= startRedis()
  return (await sharedSingle).url
}

let sharedRedlock
/** Five independent servers' URLs (harness's or private ones). */
async function redlockUrls() {
  const env = process.env.FENCELOCK_TEST_REDLOCK_URLS
  if (env) return env.split(',').map((s) => s.trim()).filter(Boolean)
  sharedRedlock ??= Promise.all([0, 1, 2, 3, 4].map(() => startRedis()))
  return (await sharedRedlock).map((s) => s.url)
}

/**
 * Every key on the server, for a "nothing was written" check on the shared
 * server: keys of earlier tests expire meanwhile, so DBSIZE before and
 * after may differ without anything written. Compare with newKeys().
 */
async function allKeys(raw) {
  return new Set(await raw.cmd('KEYS', '*'))
}

/** The keys on the server now that were not in `before` (an allKeys()). */
async function newKeys(raw, before) {
  return [...(await allKeys(raw))].filter((key) => !before.has(key)).sort()
}

let counter = 0
/** A lock name no other test (or suite run) uses. */
function uniqueName(label = 'node') {
  return `test:${label}:${process.pid}:${++counter}:${randomUUID().slice(0, 8)}`
}

/** The lock key of a brace-free name (README key layout). */
function lockKey(name, prefix = 'fencelock:') {
  return `${prefix}{${name}}`
}

/** Reject if `promise` does not settle within `ms` (a failure bound, not a sleep). */
function within(ms, promise, what = 'operation') {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

let sharedPg
/**
 * The harness's PostgreSQL URL (FENCELOCK_TEST_PG_URL), else a private one
 * started with ci/postgres.sh and stopped when this process exits.
 */
function pgUrl() {
  if (process.env.FENCELOCK_TEST_PG_URL) return process.env.FENCELOCK_TEST_PG_URL
  if (sharedPg === undefined) {
    const { spawnSync } = require('node:child_process')
    const fs = require('node:fs')
    const os = require('node:os')
    const path = require('node:path')
    const script = path.join(__dirname, '..', '..', 'ci', 'postgres.sh')
    const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-pg-run-'))
    const env = { ...process.env, FENCELOCK_PG_RUN_DIR: runDir }
    const started = spawnSync('bash', [script, 'start'], { env, stdio: ['ignore', 'ignore', 'inherit'] })
    if (started.status !== 0) throw new Error('ci/postgres.sh start failed')
    // Synchronous, so it also runs on the way out of a failing process.
    process.on('exit', () => {
      spawnSync('bash', [script, 'stop'], { env, stdio: 'ignore' })
      fs.rmSync(runDir, { recursive: true, force: true })
    })
    sharedPg = fs.readFileSync(path.join(runDir, 'env'), 'utf8').trim().split('=').slice(1).join('=')
  }
  return sharedPg
}

/** GET from the cluster primary (of `seeds`) owning the key's slot (the others answer MOVED). */
async function clusterGet(seeds, key) {
  for (const url of seeds) {
    const raw = await Raw.connect(url)
    try {
      return await raw.cmd('GET', key)
    } catch {
      continue
    } finally {
      raw.close()
    }
  }
  throw new Error('no cluster node owns the key')
}

/** Resolve when `signal` aborts (or already has). */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return once(signal, 'abort').then(() => signal.reason)
}

module.exports = { Raw, allKeys, newKeys, startRedis, redisUrl, redlockUrls, pgUrl, uniqueName, lockKey, within, aborted, clusterGet, claimPorts, releasePorts, harnessEnv }
