'use strict'
// Shared helpers of the cross-language tests and the demo (Node side):
// the vectors' byte strings, a tiny RESP client, MONITOR capture and
// normalisation (the same rules as tests/support/fltest.py), and private
// redis-servers on ports from ci/ports.sh. The Node package's tests use it too.
const { execFileSync, spawn } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { once } = require('node:events')

const ROOT = path.resolve(__dirname, '..', '..')

const vectors = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'vectors', name), 'utf8'))

/** The vectors' byte strings: "text", {hex}, {repeat, count}. */
function asBytes(v) {
  if (typeof v === 'string') return Buffer.from(v, 'utf8')
  if ('hex' in v) return Buffer.from(v.hex, 'hex')
  return Buffer.from(v.repeat.repeat(v.count), 'utf8')
}
/** A lock name as a Node user passes it: string for text, Buffer for raw bytes. */
const asName = (v) => (typeof v === 'object' && 'hex' in v ? Buffer.from(v.hex, 'hex') : asBytes(v).toString('utf8'))
const number = (v) => (typeof v === 'string' ? Number(v) : v) // "NaN", "Infinity", "-Infinity"

// ------------------------------------------------------------------- RESP

function parse(buf, at) {
  const nl = buf.indexOf('\r\n', at)
  if (nl < 0) return null
  const kind = String.fromCharCode(buf[at])
  const line = buf.toString('utf8', at + 1, nl)
  const end = nl + 2
  if (kind === '+') return { value: line, end }
  if (kind === '-') return { value: Object.assign(new Error(line), { redis: true }), end }
  if (kind === ':') return { value: Number(line), end }
  if (kind === '$') {
    const n = Number(line)
    if (n < 0) return { value: null, end }
    if (buf.length < end + n + 2) return null
    return { value: buf.subarray(end, end + n), end: end + n + 2 }
  }
  if (kind === '*') {
    const n = Number(line)
    if (n < 0) return { value: null, end }
    const items = []
    let pos = end
    for (let i = 0; i < n; i++) {
      const item = parse(buf, pos)
      if (!item) return null
      items.push(item.value)
      pos = item.end
    }
    return { value: items, end: pos }
  }
  throw new Error(`unexpected RESP type ${kind}`)
}

/** A minimal RESP2 client. Replies: strings, numbers, Buffers (utf8 strings
 * with `{ text: true }`), arrays; errors reject. An idle connection does not
 * keep the process alive. */
class Redis {
  static async connect(url, { text = false } = {}) {
    const u = new URL(url)
    const r = new Redis()
    r.text = text
    r.socket = net.connect(Number(u.port || 6379), u.hostname)
    r.socket.setNoDelay(true)
    r.buffer = Buffer.alloc(0)
    r.pending = []
    r.onPush = null
    r.socket.on('data', (chunk) => r.#onData(chunk))
    r.socket.on('error', (err) => r.#failAll(err))
    r.socket.on('close', () => r.#failAll(new Error('connection closed')))
    await once(r.socket, 'connect')
    r.socket.unref()
    const password = decodeURIComponent(u.password)
    if (password) await r.cmd('AUTH', ...(u.username ? [decodeURIComponent(u.username)] : []), password)
    const db = u.pathname.replace('/', '')
    if (db && db !== '0') await r.cmd('SELECT', db)
    return r
  }

  cmd(...args) {
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject })
      this.socket.ref()
      this.socket.write(encode(args))
    })
  }

  close() {
    this.socket.destroy()
  }

  /** MONITOR mode: every later line goes to `onLine(buffer)`. */
  async monitor(onLine) {
    await this.cmd('MONITOR')
    this.onPush = onLine
  }

  #failAll(err) {
    for (const p of this.pending.splice(0)) p.reject(err)
  }

  #onData(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk])
    for (;;) {
      if (this.onPush && this.pending.length === 0) {
        const nl = this.buffer.indexOf('\r\n')
        if (nl < 0) return
        this.onPush(this.buffer.subarray(0, nl))
        this.buffer = this.buffer.subarray(nl + 2)
        continue
      }
      const parsed = parse(this.buffer, 0)
      if (!parsed) return
      this.buffer = this.buffer.subarray(parsed.end)
      const p = this.pending.shift()
      if (!p) continue
      if (this.pending.length === 0) this.socket.unref()
      if (parsed.value instanceof Error && parsed.value.redis) p.reject(parsed.value)
      else p.resolve(this.text ? asText(parsed.value) : parsed.value)
    }
  }
}

