'use strict'
// A stalled Redlock node on the addon.
const { Client } = require('..')
const { stalledCases } = require('./stalled-cases.js')

stalledCases({ connect: (urls, options) => Client.connect(urls, options) })
