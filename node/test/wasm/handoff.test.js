'use strict'
// The one-round-trip handoff on fencelock/wasm over ioredis (the adapters
// share everything but the transport: wasm/inspect.test.js covers both).
const { connect } = require('./ioredis-client.js')
const { handoffCases } = require('../handoff-cases.js')

handoffCases({ connect })
