'use strict'
// The one-round-trip handoff on fencelock/wasm over ioredis (the adapters
// share everything but the transport: wasm/inspect.test.js covers both).
const { after } = require('node:test')
const Redis = require('ioredis')
const { Client } = require('fencelock/wasm')
const { handoffCases } = require('../handoff-cases.js')

const opened = []
async function connect(urls) {
  const list = Array.isArray(urls) ? urls : [urls]
  const redis = await Promise.all(
    list.map(async (url) => {
      const r = new Redis(url, { lazyConnect: true })
      await r.connect()
      opened.push(r)
      return r
    })
  )
  return Client.fromRedis(Array.isArray(urls) ? redis : redis[0])
}
after(() => Promise.all(opened.map((r) => r.quit().catch(() => r.disconnect()))))

handoffCases({ connect })
