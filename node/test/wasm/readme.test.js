'use strict'
// The README's fencelock/wasm quick start (the ```js block of its
// "## WebAssembly" section), executed against the test server with the
// native addon disabled (FENCELOCK_FORCE_WASM=1).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { redisUrl } = require('../helpers.js')

const pkg = path.join(__dirname, '..', '..')
const readme = fs.readFileSync(path.join(pkg, '..', 'README.md'), 'utf8')

test('README WebAssembly quick start runs with the app\'s ioredis client', async () => {
  const start = readme.indexOf('\n## WebAssembly (`fencelock/wasm`)\n')
  assert.ok(start >= 0, 'README has no WebAssembly section')
  const rest = readme.slice(start + 1)
  const section = rest.slice(0, rest.slice(3).search(/\n## /) + 3)
  const js = /```js\n([\s\S]*?)```/.exec(section)?.[1]
  assert.ok(js, 'no ```js block in the WebAssembly section')
  // Inside the package, so require('fencelock/wasm') and 'ioredis' resolve
  // here; ci/test-dist.sh sets FENCELOCK_README_DIR to an app that installed
  // the packed tarballs (and ioredis), to run it against those instead.
  const installed = process.env.FENCELOCK_README_DIR
  const dir = installed ?? path.join(pkg, 'test', '.readme-tmp')
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, 'wasm-quickstart.cjs')
  fs.writeFileSync(file, js)
  const run = spawnSync(process.execPath, [file], {
    cwd: installed ?? pkg,
    env: { ...process.env, REDIS_URL: await redisUrl(), FENCELOCK_FORCE_WASM: '1' },
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(run.status, 0, run.stdout + run.stderr)
  assert.match(run.stdout, /holding invoice:42: fence \d+, valid for \d+ ms/)
  assert.match(run.stdout, /withLock 42/)
})
