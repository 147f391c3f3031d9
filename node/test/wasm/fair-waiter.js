'use strict'
// The fair waiter child (../fair-waiter.js) through fencelock/wasm.
process.argv.push('wasm')
require('../fair-waiter.js')
