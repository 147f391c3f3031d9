'use strict'
// Test fixtures: the harness's redis-servers (FENCELOCK_TEST_REDIS_URL,
// FENCELOCK_TEST_REDLOCK_URLS) or, when those are unset, private
// redis-servers started here on free loopback ports and killed at exit.
// Tests that stop, restart or password-protect a server always start their
// own with startRedis().
const { spawn } = require('node:child_process')
const net = require('node:net')
const { once } = require('node:events')
const { randomUUID } = require('node:crypto')

const children = new Set()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

// ---------------------------------------------------------------- raw RESP client

/** A minimal RESP2 client for the tests' side channel (DBSIZE, DEL, ...). */
class Raw {
  #socket
  #buffer = Buffer.alloc(0)
  #pending = []

  static async connect(url) {
    const u = new URL(url)
    const raw = new Raw()
    raw.#socket = net.connect(Number(u.port || 6379), u.hostname)
    raw.#socket.setNoDelay(true)
    raw.#socket.on('data', (chunk) => raw.#onData(chunk))
    raw.#socket.on('error', (err) => raw.#failAll(err))
    raw.#socket.on('close', () => raw.#failAll(new Error('connection closed')))
    await once(raw.#socket, 'connect')
    raw.#socket.unref()
    const password = decodeURIComponent(u.password)
    if (password) await raw.cmd('AUTH', ...(u.username ? [decodeURIComponent(u.username)] : []), password)
    const db = u.pathname.replace('/', '')
    if (db) await raw.cmd('SELECT', db)
    return raw
  }

  cmd(...args) {
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject })
      const parts = [`*${args.length}\r\n`]
      for (const a of args) {
        const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a))
        parts.push(`$${b.length}\r\n`, b, '\r\n')
      }
      this.#socket.ref()
      this.#socket.write(Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))))
    })
  }

  close() {
    this.#socket.destroy()
  }

  #failAll(err) {
    for (const p of this.#pending.splice(0)) p.reject(err)
  }

  #onData(chunk) {
    this.#buffer = Buffer.concat([this.#buffer, chunk])
    for (;;) {
      const parsed = parse(this.#buffer, 0)
      if (!parsed) break
      this.#buffer = this.#buffer.subarray(parsed.end)
      const p = this.#pending.shift()
      if (this.#pending.length === 0) this.#socket.unref()
      if (parsed.value instanceof Error) p.reject(parsed.value)
      else p.resolve(parsed.value)
    }
  }
}

function parse(buf, at) {
  const nl = buf.indexOf('\r\n', at)
  if (nl < 0) return null
  const type = String.fromCharCode(buf[at])
  const line = buf.toString('utf8', at + 1, nl)
  const next = nl + 2
  switch (type) {
    case '+':
      return { value: line, end: next }
    case '-':
      return { value: new Error(line), end: next }
    case ':':
      return { value: Number(line), end: next }
    case '$': {
      const len = Number(line)
      if (len < 0) return { value: null, end: next }
      if (buf.length < next + len + 2) return null
      return { value: buf.toString('utf8', next, next + len), end: next + len + 2 }
    }
    case '*': {
      const n = Number(line)
      if (n < 0) return { value: null, end: next }
      const out = []
      let pos = next
      for (let i = 0; i < n; i++) {
        const item = parse(buf, pos)
        if (!item) return null
        out.push(item.value)
        pos = item.end
      }
      return { value: out, end: pos }
    }
    default:
      throw new Error(`bad RESP type ${type}`)
  }
}

// ---------------------------------------------------------------- servers

/**
 * Start a private redis-server on a free loopback port.
 * Returns { url, port, raw(), stop(), start() } (start() restarts on the same port).
 */
async function startRedis({ password } = {}) {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
    if (password) args.push('--requirepass', password)
    const server = {
      port,
      url: password ? `redis://:${encodeURIComponent(password)}@127.0.0.1:${port}/0` : `redis://127.0.0.1:${port}/0`,
      child: null,
      async start() {
        const child = spawn('redis-server', args, { stdio: 'ignore' })
        child.unref()
        children.add(child)
        child.on('exit', () => children.delete(child))
        this.child = child
        let exited = false
        child.on('exit', () => (exited = true))
        // Readiness: poll until the server answers PING (or died).
        for (let i = 0; i < 500; i++) {
          if (exited) throw new Error(`redis-server on port ${port} exited`)
          try {
            const raw = await Raw.connect(this.url)
            await raw.cmd('PING')
            raw.close()
            return
          } catch {
            await new Promise((r) => setTimeout(r, 10))
          }
        }
        throw new Error(`redis-server on port ${port} did not start`)
      },
      async stop() {
        const child = this.child
        if (!child || child.exitCode !== null || child.signalCode !== null) return
        child.ref() // keep the loop alive until it is gone
        child.kill('SIGKILL')
        await once(child, 'exit')
      },
      raw() {
        return Raw.connect(this.url)
      },
    }
    try {
      await server.start()
      return server
    } catch (err) {
      if (attempt >= 5) throw err
    }
  }
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

/** Resolve when `signal` aborts (or already has). */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return once(signal, 'abort').then(() => signal.reason)
}

module.exports = { Raw, startRedis, redisUrl, redlockUrls, uniqueName, lockKey, within, aborted, freePort }
