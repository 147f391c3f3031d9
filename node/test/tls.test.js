'use strict'
// TLS against `redis-server --tls-port` with ci/tls.sh's certificates: a
// private CA works when given, mutual TLS works and is required where
// configured, a wrong CA and a certificate for another host fail clearly,
// nothing connects unverified without the loud option; and random
// passwords never appear in an error from any path.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const crypto = require('node:crypto')
const { execFileSync } = require('node:child_process')
const { Client, RedisError } = require('..')
const { uniqueName, startRedis, harnessEnv } = require('./helpers.js')
const { claimPorts, releasePorts, startServer } = require('../../tests/support/fltest.js')

const certs =
  process.env.FENCELOCK_TEST_TLS_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'fencelock-tls-node-'))
execFileSync('bash', [path.join(__dirname, '../../ci/tls.sh'), certs], { stdio: 'ignore' })
const file = (name) => path.join(certs, name)

/**
 * A redis-server presenting `cert` on a TLS port of its own (its plain port
 * only serves the launcher's readiness check): { url, port, stop() }.
 */
async function tlsServer(cert = 'server', authClients = 'no') {
  const port = claimPorts()[0]
  const server = await startServer({
    args: ['--tls-port', String(port), '--tls-cert-file', file(`${cert}.crt`), '--tls-key-file', file(`${cert}.key`),
      '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', authClients],
  })
  return {
    port,
    url: `rediss://127.0.0.1:${port}/0`,
    async stop() {
      await server.stop()
      releasePorts(port)
    },
  }
}

async function roundTrip(client) {
  const lease = await client.acquire(uniqueName('tls'), { ttl: 5000 })
  await lease.extend()
  await lease.release()
}

async function connectError(url, options) {
  try {
    const client = await Client.connect(url, options)
    await client.close()
  } catch (err) {
    return err
  }
  assert.fail('connected')
}

test('a private CA as a file path, PEM text or Buffer works', async () => {
  const server = await tlsServer()
  try {
    for (const ca of [file('ca.crt'), fs.readFileSync(file('ca.crt'), 'utf8'), fs.readFileSync(file('ca.crt'))]) {
      const client = await Client.connect(server.url, { tls: { ca } })
      await roundTrip(client)
      await client.close()
    }
  } finally {
    await server.stop()
  }
})

test('failures are clear: system store, wrong CA, another host, missing client certificate', async () => {
  const server = await tlsServer()
  const other = await tlsServer('otherhost')
  const mutual = await tlsServer('server', 'yes')
  try {
    let err = await connectError(server.url)
    assert.ok(err instanceof RedisError && /certificate/.test(err.message), String(err))
    err = await connectError(server.url, { tls: { ca: file('other-ca.crt') } })
    assert.ok(err instanceof RedisError && /UnknownIssuer/.test(err.message), String(err))
    err = await connectError(other.url, { tls: { ca: file('ca.crt') } })
    assert.ok(err instanceof RedisError && /not valid for name/.test(err.message), String(err))
    err = await connectError(mutual.url, { tls: { ca: file('ca.crt') } })
    assert.ok(err instanceof RedisError, String(err))
    const client = await Client.connect(mutual.url, {
      tls: { ca: file('ca.crt'), cert: file('client.crt'), key: file('client.key') },
    })
    await roundTrip(client)
    await client.close()
    // Unverified only with the loud option.
    err = await connectError(`${other.url}#insecure`)
    assert.ok(err instanceof RangeError, String(err))
    const insecure = await Client.connect(other.url, { tls: { dangerouslySkipVerification: true } })
    await roundTrip(insecure)
    await insecure.close()
  } finally {
    await Promise.all([server.stop(), other.stop(), mutual.stop()])
  }
})

