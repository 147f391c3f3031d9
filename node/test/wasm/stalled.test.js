'use strict'
// A stalled Redlock node on fencelock/wasm over ioredis: replies are fed to
// the core as they come, so the majority's decide without the third.
const { connect } = require('./ioredis-client.js')
const { stalledCases } = require('../stalled-cases.js')

stalledCases({ connect })
