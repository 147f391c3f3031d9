'use strict'
// Loads the napi-rs addon built from bindings/node (`npm run build`).
// Not public API: index.js wraps it.
const { join } = require('node:path')
const { existsSync } = require('node:fs')

function abi() {
  if (process.platform !== 'linux') return ''
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  const glibc = report?.header?.glibcVersionRuntime
  return glibc ? '-gnu' : '-musl'
}

const file = `fencelock.${process.platform}-${process.arch}${abi()}.node`
const path = join(__dirname, file)
if (!existsSync(path)) {
  throw new Error(
    `fencelock: native addon ${file} is missing; build it with \`npm run build\` in ${__dirname}`,
  )
}
module.exports = require(path)