const asText = (v) => (Buffer.isBuffer(v) ? v.toString('utf8') : Array.isArray(v) ? v.map(asText) : v)

function encode(args) {
  const parts = [Buffer.from(`*${args.length}\r\n`)]
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a))
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'))
  }
  return Buffer.concat(parts)
}

// ---------------------------------------------------------------- MONITOR

const ESC = { n: 10, r: 13, t: 9, a: 7, b: 8 }

/** '+1700000000.1 [0 127.0.0.1:5000] "EVALSHA" "ab" ...' -> {client, args: Buffer[]} */
function parseMonitorLine(line) {
  const text = line.toString('latin1') // MONITOR escapes non-ASCII as \xNN
  const m = /^\+?[\d.]+ \[\d+ ([^\]]+)\] (.*)$/s.exec(text)
  if (!m) return null
  const [, client, rest] = m
  const args = []
  let i = 0
  while (i < rest.length) {
    if (rest[i] !== '"') {
      i++
      continue
    }
    i++
    const bytes = []
    while (i < rest.length && rest[i] !== '"') {
      if (rest[i] === '\\') {
        i++
        if (rest[i] === 'x') {
          bytes.push(parseInt(rest.slice(i + 1, i + 3), 16))
          i += 2
        } else bytes.push(ESC[rest[i]] ?? rest.charCodeAt(i))
      } else bytes.push(rest.charCodeAt(i))
      i++
    }
    i++
    args.push(Buffer.from(bytes))
  }
  return { client, args }
}

class Monitor {
  static async start(url) {
    const m = new Monitor()
    m.url = url
    m.seen = []
    m.waiters = []
    m.conn = await Redis.connect(url)
    await m.conn.monitor((line) => {
      const parsed = parseMonitorLine(line)
      if (!parsed) return
      m.seen.push(parsed)
      for (const w of m.waiters.splice(0)) w()
    })
    await m.sync()
    return m
  }

  /** Resolves once `pred(seen)` holds (rejects after 10 s). */
  async waitFor(pred) {
    const deadline = Date.now() + 10_000
    while (!pred(this.seen)) {
      if (Date.now() > deadline) throw new Error('MONITOR never showed the expected command')
      await new Promise((resolve) => {
        const t = setTimeout(resolve, 100)
        this.waiters.push(() => {
          clearTimeout(t)
          resolve()
        })
      })
    }
  }

  /** Everything the server ran before this call is in `seen` afterwards. */
  async sync() {
    const marker = Buffer.from(`monitor-sync-${crypto.randomUUID()}`)
    const r = await Redis.connect(this.url)
    await r.cmd('ECHO', marker)
    r.close()
    await this.waitFor((seen) => seen.some((s) => s.args.length === 2 && s.args[1].equals(marker)))
  }

  close() {
    this.conn.close()
  }
}

/** Client script calls (not what scripts run), EVAL mapped to its SHA1, the
 * NOSCRIPT fallback (an EVAL repeating the same client's EVALSHA just before
 * it) dropped. `scripts` maps name -> SHA1. */
function scriptCalls(seen, scripts) {
  const byName = new Map(Object.entries(scripts).map(([name, sha]) => [sha, name]))
  const out = []
  let lastEvalsha = null
  const same = (a, b) =>
    b && a.client === b.client && a.script === b.script && sameList(a.keys, b.keys) && sameList(a.args, b.args)
  for (const { client, args } of seen) {
    if (client === 'lua' || args.length < 3) continue
    const verb = args[0].toString().toUpperCase()
    let sha
    if (verb === 'EVALSHA') sha = args[1].toString().toLowerCase()
    else if (verb === 'EVAL') sha = crypto.createHash('sha1').update(args[1]).digest('hex')
    else continue
    if (!byName.has(sha)) continue
    const n = Number(args[2].toString())
    const call = { client, script: byName.get(sha), keys: args.slice(3, 3 + n), args: args.slice(3 + n) }
    if (verb === 'EVAL' && same(call, lastEvalsha)) {
      lastEvalsha = null
      continue
    }
    lastEvalsha = verb === 'EVALSHA' ? call : null
    out.push(call)
  }
  return out
}
const sameList = (a, b) => a.length === b.length && a.every((x, i) => x.equals(b[i]))

const TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

// ----------------------------------------------------------- redis-server

const PORTS = path.join(ROOT, 'ci', 'ports.sh')

/** Ports from the harness's allocator (ci/ports.sh, tests/README.md), claimed
 * for this process until released or until it exits; P + 10000 is free too. */
