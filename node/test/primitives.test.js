'use strict'
// client.semaphore() and client.rwLock() on the addon.
const fencelock = require('..')
const { primitivesCases } = require('./primitives-cases.js')

primitivesCases({ ...fencelock, connect: (urls) => fencelock.Client.connect(urls) })
