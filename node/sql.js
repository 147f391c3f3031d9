'use strict'
// fencelock/sql: fenced writes to PostgreSQL through node-postgres (`pg`):
// the row refuses a stale lock holder.
//
// One `UPDATE ... SET ..., fence = $f WHERE <where> AND (fence IS NULL OR
// fence <= $f)`, applied while the row's recorded fence is not newer than the
// writer's (equal: the same holder writing again), recording the writer's
// fence in the same statement; when it changes no row, one `SELECT
// max(fence)` tells a refusal (StaleFenceError) from a `where` that matched
// nothing (0). The statements, their parameter order and what a refusal
// means come from fencelock's core (through the native addon, or the
// WebAssembly core where the addon cannot load), the same as Python's
// fencelock.sql. They run on your client, in your transaction.
const { fromNative } = require('./errors.js')

let FencedUpdate = null
/** The core's statement builder: the addon's, else the wasm core's. */
function builder() {
  if (FencedUpdate === null) {
    try {
      FencedUpdate = require('./native.js').NativeFencedUpdate
    } catch {
      FencedUpdate = require('./wasm/core.js').WasmFencedUpdate
    }
  }
  return FencedUpdate
}

function typeError(message) {
  const e = new TypeError(message)
  e.code = 'ERR_INVALID_ARG_TYPE'
  return e
}

function plainObject(what, value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw typeError(`${what} must be an object of column names to values`)
  }
  return value
}

/** The fence and lock name of `fence`: a Lease (anything with a bigint `fence` and a `name`) or a bigint. */
function fenceOf(fence) {
  if (typeof fence === 'bigint') return { number: fence, lockName: undefined }
  if (fence !== null && typeof fence === 'object' && typeof fence.fence === 'bigint') {
    return { number: fence.fence, lockName: fence.name }
  }
  throw typeError('fence must be a Lease or a bigint')
}

/**
 * Update with `values` the rows of `table` matching `where` (column = value,
 * all of them; meant to pick one row) whose recorded fence is not newer than
 * `fence` (a Lease, or its bigint fence), recording `fence` in `fenceColumn`
 * (default 'fence'). Resolves to the rows updated, 0 if `where` matched
 * none; rejects with StaleFenceError when no row was updated because a newer
 * fence is recorded (nothing written).
 * `db`: a pg Client, Pool or PoolClient (anything with pg's `query(config)`);
 * `table`: a name or [schema, name].
 */
async function fencedUpdate(db, table, values, { where, fence, fenceColumn = 'fence' } = {}) {
  if (db === null || typeof db !== 'object' || typeof db.query !== 'function') {
    throw typeError('db must be a node-postgres client or pool (with query())')
  }
  const parts = typeof table === 'string' ? [table] : table
  if (!Array.isArray(parts) || !parts.every((p) => typeof p === 'string')) {
    throw typeError('table must be a string or an array of strings ([schema, table])')
  }
  if (typeof fenceColumn !== 'string') throw typeError('fenceColumn must be a string')
  plainObject('values', values)
  plainObject('where', where)
  const { number, lockName } = fenceOf(fence)
  const Builder = builder()
  let statements
  try {
    statements = new Builder(parts, Object.keys(values), Object.keys(where), fenceColumn, String(number), lockName)
  } catch (err) {
    throw fromNative(err)
  }
  const kept = Object.values(where)
  const updated = await db.query({ text: statements.update, values: [...Object.values(values), number, ...kept, number] })
  let newest = null
  if (!(updated.rowCount > 0)) {
    const check = await db.query({ text: statements.check, values: kept, rowMode: 'array' })
    const value = check.rows[0]?.[0]
    newest = value === null || value === undefined ? null : String(value)
  }
  try {
    return statements.outcome(updated.rowCount ?? 0, newest)
  } catch (err) {
    throw fromNative(err, lockName, { resource: typeof table === 'string' ? table : parts.join('.'), fence: number })
  }
}

module.exports = { fencedUpdate }
