'use strict'
// `connect(url | urls)`: a fencelock/wasm Client over fresh ioredis clients
// (an array of URLs: Redlock), for the cases shared with the addon's suites.
// The ioredis clients are the test's: quit after the file's tests.
const { after } = require('node:test')
const Redis = require('ioredis')
const { Client } = require('fencelock/wasm')

const opened = []
after(() => Promise.all(opened.map((r) => r.quit().catch(() => r.disconnect()))))

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

module.exports = { connect }
