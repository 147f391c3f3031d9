'use strict'
// Loads the napi-rs addon built from bindings/node (`npm run build`).
// Not public API: index.js wraps it. When the addon cannot load (no prebuilt
// binary for this platform, a sandbox without native modules, or
// FENCELOCK_FORCE_WASM=1 in tests), the error points to `fencelock/wasm`.
const { join } = require('node:path')
const { existsSync } = require('node:fs')

function abi() {
  if (process.platform !== 'linux') return ''
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  const glibc = report?.header?.glibcVersionRuntime
  return glibc ? '-gnu' : '-musl'
}

function unavailable(why, cause) {
  const err = new Error(
    `fencelock: the native addon cannot be loaded here (${why}). ` +
      "Use the WebAssembly build with your application's Redis client instead: " +
      "`const { Client } = require('fencelock/wasm'); const client = Client.fromRedis(new Redis(url))` " +
      '(ioredis or node-redis; an array of clients is Redlock).',
    cause ? { cause } : undefined,
  )
  err.code = 'ERR_FENCELOCK_NATIVE_UNAVAILABLE'
  return err
}

function load() {
  if (process.env.FENCELOCK_FORCE_WASM === '1') throw unavailable('FENCELOCK_FORCE_WASM=1 is set')
  const platform = `${process.platform}-${process.arch}${abi()}`
  const file = `fencelock.${platform}.node`
  // A checkout (`npm run build`) has the addon beside this file; a registry
  // install has it in the per-platform package npm picked from the
  // optionalDependencies (napi-rs layout, see docs/releasing.md).
  const path = join(__dirname, file)
  const target = existsSync(path) ? path : `fencelock-${platform}`
  try {
    return require(target)
  } catch (err) {
    if (target !== path && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(target)) {
      throw unavailable(
        `neither ${file} nor the package ${target} is installed; ` +
          `in a checkout, \`npm run build\` in ${__dirname} builds it`,
      )
    }
    throw unavailable(`${target} failed to load: ${err.message}`, err)
  }
}

module.exports = load()
