// ESM entry: the same classes as the CommonJS entry (one instance of each, so
// `instanceof` works across `import` and `require`).
import cjs from './index.js'

export const { Client, Lease, LockError, NotAcquiredError, LockLostError, RedisError, ClientClosedError, metrics } = cjs
