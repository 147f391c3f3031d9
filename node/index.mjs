// ESM entry: the same classes as the CommonJS entry (one instance of each, so
// `instanceof` works across `import` and `require`).
import cjs from './index.js'

export const { Client, Lease, LockGroup, LockSide, Semaphore, RwLock, RwSide, LockError, NotAcquiredError, LockLostError, StaleFenceError, RedisError, ClientClosedError, metrics } = cjs
