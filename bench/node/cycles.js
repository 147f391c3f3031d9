'use strict'
// N sequential acquire + release cycles of fencelock's native addon and
// nothing else, for callgrind (bench/README.md, "Profiling the Node and
// asyncio front ends"): the difference between two counts of N is the cost
// of a cycle, start-up and JIT warm-up cancelled out.
//
//   node cycles.js N URL        (BENCH_FENCELOCK_NODE: the package, as in bench_node.js)
const n = Number(process.argv[2] || 1000)
const url = process.argv[3] || 'redis://127.0.0.1:6379/0'

async function main() {
  const { Client } = require(process.env.BENCH_FENCELOCK_NODE || '../../node')
  const client = await Client.connect(url)
  const name = `bench:cycles:node:${process.pid}`
  for (let i = 0; i < n; i++) {
    const lease = await client.acquire(name, { ttl: 10_000 })
    await lease.release()
  }
  await client.close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
