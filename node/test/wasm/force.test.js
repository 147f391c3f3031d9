'use strict'
// client.forceRelease(name) on fencelock/wasm over ioredis (the adapters
// share everything but the transport: wasm/inspect.test.js covers both).
const { ClientClosedError, LockLostError } = require('fencelock/wasm')
const { connect } = require('./ioredis-client.js')
const { forceReleaseCases } = require('../force-cases.js')

forceReleaseCases({ connect, ClientClosedError, LockLostError })
