'use strict'
// client.forceRelease(name) on the addon.
const { Client, ClientClosedError, LockLostError } = require('..')
const { forceReleaseCases } = require('./force-cases.js')

forceReleaseCases({ connect: (urls) => Client.connect(urls), ClientClosedError, LockLostError })
