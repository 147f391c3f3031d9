'use strict'
// { fair: true } on fencelock/wasm over ioredis.
const path = require('node:path')
const fencelock = require('fencelock/wasm')
const { fairCases } = require('../fair-cases.js')
const { connect } = require('./ioredis-client.js')

fairCases({ ...fencelock, connect, waiterScript: path.join(__dirname, 'fair-waiter.js') })
