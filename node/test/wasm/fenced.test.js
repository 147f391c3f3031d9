'use strict'
// lease.fencedSet / fencedHSet on fencelock/wasm over ioredis.
const fencelock = require('fencelock/wasm')
const { connect } = require('./ioredis-client.js')
const { fencedWriteCases } = require('../fenced-cases.js')

fencedWriteCases({ connect, errors: fencelock })
