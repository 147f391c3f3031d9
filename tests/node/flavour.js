'use strict'
// Which Node flavour the cross-language Node tests and the Node interop
// agent drive: the native addon (default), or fencelock/wasm over one Redis
// client per URL, with FENCELOCK_NODE_FLAVOUR=wasm (ioredis) or
// wasm-node-redis (node-redis). Both flavours have the same API and error
// classes; only how a Client is made differs.
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const flavour = process.env.FENCELOCK_NODE_FLAVOUR || 'node'
if (!['node', 'wasm', 'wasm-node-redis'].includes(flavour)) throw new Error(`unknown FENCELOCK_NODE_FLAVOUR ${flavour}`)
const wasm = flavour !== 'node'
const fencelock = require(path.join(ROOT, 'node', wasm ? 'wasm' : ''))
const peer = (name) => require(path.join(ROOT, 'node', 'node_modules', name))

async function open(url) {
  if (flavour === 'wasm') return new (peer('ioredis'))(url)
  return peer('redis').createClient({ url }).connect()
}

/** `Client.connect(url | urls, options)`, whichever the flavour. */
async function connect(urls, options) {
  if (!wasm) return fencelock.Client.connect(urls, options)
  const apps = await Promise.all((Array.isArray(urls) ? urls : [urls]).map(open))
  const client = fencelock.Client.fromRedis(Array.isArray(urls) ? apps : apps[0], options)
  // The test owns these Redis clients: close them with the lock client. A
  // connection a fault just cut refuses QUIT ("Connection is closed."; it
  // ended a wasm safety worker in proxy-drop): disconnect it instead.
  const close = client.close.bind(client)
  client.close = async () => {
    await close()
    await Promise.all(apps.map((app) => app.quit().catch(() => app.disconnect())))
  }
  return client
}

module.exports = { fencelock, connect, name: wasm ? 'wasm' : 'node' }
