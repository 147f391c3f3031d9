'use strict'
// A demo worker (Node): takes jobs from the queue, locks the job's resource
// with fencelock, "works", writes the result to the resource's ledger with a
// fenced write (`lease.fencedHSet`: the ledger refuses a stale lock holder),
// releases. Prints one JSON event per line for the orchestrator.
// Usage: node worker.js REDIS_URL NAMESPACE WORKER_NAME TTL_MS
// FENCELOCK_NODE_FLAVOUR=wasm (DEMO_WASM=1): fencelock/wasm over ioredis.
const { fencelock, connect } = require('../tests/node/flavour.js')
const { LockLostError, StaleFenceError } = fencelock
const { Redis } = require('../tests/support/fltest.js')

const [url, ns, me, ttlMs] = process.argv.slice(2)
const MODE = process.env.DEMO_UNFENCED ? 'unfenced' : 'fenced'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const emit = (ev, fields = {}) => console.log(JSON.stringify({ ev, w: me, t: Date.now() / 1000, ...fields }))

async function main() {
  const redis = await Redis.connect(url)
  const client = await connect(url)
  emit('ready')
  while (!(await redis.cmd('EXISTS', `${ns}stop`))) {
    const job = await redis.cmd('LMOVE', `${ns}jobs`, `${ns}processing:${me}`, 'RIGHT', 'LEFT')
    if (job === null) {
      await sleep(20)
      continue
    }
    const [jobId, resource] = job.toString().split(' ')
    const waitedFrom = Date.now() / 1000
    const lease = await client.acquire(ns + resource, { ttl: Number(ttlMs) }) // waits until acquired
    const fence = Number(lease.fence)
    const slow = (await redis.cmd('GETDEL', `${ns}slow:${me}`)) !== null
    emit('acquired', { job: jobId, res: resource, fence, waited_from: waitedFrom, slow })
    await sleep(slow ? 600 : 40 + Math.random() * 40) // the work
    // The resource's ledger: a hash of job -> worker, and the last fence it
    // accepted (field "fence"), which the fenced write checks and records.
    const ledger = `${ns}ledger:${resource}`
    try {
      if (MODE === 'fenced') await lease.fencedHSet(ledger, jobId, me)
      else await redis.cmd('HSET', ledger, jobId, me) // DEMO_UNFENCED=1: no fence check (see what breaks)
      emit('wrote', { job: jobId, res: resource, fence })
    } catch (err) {
      // We were paused or force-released: not ours any more. StaleFenceError:
      // the ledger refused (it accepted a newer fence); plain LockLostError:
      // our lease knew it had expired and sent nothing.
      if (!(err instanceof LockLostError)) throw err
      const by = err instanceof StaleFenceError ? 'ledger' : 'lease'
      emit('stale', { job: jobId, res: resource, fence, by, last: err.accepted === undefined ? null : Number(err.accepted) })
      await redis.cmd('LPUSH', `${ns}jobs`, job) // retry the job later
    }
    await redis.cmd('LREM', `${ns}processing:${me}`, 1, job)
    try {
      await lease.release()
      emit('released', { res: resource, fence })
    } catch (err) {
      if (!(err instanceof LockLostError)) throw err
      emit('lost', { res: resource, fence })
    }
  }
  await client.close()
  redis.close()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