test('a server name override verifies that name; a wrong or missing one fails', async () => {
  // The certificate names other.invalid only; the URL's host is 127.0.0.1.
  const other = await tlsServer('otherhost')
  try {
    const client = await Client.connect(other.url, { tls: { ca: file('ca.crt'), serverName: 'other.invalid' } })
    await roundTrip(client)
    await client.close()
    for (const tls of [{ ca: file('ca.crt') }, { ca: file('ca.crt'), serverName: 'redis.internal' }]) {
      const err = await connectError(other.url, { tls })
      assert.ok(err instanceof RedisError && /not valid for name/.test(err.message), String(err))
    }
    const err = await connectError(other.url, { tls: { ca: file('other-ca.crt'), serverName: 'other.invalid' } })
    assert.ok(err instanceof RedisError && /UnknownIssuer/.test(err.message), String(err))
    await assert.rejects(Client.connect(other.url, { tls: { serverName: 'not a host name' } }), RangeError)
    await assert.rejects(Client.connect(other.url, { tls: { serverName: 42 } }), TypeError)
    await assert.rejects(
      Client.connect(other.url, { topology: 'cluster', tls: { ca: file('ca.crt'), serverName: 'other.invalid' } }),
      RangeError,
    )
  } finally {
    await other.stop()
  }
})

test('TLS options apply to a cluster and to Sentinels', async () => {
  // The harness's TLS cluster and TLS Sentinel: private CA, client
  // certificates required, TLS on every connection.
  const dir = harnessEnv('FENCELOCK_TEST_TLS_DIR')
  const cert = (name) => path.join(dir, name)
  const mtls = { cert: cert('client.crt'), key: cert('client.key') }
  const setups = [
    [harnessEnv('FENCELOCK_TEST_TLS_CLUSTER_URLS').split(','), { topology: 'cluster' }],
    [harnessEnv('FENCELOCK_TEST_TLS_SENTINEL_URLS').split(','),
      { topology: 'sentinel', service: harnessEnv('FENCELOCK_TEST_SENTINEL_SERVICE') }],
  ]
  for (const [urls, where] of setups) {
    const client = await Client.connect(urls, { ...where, tls: { ca: cert('ca.crt'), ...mtls } })
    for (let i = 0; i < 12; i++) await roundTrip(client) // names on every shard
    await client.close()
    let err = await connectError(urls, { ...where, tls: mtls })
    assert.ok(err instanceof RedisError && /UnknownIssuer/.test(err.message), String(err))
    err = await connectError(urls, { ...where, tls: { ca: cert('ca.crt') } })
    assert.ok(err instanceof RedisError, String(err))
    const insecure = await Client.connect(urls, { ...where, tls: { dangerouslySkipVerification: true, ...mtls } })
    await roundTrip(insecure)
    await insecure.close()
  }
})

test('random passwords never appear in an error', async () => {
  const alphabet = "abcdefXYZ0123456789/?#@:%!$&'()*+,;= -._~[]"
  const server = await startRedis({ password: 'the-right-one' })
  const down = await startRedis()
  await down.kill()
  const secure = await tlsServer()
  const seen = []
  try {
    for (let i = 0; i < 25; i++) {
      const pw = Array.from({ length: 8 + crypto.randomInt(16) }, () => alphabet[crypto.randomInt(alphabet.length)]).join('')
      const enc = encodeURIComponent(pw)
      const attempts = [
        [`redis://u:${pw}@127.0.0.1:${server.port}/0`],
        [`redis://u:${pw}@127.0.0.1:99999/0`],
        [`redis://:${enc}@127.0.0.1:${server.port}/0`],
        [`redis://:${enc}@127.0.0.1:${down.port}/0`, { connectTimeout: 500 }],
        [`rediss://:${enc}@127.0.0.1:${secure.port}/0`, { tls: { ca: file('other-ca.crt') } }],
      ]
      for (const [url, options] of attempts) {
        const err = await connectError(url, options)
        seen.push([pw, `${err.message}\n${err.stack}\n${require('node:util').inspect(err)}`])
      }
    }
  } finally {
    await Promise.all([server.stop(), down.stop(), secure.stop()])
  }
  for (const [pw, text] of seen) {
    for (const form of [pw, encodeURIComponent(pw)]) assert.ok(!text.includes(form), `${pw} leaked in ${text}`)
  }
})