function claimPorts(n = 1) {
  const out = execFileSync('bash', [PORTS, 'claim', String(n), '--owner', String(process.pid)], { encoding: 'utf8' })
  const ports = out.split(/\s+/).filter(Boolean).map(Number)
  for (const port of ports) claimed.add(port)
  return ports
}

function releasePorts(...ports) {
  execFileSync('bash', [PORTS, 'release', ...ports.map(String)])
  for (const port of ports) claimed.delete(port)
}

// At exit: kill our servers and give their ports back at once (a dead
// owner's claims would be reaped anyway, later).
const children = new Set()
const claimed = new Set()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
  if (claimed.size > 0) releasePorts(...claimed)
})

/**
 * A private redis-server (no persistence) on a claimed loopback port:
 * { port, url, start(), kill(), stop(), raw() }. kill() keeps the port
 * (start() restarts there, empty); stop() kills and releases it. `args` are
 * extra redis-server arguments.
 */
async function startServer({ password, args = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-redis-'))
  const server = {
    port: 0,
    child: null,
    get url() {
      const auth = password ? `:${encodeURIComponent(password)}@` : ''
      return `redis://${auth}127.0.0.1:${this.port}/0`
    },
    /** Start (again) on our port; resolves once PING is answered by this process. */
    async start() {
      const argv = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]
      if (password) argv.push('--requirepass', password)
      const child = spawn('redis-server', [...argv, ...args], { stdio: 'ignore' })
      child.unref()
      children.add(child)
      let exited = false
      child.on('exit', () => {
        exited = true
        children.delete(child)
      })
      this.child = child
      const deadline = Date.now() + 10_000
      while (!exited && Date.now() < deadline) {
        try {
          const r = await Redis.connect(this.url)
          try {
            const info = (await r.cmd('INFO', 'server')).toString()
            if (info.includes(`process_id:${child.pid}\r`)) return
          } finally {
            r.close()
          }
        } catch {}
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await this.kill()
      throw new Error(`redis-server on port ${this.port} did not start`)
    },
    /** SIGKILL (no goodbye to clients); the port stays claimed. */
    async kill() {
      const child = this.child
      this.child = null
      if (!child || child.exitCode !== null || child.signalCode !== null) return
      child.ref() // keep the loop alive until it is gone
      child.kill('SIGKILL')
      await once(child, 'exit')
    },
    async stop() {
      await this.kill()
      releasePorts(this.port)
      fs.rmSync(dir, { recursive: true, force: true })
    },
    raw() {
      return Redis.connect(this.url)
    },
  }
  for (let attempt = 0; ; attempt++) {
    server.port = claimPorts()[0]
    try {
      await server.start()
      return server
    } catch (err) {
      // Only a process outside the allocator can hold a claimed port: leave
      // it that one and try another.
      releasePorts(server.port)
      if (attempt >= 2) {
        fs.rmSync(dir, { recursive: true, force: true })
        throw err
      }
    }
  }
}

/**
 * A topology the harness provides (FENCELOCK_TEST_CLUSTER_URLS, ...): from the
 * environment under `make test`, else from `ci/redis.sh start` (what
 * `make redis-start` runs; idempotent, stopped by `make redis-stop`).
 */
function harnessEnv(name) {
  if (process.env[name]) return process.env[name]
  const runDir = process.env.FENCELOCK_REDIS_RUN_DIR || path.join(ROOT, '.build', 'redis')
  execFileSync('bash', [path.join(ROOT, 'ci', 'redis.sh'), 'start'], {
    env: { ...process.env, FENCELOCK_REDIS_RUN_DIR: runDir },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const line = fs.readFileSync(path.join(runDir, 'env'), 'utf8').split('\n').find((l) => l.startsWith(`${name}=`))
  if (!line) throw new Error(`${name} missing from ${runDir}/env`)
  return line.slice(name.length + 1)
}

/** The harness's FENCELOCK_TEST_REDIS_URL, or a private server. */
async function redisUrlOrServer() {
  const url = process.env.FENCELOCK_TEST_REDIS_URL
  if (url) return { url, stop: async () => {} }
  return startServer()
}

module.exports = {
  ROOT,
  vectors,
  asBytes,
  asName,
  number,
  Redis,
  parseMonitorLine,
  Monitor,
  scriptCalls,
  TOKEN,
  claimPorts,
  releasePorts,
  startServer,
  harnessEnv,
  redisUrlOrServer,
}
