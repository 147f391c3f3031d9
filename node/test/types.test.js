'use strict'
// `tsc --noEmit` over the typed usage example (test/types.ts) and index.d.ts.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

test('tsc --noEmit accepts test/types.ts against index.d.ts', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const result = spawnSync(process.execPath, [tsc, '--noEmit', '-p', path.join(__dirname, 'tsconfig.json')], {
    encoding: 'utf8',
  })
  assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`)
})
