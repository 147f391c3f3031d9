'use strict'
// The README's Node quick start (the ```js and ```ts blocks of its
// "## Node.js" section), executed against the test server.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { redisUrl } = require('./helpers.js')

const pkg = path.join(__dirname, '..')
const readme = fs.readFileSync(path.join(pkg, '..', 'README.md'), 'utf8')

function section(title = 'Node.js') {
  const start = readme.indexOf(`\n## ${title}\n`)
  assert.ok(start >= 0, `README has no "## ${title}" section`)
  const rest = readme.slice(start + 1)
  const end = rest.slice(3).search(/\n## |\n<!-- section:/)
  return end < 0 ? rest : rest.slice(0, end + 3)
}

function blocks(lang, title = 'Node.js') {
  const found = [...section(title).matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1])
  assert.ok(found.length > 0, `no \`\`\`${lang} block in the ${title} section`)
  return found
}

// Inside the package directory, so `require('fencelock')` / `import 'fencelock'`
// resolve to this package (self-reference through "exports"). ci/test-dist.sh
// sets FENCELOCK_README_DIR to a directory where the packed tarballs were
// installed, so the same snippets run against node_modules/fencelock there.
const installed = process.env.FENCELOCK_README_DIR
const cwd = installed ?? pkg
const tmp = installed ?? path.join(__dirname, '.readme-tmp')
fs.mkdirSync(tmp, { recursive: true })

function run(file, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${file} did not exit within 20 s:\n${out}`))
    }, 20_000)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
}

test('README JavaScript quick start runs', async () => {
  const [js] = blocks('js')
  const file = path.join(tmp, 'quickstart.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /holding invoice:42: fence \d+, valid for \d+ ms/)
  assert.match(out, /total 42/)
  assert.match(out, /TimeoutError/)
  assert.match(out, /NOT_ACQUIRED/)
})

test('README "Inspecting a lock" snippet runs', async () => {
  const [, js] = blocks('js')
  const file = path.join(tmp, 'inspect.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /inspect: held true, ttl \d+ ms, fence true, mine true/)
  assert.match(out, /isHeld true/)
  assert.match(out, /after release false/)
})

test('README "Force-release" snippet runs', async () => {
  const [, , js] = blocks('js')
  const file = path.join(tmp, 'force.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /forced: true, held false/)
  assert.match(out, /stuck holder lost: true/)
  assert.match(out, /FENCELOCK_FORCE_RELEASE/)
})

test('README "Renewal controls" snippet runs', async () => {
  const [, , , js] = blocks('js')
  const file = path.join(tmp, 'renewal.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /held for maxHold, then lost: true/)
  assert.match(out, /renewal stopped, still valid: true/)
})

test('README "Fenced writes" snippet runs', async () => {
  const js = blocks('js').find((b) => b.includes('fencedSet'))
  assert.ok(js, 'no fencedSet block in the Node section')
  const file = path.join(tmp, 'fenced.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /refused: fence \d+ is older than \d+/)
})

test('README "Semaphore and read-write lock" snippet runs', async () => {
  const js = blocks('js').find((b) => b.includes('client.semaphore('))
  assert.ok(js, 'no semaphore block in the Node section')
  const file = path.join(tmp, 'primitives.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /permit fence \d+/)
  assert.match(out, /mine: true/)
  assert.match(out, /readers share, a writer waits: true/)
  assert.match(out, /write fence \d+/)
})

test('README "Fair across processes" snippet runs', async () => {
  const js = blocks('js').find((b) => b.includes('fair: true'))
  assert.ok(js, 'no fair block in the Node section')
  const file = path.join(tmp, 'fair.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /fair fence \d+/)
})

test('README "Several locks at once" snippet runs', async () => {
  const js = blocks('js').find((b) => b.includes('client.withLocks('))
  assert.ok(js, 'no withLocks block in the Node section')
  const file = path.join(tmp, 'many.cjs')
  fs.writeFileSync(file, js)
  const { code, out } = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(code, 0, out)
  assert.match(out, /holding account:1 fence \d+n\nholding account:2 fence \d+n/)
  assert.match(out, /one held, none taken: true/)
})

test('README "Operations" list/watch and metrics snippets run', async () => {
  const [listing, metrics] = blocks('js', 'Operations: CLI and metrics')
  const file = path.join(tmp, 'operations.cjs')
  fs.writeFileSync(file, listing)
  const listed = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(listed.code, 0, listed.out)
  assert.match(listed.out, /^invoice:53 fence \d+n$/m)
  assert.match(listed.out, /now: held true/)
  assert.match(listed.out, /then: held false/)
  fs.writeFileSync(file, metrics)
  const counted = await run(file, { REDIS_URL: await redisUrl() })
  assert.equal(counted.code, 0, counted.out)
  assert.match(counted.out, /^fencelock_acquires_total\{outcome="acquired"\} 1$/m)
  assert.match(counted.out, /^fencelock_wait_seconds_count 1$/m)
  assert.match(counted.out, /^fencelock_releases_total\{outcome="ok"\} 1$/m)
})

test('README TypeScript quick start type-checks and runs', async () => {
  const ts = require('typescript')
  const [source] = blocks('ts')
  const file = path.join(tmp, 'quickstart.mts')
  fs.writeFileSync(file, source)
  const tsc = spawnSync(
    process.execPath,
    [
      require.resolve('typescript/bin/tsc'),
      '--noEmit',
      '--strict',
      '--target', 'es2022',
      '--lib', 'es2022,esnext.disposable',
      '--module', 'node16',
      '--moduleResolution', 'node16',
      '--types', 'node',
      '--typeRoots', path.join(pkg, 'node_modules', '@types'),
      file,
    ],
    { cwd, encoding: 'utf8' },
  )
  assert.equal(tsc.status, 0, `${tsc.stdout}\n${tsc.stderr}`)
  const js = ts.transpileModule(source, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
  }).outputText
  const out = path.join(tmp, 'quickstart.mjs')
  fs.writeFileSync(out, js)
  const result = await run(out, { REDIS_URL: await redisUrl() })
  assert.equal(result.code, 0, result.out)
  assert.match(result.out, /Lease\(name="report:daily", fence=\d+\) \d+n/)
  assert.match(result.out, /^7$/m)
})
