'use strict'
// Renewal controls through the native addon (the cases: renewal-cases.js).
const { before, after } = require('node:test')
const { Client, LockLostError } = require('..')
const { redisUrl, Raw } = require('./helpers.js')
const { renewalTests } = require('./renewal-cases.js')

let url
let client
let raw
before(async () => {
  url = await redisUrl()
  client = await Client.connect(url)
  raw = await Raw.connect(url)
})
after(async () => {
  await client?.close()
  raw?.close()
})

renewalTests('', () => ({ client, raw, url, LockLostError }))
