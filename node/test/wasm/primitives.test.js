'use strict'
// client.semaphore() and client.rwLock() on fencelock/wasm over ioredis.
const fencelock = require('fencelock/wasm')
const { primitivesCases } = require('../primitives-cases.js')
const { connect } = require('./ioredis-client.js')

primitivesCases({ ...fencelock, connect })
