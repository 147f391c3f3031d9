'use strict'
// A child process for fair-cases.js: waits fairly on argv[3] at argv[2]
// until it is killed. argv[4] === 'wasm': through fencelock/wasm.
const [url, name, flavour] = process.argv.slice(2)
async function main() {
  let client
  if (flavour === 'wasm') {
    const Redis = require('ioredis')
    client = require('fencelock/wasm').Client.fromRedis(new Redis(url))
  } else {
    client = await require('..').Client.connect(url)
  }
  await client.acquire(name, { ttl: 10_000, fair: true })
}
main()
