'use strict'
// lease.fencedSet / fencedHSet on the addon.
const fencelock = require('..')
const { fencedWriteCases } = require('./fenced-cases.js')

fencedWriteCases({ connect: (urls) => fencelock.Client.connect(urls), errors: fencelock })
