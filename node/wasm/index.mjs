// ESM entry of fencelock/wasm: the CommonJS module's classes (one instance
// of each, so `instanceof` works across `import` and `require`).
import cjs from './index.js'

export const { Client, Lease, LockSide, Semaphore, RwLock, RwSide, LockError, NotAcquiredError, LockLostError, StaleFenceError, RedisError, ClientClosedError, adapters } = cjs
