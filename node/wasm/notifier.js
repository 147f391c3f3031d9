'use strict'
const { Buffer } = require('node:buffer')
// Release notifications for one client: one SUBSCRIBE per channel per node on
// each adapter's separate subscriber connection, shared by every waiting
// acquire of that channel (refcounted, the Rust driver's notify.rs rules).
//
// A waiter is woken (a) once every node confirmed (or failed) its
// subscription, so the core re-checks the lock and no release published
// before that moment is missed: `wake()`; and (b) on every release message:
// `wake(message)`, the message's bytes, for the core to read (a fair mutex's
// release names the one waiter it is for).

class Notifier {
  #adapters
  #tables // per node: channel key -> { waiters: Set, state: 'pending'|'active'|'failed' }

  constructor(adapters) {
    this.#adapters = adapters
    this.#tables = adapters.map(() => new Map())
  }

  /** Calls `wake()` / `wake(message)` as described above until the returned `close()`. */
  subscribe(channel, wake) {
    const key = channel.toString('latin1')
    const waiter = { wake, pending: this.#adapters.length, closed: false }
    const confirm = () => {
      if (!waiter.closed && --waiter.pending === 0) wake()
    }
    waiter.confirm = confirm
    this.#adapters.forEach((adapter, node) => {
      const table = this.#tables[node]
      let entry = table.get(key)
      if (entry === undefined) {
        entry = { waiters: new Set(), state: 'pending' }
        table.set(key, entry)
        // An adapter that passes no message wakes everyone, as '1' does.
        const onMessage = (message) => {
          const bytes = typeof message === 'string' ? Buffer.from(message) : message instanceof Uint8Array ? message : Buffer.from('1')
          for (const w of entry.waiters) w.wake(bytes)
        }
        adapter.subscribe(channel, onMessage).then(
          () => settle(entry, 'active'),
          // The core's retry timer still covers this waiter.
          () => settle(entry, 'failed'),
        )
      }
      entry.waiters.add(waiter)
      if (entry.state !== 'pending') queueMicrotask(confirm)
    })
    return {
      close: () => {
        if (waiter.closed) return
        waiter.closed = true
        this.#adapters.forEach((adapter, node) => {
          const table = this.#tables[node]
          const entry = table.get(key)
          if (entry === undefined || !entry.waiters.delete(waiter) || entry.waiters.size > 0) return
          table.delete(key)
          if (entry.state === 'active' || entry.state === 'pending') adapter.unsubscribe(channel).catch(() => {})
        })
      },
    }
  }
}

function settle(entry, state) {
  entry.state = state
  for (const waiter of entry.waiters) waiter.confirm()
}

module.exports = { Notifier }
