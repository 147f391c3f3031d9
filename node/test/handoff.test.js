'use strict'
// The one-round-trip handoff on the addon.
const { Client } = require('..')
const { handoffCases } = require('./handoff-cases.js')

handoffCases({ connect: (urls) => Client.connect(urls) })
