'use strict'
// `npm install ./node` (the "install" script): build the napi addon with
// cargo when it is not there yet, so installing from a checkout works with
// only Node and Rust present. Developers use `npm run build` (napi CLI).
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const pkg = path.join(__dirname, '..')
const repo = path.join(pkg, '..')

function addonName() {
  const abi = process.platform === 'linux' ? (process.report?.getReport()?.header?.glibcVersionRuntime ? '-gnu' : '-musl') : ''
  return `fencelock.${process.platform}-${process.arch}${abi}.node`
}

const target = path.join(pkg, addonName())
if (process.env.FENCELOCK_SKIP_ADDON_BUILD) process.exit(0) // ci/test-node.sh builds it with the napi CLI
if (process.argv.includes('--if-missing') && fs.existsSync(target)) process.exit(0)

const manifest = path.join(repo, 'bindings', 'node', 'Cargo.toml')
if (!fs.existsSync(manifest)) {
  console.error(`fencelock: ${manifest} not found; install from a checkout of the repository`)
  process.exit(1)
}
const run = (args, opts = {}) => spawnSync('cargo', args, { cwd: repo, encoding: 'utf8', ...opts })
console.error('fencelock: building the native addon (cargo build --release -p fencelock-node) ...')
const build = run(['build', '--release', '-p', 'fencelock-node'], { stdio: 'inherit' })
if (build.status !== 0) process.exit(build.status ?? 1)
const meta = JSON.parse(run(['metadata', '--format-version', '1', '--no-deps']).stdout)
const lib = { linux: 'libfencelock_node.so', darwin: 'libfencelock_node.dylib', win32: 'fencelock_node.dll' }[process.platform]
fs.copyFileSync(path.join(meta.target_directory, 'release', lib), target)
console.error(`fencelock: built ${path.relative(process.cwd(), target)}`)
