'use strict'
// fencelock/sql: the SQL recipe of fenced writes through node-postgres,
// against a real PostgreSQL (the harness's, or a private one).
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { randomUUID } = require('node:crypto')
const pg = require('pg')
const fencelock = require('..')
const { fencedUpdate } = require('fencelock/sql')
const { redisUrl, pgUrl, uniqueName } = require('./helpers.js')

let db
let client
let stuck // the stale holder's own client
// A name that needs quoting: fencedUpdate quotes every identifier.
const table = `accounts "${randomUUID().slice(0, 8)}"`
const quoted = `"${table.replaceAll('"', '""')}"`

before(async () => {
  db = new pg.Client({ connectionString: pgUrl() })
  await db.connect()
  await db.query(`CREATE TABLE ${quoted} (id int PRIMARY KEY, balance int, note text, fence bigint)`)
  await db.query(`INSERT INTO ${quoted} (id, balance) VALUES (1, 100), (2, 200)`)
  client = await fencelock.Client.connect(await redisUrl())
  stuck = await fencelock.Client.connect(await redisUrl())
})
after(async () => {
  await db.query(`DROP TABLE ${quoted}`)
  await db.end()
  await Promise.all([client.close(), stuck.close()])
})

async function row(id) {
  const { rows } = await db.query(`SELECT balance, note, fence FROM ${quoted} WHERE id = $1`, [id])
  return rows[0]
}

test('a stale holder is refused; the same holder may write again', async () => {
  const name = uniqueName('sql')
  const zombie = await stuck.acquire(name, { ttl: 30_000 })
  assert.equal(await fencedUpdate(db, table, { balance: 110 }, { where: { id: 1 }, fence: zombie }), 1)
  assert.equal(await fencedUpdate(db, table, { balance: 120 }, { where: { id: 1 }, fence: zombie }), 1)
  assert.deepEqual(await row(1), { balance: 120, note: null, fence: String(zombie.fence) })

  await client.forceRelease(name)
  const next = await client.acquire(name, { ttl: 30_000 })
  assert.equal(await fencedUpdate(db, table, { note: 'taken over' }, { where: { id: 1 }, fence: next }), 1)
  const err = await fencedUpdate(db, table, { balance: 0 }, { where: { id: 1 }, fence: zombie }).then(() => null, (e) => e)
  assert.ok(err instanceof fencelock.StaleFenceError && err instanceof fencelock.LockLostError, String(err))
  assert.deepEqual([err.lockName, err.resource, err.fence, err.accepted], [name, table, zombie.fence, next.fence])
  assert.deepEqual(await row(1), { balance: 120, note: 'taken over', fence: String(next.fence) })
  // A where that matches nothing is not a refusal.
  assert.equal(await fencedUpdate(db, table, { balance: 1 }, { where: { id: 99 }, fence: next }), 0)
  // A bare fence (handed to another process): no lock name on the error.
  const bare = await fencedUpdate(db, ['public', table], {}, { where: { id: 1 }, fence: zombie.fence }).then(() => null, (e) => e)
  assert.ok(bare instanceof fencelock.StaleFenceError && bare.lockName === undefined, String(bare))
  assert.equal(bare.resource, `public.${table}`)
  await next.release()
})

test('bad arguments reject before anything is sent', async () => {
  const lease = await client.acquire(uniqueName('sql-bad'), { ttl: 30_000 })
  const where = { id: 2 }
  for (const call of [
    () => fencedUpdate(db, table, { balance: 1 }, { where, fence: 7 }),
    () => fencedUpdate(db, table, { balance: 1 }, { where, fence: '7' }),
    () => fencedUpdate(db, table, [['balance', 1]], { where, fence: lease }),
    () => fencedUpdate(db, 42, { balance: 1 }, { where, fence: lease }),
    () => fencedUpdate({}, table, { balance: 1 }, { where, fence: lease }),
    () => fencedUpdate(db, table, { balance: 1 }, { fence: lease }),
  ]) {
    await assert.rejects(call(), TypeError)
  }
  for (const call of [
    () => fencedUpdate(db, table, { balance: 1 }, { where: {}, fence: lease }), // would hit every row
    () => fencedUpdate(db, table, { fence: 1 }, { where, fence: lease }),
    () => fencedUpdate(db, table, { '': 1 }, { where, fence: lease }),
    () => fencedUpdate(db, table, { balance: 1 }, { where, fence: -1n }),
  ]) {
    await assert.rejects(call(), RangeError)
  }
  assert.deepEqual(await row(2), { balance: 200, note: null, fence: null })
  await lease.release()
})

test('README "Fenced writes" Node snippet runs against PostgreSQL', async () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8')
  const start = readme.indexOf('\n## Fenced writes\n')
  assert.ok(start >= 0, 'README has no "## Fenced writes" section')
  const rest = readme.slice(start + 1)
  const section = rest.slice(0, rest.slice(3).search(/\n## /) + 3)
  const js = /```js\n([\s\S]*?)```/.exec(section)?.[1]
  assert.ok(js, 'no ```js block in the Fenced writes section')
  const dir = path.join(__dirname, '.readme-tmp')
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, 'sql.cjs')
  fs.writeFileSync(file, js)
  // Inside the package: require('fencelock/sql') and 'pg' resolve here.
  const run = spawnSync(process.execPath, [file], {
    cwd: path.join(__dirname, '..'),
    env: { ...process.env, REDIS_URL: await redisUrl(), PG_URL: pgUrl() },
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(run.status, 0, run.stdout + run.stderr)
  assert.match(run.stdout, /refused: fence \d+ is older than \d+ in invoices/)
})
