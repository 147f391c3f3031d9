'use strict'
// Loads fencelock-core compiled to WebAssembly (bindings/wasm), generated
// into wasm/pkg/ by `npm run build:wasm` (wasm-bindgen, nodejs target).
const path = require('node:path')
const fs = require('node:fs')

const glue = path.join(__dirname, 'pkg', 'fencelock_wasm.js')
if (!fs.existsSync(glue)) {
  throw new Error(`fencelock/wasm: ${path.relative(process.cwd(), glue)} is missing; build it with \`npm run build:wasm\` in ${path.dirname(__dirname)}`)
}
module.exports = require(glue)
