'use strict'
// client.forceRelease(name) on fencelock/wasm over ioredis (the adapters
// share everything but the transport: wasm/inspect.test.js covers both).
const { ClientClosedError, LockLostError } = require('fencelock/wasm')
const { forceReleaseCases } = require('../force-cases.js')
const { connect } = require('./ioredis-client.js')

forceReleaseCases({ connect, ClientClosedError, LockLostError })
