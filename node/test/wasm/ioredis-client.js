'use strict'
// `connect(urls, options)` for the shared case files (force-cases.js,
// handoff-cases.js, primitives-cases.js, stalled-cases.js): a fencelock/wasm
// Client over one ioredis client per URL, quit after the test file.
const { after } = require('node:test')
const Redis = require('ioredis')
const { Client } = require('fencelock/wasm')

const opened = []
after(() => Promise.all(opened.map((r) => r.quit().catch(() => r.disconnect()))))

async function connect(urls, options) {
  const list = Array.isArray(urls) ? urls : [urls]
  const redis = await Promise.all(
    list.map(async (url) => {
      const r = new Redis(url, { lazyConnect: true })
      await r.connect()
      opened.push(r)
      return r
    })
  )
  return Client.fromRedis(Array.isArray(urls) ? redis : redis[0], options)
}

module.exports = { connect }
