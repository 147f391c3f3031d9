'use strict'
// Which Node flavour the cross-language Node tests and the Node interop
// agent drive: the native addon (default), or fencelock/wasm over an ioredis
// client per URL when FENCELOCK_NODE_FLAVOUR=wasm. Both have the same API
// and error classes; only how a Client is made differs.
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const wasm = process.env.FENCELOCK_NODE_FLAVOUR === 'wasm'
const fencelock = require(path.join(ROOT, 'node', wasm ? 'wasm' : ''))

/** `Client.connect(url | urls, options)`, whichever the flavour. */
async function connect(urls, options) {
  if (!wasm) return fencelock.Client.connect(urls, options)
  const Redis = require(path.join(ROOT, 'node', 'node_modules', 'ioredis'))
  const apps = (Array.isArray(urls) ? urls : [urls]).map((url) => new Redis(url))
  const client = fencelock.Client.fromRedis(Array.isArray(urls) ? apps : apps[0], options)
  // The test owns these ioredis clients: close them with the lock client.
  const close = client.close.bind(client)
  client.close = async () => {
    await close()
    await Promise.all(apps.map((app) => app.quit()))
  }
  return client
}

module.exports = { fencelock, connect, name: wasm ? 'wasm' : 'node' }
