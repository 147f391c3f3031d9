'use strict'
// { fair: true } on the addon.
const path = require('node:path')
const fencelock = require('..')
const { fairCases } = require('./fair-cases.js')

fairCases({
  ...fencelock,
  connect: (urls) => fencelock.Client.connect(urls),
  waiterScript: path.join(__dirname, 'fair-waiter.js'),
})
