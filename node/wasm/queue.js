'use strict'
// The local FIFO (the same rules as the Rust driver's bindings/driver/src/
// queue.rs): acquires of one client for one name line up behind a single
// remote attempt, so a client never races itself and handoff inside one
// process is fair. The turn is held from the attempt until the lease is
// released, lost or given up; idle names cost nothing.
//
// Past its deadline a waiter gives up, except while the turn is held by an
// acquire whose caller cancelled it: that one only finishes its compensating
// release, and a try-once must not report NotAcquired for a lock nobody holds.
//
// Handoff (the core's releaseTo): the holder's release picks the first waiter
// whose caller still waits (`turn.promiseNext()`) and hands it the release's
// outcome with the turn (`promise.deliver(handoff)`): that waiter's turn
// carries `handoff`, to start from instead of an attempt. A promised waiter
// waits for it past its deadline, and one whose caller left takes it all the
// same, to give it back.

class NameQueues {
  #entries = new Map() // name key -> { holder, waiters: [] }

  /**
   * Resolves with a turn (call `turn.release()` once), or null when the
   * deadline (ms on `clock`, undefined: none) passed. `who.cancelled` tells
   * whether the acquire holding the turn was cancelled; `who.abandon(fn)`
   * registers a callback for when the caller gives up while queued.
   */
  take(key, who, deadline, clock) {
    let entry = this.#entries.get(key)
    if (entry === undefined) {
      entry = { holder: null, waiters: [] }
      this.#entries.set(key, entry)
    }
    if (entry.holder === null && entry.waiters.length === 0) {
      entry.holder = who
      return Promise.resolve(this.#turn(key, entry, who))
    }
    return new Promise((resolve) => {
      // promised: a release is handing it the lock; left: its caller went
      // away meanwhile (it takes the handoff to give it back).
      const waiter = { who, past: false, resolve, timer: undefined, promised: false, left: false }
      entry.waiters.push(waiter)
      const leave = (turn) => {
        clearTimeout(waiter.timer)
        const at = entry.waiters.indexOf(waiter)
        if (at >= 0) entry.waiters.splice(at, 1)
        this.#dropIfIdle(key, entry)
        resolve(turn)
      }
      waiter.giveUp = () => leave(null)
      who.abandon(() => {
        if (waiter.promised) waiter.left = true
        else leave(null)
      })
      const expire = () => {
        waiter.past = true
        if (!entry.holder?.cancelled && !waiter.promised) waiter.giveUp()
      }
      if (deadline !== undefined) {
        const delay = deadline - clock()
        if (delay <= 0) expire()
        else waiter.timer = setTimeout(expire, Math.ceil(delay))
      }
    })
  }

  #turn(key, entry, who, handoff) {
    let done = false
    return {
      /** The release's outcome for us when a release handed us the lock. */
      handoff,
      release: () => {
        if (done) return
        done = true
        if (entry.holder === who) entry.holder = null
        this.#handOn(key, entry)
      },
      /**
       * The first waiter whose caller still waits, promised the lock by the
       * release about to be sent (null: nobody waits): `spec` is whom to
       * releaseTo; then `deliver(handoff)` gives it our turn with the
       * release's outcome, or `withdraw()` if no release was sent.
       */
      promiseNext: () => {
        if (done) return null
        const next = entry.waiters.find((w) => !w.promised && !w.past && !w.who.cancelled)
        if (next === undefined) return null
        next.promised = true
        return {
          spec: next.who.spec,
          deliver: (outcome) => {
            done = true
            clearTimeout(next.timer)
            const at = entry.waiters.indexOf(next)
            if (at >= 0) entry.waiters.splice(at, 1)
            entry.holder = next.who
            next.resolve(this.#turn(key, entry, next.who, outcome))
          },
          withdraw: () => {
            next.promised = false
            // It waited only for this: its caller left, or its deadline passed.
            if (next.left || (next.past && !entry.holder?.cancelled)) next.giveUp()
          },
        }
      },
    }
  }

  #handOn(key, entry) {
    const next = entry.waiters.shift()
    if (next !== undefined) {
      clearTimeout(next.timer)
      entry.holder = next.who
      next.resolve(this.#turn(key, entry, next.who))
    }
    // Those past their deadline waited only for a cancelled holder.
    for (const waiter of [...entry.waiters]) {
      if (waiter.past && !waiter.promised && !entry.holder?.cancelled) waiter.giveUp()
    }
    this.#dropIfIdle(key, entry)
  }

  #dropIfIdle(key, entry) {
    if (entry.holder === null && entry.waiters.length === 0 && this.#entries.get(key) === entry) {
      this.#entries.delete(key)
    }
  }

  /** Names with a holder or waiters (for tests: idle names are forgotten). */
  get size() {
    return this.#entries.size
  }
}

module.exports = { NameQueues }
