// Type definitions for fencelock/wasm: the API of `fencelock`, over the
// application's own Redis client(s). Leases and errors are the same classes.

/// <reference types="node" />

import type { Lease, LockInfo, LockName, LockOptions, RwLock, Semaphore, SemaphoreOptions } from '../index.js'
export { Lease, LockSide, Semaphore, RwLock, RwSide, LockError, NotAcquiredError, LockLostError, StaleFenceError, RedisError, ClientClosedError } from '../index.js'
export type { LockInfo, LockName, LockOptions, SemaphoreOptions } from '../index.js'

/** Options of {@link Client.fromRedis}. */
export interface FromRedisOptions {
  /** Key prefix (default `"fencelock:"`); must not contain braces. */
  prefix?: string
  /** Milliseconds to wait for each Redis reply before the outcome counts as unknown (default 2000). */
  responseTimeout?: number
  /**
   * Replicas that must acknowledge (WAIT, for up to responseTimeout / 2) every
   * acquire, extend and renewal (default 0). Too few: the lock is released and
   * the call fails. Needs an adapter with `scriptThenWait` (both built-ins have it).
   */
  replicas?: number
  /** Milliseconds a lock's fence key outlives the lock (default 60000; 0 allowed). */
  fenceGrace?: number
}

/** The interface `fencelock/wasm` needs from a Redis client; ioredis and node-redis have built-in adapters. */
export interface RedisAdapter {
  /** `EVALSHA sha numkeys ...keys ...args`; rejects with a server error starting with `NOSCRIPT` when uncached. */
  evalsha(sha: string, keys: Buffer[], args: Buffer[]): Promise<unknown>
  /** `EVAL source numkeys ...keys ...args` (after NOSCRIPT). */
  eval(source: string, keys: Buffer[], args: Buffer[]): Promise<unknown>
  /**
   * Only for the `replicas` option: the script (`verb` EVALSHA or EVAL), then
   * `WAIT replicas timeoutMs` right behind it on the same connection.
   */
  scriptThenWait?(
    verb: 'EVALSHA' | 'EVAL',
    shaOrSource: string,
    keys: Buffer[],
    args: Buffer[],
    replicas: number,
    timeoutMs: number,
  ): Promise<[{ reply: unknown } | { error: unknown }, { reply: unknown } | { error: unknown }]>
  /** True if the server answered with an error (not a connection failure or timeout). */
  isServerError(err: unknown): boolean
  /** SUBSCRIBE on a separate connection; resolves once the server confirmed. */
  subscribe(channel: Buffer, onMessage: (message?: Buffer | string) => void): Promise<void>
  unsubscribe(channel: Buffer): Promise<void>
  /** Close what the adapter opened (its subscriber connection), never the app's client. */
  close(): Promise<void>
}

/** An ioredis `Redis`/`Cluster`, a connected node-redis client (v4+), or a {@link RedisAdapter}. */
export type RedisLike = object

/** A lock client driving the app's Redis client(s) through the WebAssembly core. */
export declare class Client implements AsyncDisposable {
  private constructor()
  /**
   * One client: a single Redis; an array of independent nodes' clients: Redlock.
   * Not a Redis client: TypeError; a bad option: TypeError/RangeError.
   */
  static fromRedis(redis: RedisLike | readonly RedisLike[], options?: FromRedisOptions): Client
  acquire(name: LockName, options: LockOptions): Promise<Lease>
  tryAcquire(name: LockName, options: LockOptions): Promise<Lease | null>
  withLock<T>(name: LockName, options: LockOptions, fn: (lease: Lease) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** What Redis says about `name` now (read-only; with Redlock, the majority's view). */
  inspect(name: LockName): Promise<LockInfo>
  /**
   * An operator's force-release: delete the lock whoever holds it, wake its
   * waiters and advance its fence past every fence issued, so fenced
   * resources refuse the old holder (its lease is lost at its next renewal
   * or extend). Resolves to the new fence. Emits a process warning (code
   * `FENCELOCK_FORCE_RELEASE`) naming the lock, fence, pid and host.
   */
  forceRelease(name: LockName): Promise<bigint>
  /** A counting semaphore (see the `fencelock` entry's `Client.semaphore`). */
  semaphore(name: LockName, options: SemaphoreOptions): Semaphore
  /** A read-write lock (see the `fencelock` entry's `Client.rwLock`). */
  rwLock(name: LockName): RwLock
  /**
   * Stop: pending and later acquires reject with ClientClosedError, held
   * leases stop renewing and expire by their TTL (their extend and release
   * still run, through the app's client); the app's Redis clients stay open.
   */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** The built-in adapters, for wrapping explicitly. */
export declare const adapters: {
  ioredis(client: object): RedisAdapter
  nodeRedis(client: object): RedisAdapter
}
