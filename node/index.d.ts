// Type definitions for fencelock (Node.js): the public API of the README.

/// <reference types="node" />

/** A lock name: 1..=1024 bytes (a string is measured in UTF-8). */
export type LockName = string | Buffer

/** Options of {@link Client.connect}. */
export interface ConnectOptions {
  /** Key prefix (default `"fencelock:"`); must not contain braces. */
  prefix?: string
  /** Milliseconds to wait for a connection (default 2000). */
  connectTimeout?: number
  /** Milliseconds to wait for each Redis reply (default 2000). */
  responseTimeout?: number
  /**
   * `'cluster'`: the URLs are Redis Cluster seeds. `'sentinel'`: they are
   * Sentinels and `service` names the monitored primary. Default: one URL is
   * a single Redis, several are independent Redlock nodes.
   */
  topology?: 'cluster' | 'sentinel'
  /** With `topology: 'sentinel'`: the primary's service name. */
  service?: string
  /**
   * Replicas that must acknowledge (WAIT) every acquire, extend and renewal
   * (default 0). Too few: the lock is released and the call fails
   * (NotAcquiredError with reason 'replicas'; LockLostError for an extend).
   */
  replicas?: number
  /**
   * Milliseconds a lock's fence key outlives the lock (default 60000; 0 is
   * allowed): a name leaves nothing in Redis once ttl + fenceGrace passed
   * after its last acquire or extend.
   */
  fenceGrace?: number
  /** TLS for `rediss://` URLs (default: verify against the system trust store). */
  tls?: TlsOptions
}

/**
 * TLS settings. PEM values are the PEM text (a string or Buffer) or, for a
 * string without `-----BEGIN`, the path of a PEM file.
 */
export interface TlsOptions {
  /** Trust only this CA bundle instead of the system store (a private CA). */
  ca?: string | Buffer
  /** Client certificate chain for mutual TLS (needs `key`). */
  cert?: string | Buffer
  /** The client certificate's private key. */
  key?: string | Buffer
  /**
   * Check the server certificate against this name (DNS name or IP) instead
   * of the URL's host, on every connection (not with `topology: 'cluster'`).
   */
  serverName?: string
  /**
   * DANGER: accept any server certificate for any name (logs a warning).
   * Throwaway test servers only; also what a `#insecure` URL needs.
   */
  dangerouslySkipVerification?: boolean
}

/** Options of {@link Client.acquire}, {@link Client.tryAcquire} and {@link Client.withLock}. */
export interface LockOptions {
  /**
   * How long the lock lives without renewal, in milliseconds: 1 ..= 2^40,
   * fractions round up. Out of range (0, negative, NaN, ±Infinity, too large)
   * throws a RangeError; a non-number a TypeError.
   */
  ttl: number
  /**
   * How long acquire may wait, in milliseconds: `undefined` waits until
   * acquired, `0` tries once, `> 0` is a bound (then NotAcquiredError).
   * Ignored by tryAcquire, which always tries once.
   */
  wait?: number
  /** Cancels a pending acquire with `signal.reason` (an AbortError by default); no lock is left behind. */
  signal?: AbortSignal
  /** Extend every ttl/3 in the background until released or lost (default false). */
  autoRenew?: boolean
  /**
   * With autoRenew: stop renewing once the lease has been held this many
   * milliseconds in total (1 ..= 2^40, fractions round up); it then runs out
   * at its validity end and `lease.signal` aborts, as for a failed renewal
   * (about maxHold + ttl after the acquire). Accepted and ignored without
   * autoRenew. Out of range: RangeError; a non-number: TypeError.
   */
  maxHold?: number
  /**
   * Fair across processes (the mutex): waiters of every client, process and
   * language are served in arrival order through a line in Redis whose
   * places expire 3 s after a waiter's last attempt. The same lock as
   * without it; a plain acquire may take a free lock ahead of the line. A
   * fair tryAcquire never jumps it. Semaphores and writers are always fair.
   * A non-boolean: TypeError.
   */
  fair?: boolean
}

/** A connection to one Redis, or to N independent Redis nodes (Redlock). */
export declare class Client implements AsyncDisposable {
  private constructor()
  /**
   * Connect to one Redis URL (`redis://[user:password@]host:port/db`,
   * `rediss://` for TLS), or to several independent nodes (Redlock).
   * A malformed URL is a RangeError; an unreachable server a RedisError.
   */
  static connect(url: string | readonly string[], options?: ConnectOptions): Promise<Client>
  /** Acquire `name`, waiting as `options.wait` allows; NotAcquiredError when the wait runs out. */
  acquire(name: LockName, options: LockOptions): Promise<Lease>
  /** One attempt: the lease, or `null` if someone else holds the lock. */
  tryAcquire(name: LockName, options: LockOptions): Promise<Lease | null>
  /**
   * Acquire, run `fn(lease)`, release on every exit path. Resolves with
   * fn's result; rejects with LockLostError if the lease was lost while fn
   * ran (unless fn threw: then fn's error).
   */
  withLock<T>(name: LockName, options: LockOptions, fn: (lease: Lease) => T | PromiseLike<T>): Promise<Awaited<T>>
  /**
   * Acquire every one of `names` (at most 64, none twice), all or nothing,
   * waiting as `options.wait` allows: one round trip on a single Redis, one
   * per hash slot on a cluster (taken in one fixed order, so overlapping
   * groups cannot deadlock). NotAcquiredError when the wait runs out
   * (nothing of the group is held then). Not with Redlock or `replicas`
   * (RangeError), nor in fencelock/wasm (TypeError, code
   * ERR_FENCELOCK_UNSUPPORTED). `fair` is refused.
   */
  acquireMany(names: readonly LockName[], options: LockOptions): Promise<LockGroup>
  /** One attempt of acquireMany: the group, or `null` if any name is held. */
  tryAcquireMany(names: readonly LockName[], options: LockOptions): Promise<LockGroup | null>
  /** acquireMany, run `fn(group)`, release every lease on every exit path (as {@link Client.withLock}). */
  withLocks<T>(names: readonly LockName[], options: LockOptions, fn: (group: LockGroup) => T | PromiseLike<T>): Promise<Awaited<T>>
  /**
   * What Redis says about `name` now: one read-only round trip per node
   * (with Redlock, the majority's view). A bad name rejects as acquire does.
   */
  inspect(name: LockName): Promise<LockInfo>
  /**
   * An operator's force-release: delete the lock whoever holds it, wake its
   * waiters and advance its fence past every fence issued, so fenced
   * resources refuse the old holder (its lease is lost at its next renewal
   * or extend). Resolves to the new fence. Emits a process warning (code
   * `FENCELOCK_FORCE_RELEASE`) naming the lock, fence, pid and host.
   */
  forceRelease(name: LockName): Promise<bigint>
  /**
   * A counting semaphore of `options.permits` permits (a whole number from 1
   * to 1,000,000: RangeError outside, TypeError for a non-number; every
   * client of one semaphore should pass the same). Its keys live beside a
   * mutex of the same name, never shared with it.
   */
  semaphore(name: LockName, options: SemaphoreOptions): Semaphore
  /** A read-write lock: `rw.reader` (shared) and `rw.writer` (exclusive, writers preferred). */
  rwLock(name: LockName): RwLock
  /**
   * The locks held now whose names match `pattern` (Redis's glob syntax over
   * lock names: `*`, `?`, `[a-z]`, `\` escapes; default `'*'`), in name
   * order, each with what `inspect` says about it. SCAN on every node (every
   * primary of a cluster), never KEYS; read-only. A bad pattern (empty, over
   * 1024 bytes, an unclosed `[`, a trailing `\`) throws a RangeError here;
   * a non-string a TypeError.
   */
  list(pattern?: LockName): AsyncIterableIterator<ListedLock>
  /**
   * `name`'s LockInfo now, then one each time its holder or fence changes
   * (acquired, released, expired, force-released; not renewals). Releases
   * are heard at once; Redis is asked again every `options.interval` ms
   * (default 250) and when the holder's TTL runs out. Endless.
   */
  watch(name: LockName, options?: WatchOptions): AsyncIterableIterator<LockInfo>
  /**
   * Close the connections. Leases still held expire by their TTL; pending
   * and later acquires, and extend/release of its leases, reject with
   * ClientClosedError (a RedisError).
   */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** Options of {@link Client.semaphore}. */
export interface SemaphoreOptions {
  /** How many leases may hold at once: a whole number from 1 to 1,000,000. */
  permits: number
}

/** Acquires leases of one kind of one name: a semaphore's permits, or one side of a read-write lock. */
export declare class LockSide {
  protected constructor()
  /** The name, as given. */
  readonly name: LockName
  /**
   * A lease, waiting as `options.wait` allows (in the server's fair line:
   * arrival order across every client); NotAcquiredError when the wait runs
   * out. An aborted signal leaves nothing held and leaves the line.
   */
  acquire(options: LockOptions): Promise<Lease>
  /** One attempt, without standing in line: the lease, or `null`. */
  tryAcquire(options: LockOptions): Promise<Lease | null>
  /** Acquire, run `fn(lease)`, release on every exit path (as {@link Client.withLock}). */
  withLock<T>(options: LockOptions, fn: (lease: Lease) => T | PromiseLike<T>): Promise<Awaited<T>>
  /** What Redis says now about this kind's holders (read-only): `held` while any holds. */
  inspect(): Promise<LockInfo>
}

/**
 * A counting semaphore: up to `permits` leases at once, granted in arrival
 * order across every process. Each permit is a {@link Lease} with its own
 * fence. With Redlock a permit needs more than nodes × permits / (permits + 1)
 * nodes (all three of three for two or more permits).
 */
export declare class Semaphore extends LockSide {
  /** The number of permits. */
  readonly permits: number
}

/** `rwLock.reader` or `rwLock.writer`. */
export declare class RwSide extends LockSide {}

/**
 * A read-write lock: any number of read leases while no writer holds or
 * waits, or one write lease; writers are served in arrival order and a
 * waiting writer holds new readers off (writers never starve). Every lease
 * has its own fence, from one counter.
 */
export declare class RwLock {
  private constructor()
  readonly name: LockName
  /** Read leases: shared. */
  readonly reader: RwSide
  /** The write lease: exclusive. */
  readonly writer: RwSide
}

/** What {@link Client.inspect} found in Redis. Never carries a token. */
export interface LockInfo {
  /** Someone holds the lock (a majority of the nodes, with Redlock). */
  readonly held: boolean
  /** The holder's remaining TTL in ms; null when free. */
  readonly ttl: number | null
  /**
   * The last fence issued while its key remains (the lock ttl plus
   * `fenceGrace` after the last grant: also after a release), else null.
   */
  readonly fence: bigint | null
  /** The holder is a live lease of this client. */
  readonly heldByMe: boolean
}

/** One lock of {@link Client.list}. */
export interface ListedLock {
  /** A string, or a Buffer if the pattern was one or the name is not UTF-8. */
  readonly name: LockName
  readonly info: LockInfo
}

/** Options of {@link Client.watch}. */
export interface WatchOptions {
  /** Ask Redis at least this often, in ms (default 250; positive and finite). */
  interval?: number
}

/**
 * Lock metrics for prom-client, counted once in the Rust driver for every
 * native client of the process (no lock names as labels).
 */
export declare const metrics: {
  /**
   * Count and expose on a prom-client Registry (e.g. `require('prom-client').register`):
   * `fencelock_acquires_total{outcome}`, `fencelock_contended_attempts_total`,
   * `fencelock_renewals_total{outcome}`, `fencelock_losses_total`,
   * `fencelock_releases_total{outcome}`, and the histograms
   * `fencelock_acquire_latency_seconds` and `fencelock_wait_seconds`.
   */
  install(registry: { registerMetric(metric: unknown): void }): void
  /** Start counting without a registry (install() does it). */
  enable(): void
  /** Every metric now, by name (without `_total`). */
  snapshot(): Record<string, Record<string, number> | { buckets: Array<[number, number]>; count: number; sum: number }>
}

/** A held lock. `util.inspect`, `toString()` and `JSON.stringify` never show the token. */
/** Several locks held together ({@link Client.acquireMany}); each an ordinary {@link Lease}. */
export declare class LockGroup implements AsyncDisposable {
  private constructor()
  /** The leases, in the order the names were given. */
  readonly leases: readonly Lease[]
  /** True once any lease of the group is known to be lost. */
  readonly lost: boolean
  /** Release every lease; LockLostError if one was lost (the others are released all the same). */
  release(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
  toJSON(): Array<{ name: string; fence: string; validFor: number; lost: boolean }>
}

export declare class Lease implements AsyncDisposable {
  private constructor()
  /** The lock name, in the type it was given (string or Buffer). */
  readonly name: LockName
  /** The token stored in Redis (UUID v4). Readable, never printed. */
  readonly token: string
  /** The fencing token: strictly increasing for every acquire of this name. */
  readonly fence: bigint
  /** The TTL of this lease in milliseconds. */
  readonly ttl: number
  /** Milliseconds left before the lease must be assumed lost. */
  readonly validFor: number
  /** True once the lease is known to be lost. */
  readonly lost: boolean
  /** Aborted, with a LockLostError as its reason, when the lease is lost. */
  readonly signal: AbortSignal
  /** Extend to `ttl` ms from now (default: the lease's ttl); LockLostError if no longer held. */
  extend(ttl?: number): Promise<void>
  /** Release; LockLostError if the lease was lost; a second call is a no-op. */
  release(): Promise<void>
  /** Ask Redis whether this lease still holds the lock (read-only): false once released, expired or taken over. */
  isHeld(): Promise<boolean>
  /**
   * Stop auto-renewal: the lease stays valid until its validity ends, then
   * it is lost (`signal` aborts) unless released or extended first (`extend`
   * still extends, once per call). Sends no command; idempotent; a no-op
   * without autoRenew.
   */
  stopRenewing(): void
  /**
   * Fenced write: the hash `key` gets `value` (field `value`) and this
   * lease's fence (field `fence`) unless it has accepted a newer fence
   * (StaleFenceError, nothing written); equal fences pass (the same holder
   * writing again). Read it back with `HGET key value`. LockLostError without
   * sending if the lease is known lost or released; RangeError for an empty
   * key or a Redlock client; RedisError if `key` is not a hash.
   */
  fencedSet(key: string | Buffer, value: string | Buffer): Promise<void>
  /** `fencedSet` of one field of the hash `key` (not `fence`, which holds the key's last accepted fence). */
  fencedHSet(key: string | Buffer, field: string | Buffer, value: string | Buffer): Promise<void>
  /** `await using lease = await client.acquire(...)` releases at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>
  toString(): string
  toJSON(): { name: string; fence: string; validFor: number; lost: boolean }
}

/** Base class of NotAcquiredError, LockLostError and RedisError (and its ClientClosedError). */
export declare class LockError extends Error {
  readonly code: 'NOT_ACQUIRED' | 'LOCK_LOST' | 'STALE_FENCE' | 'REDIS' | 'CLIENT_CLOSED'
  /** The lock's name as given to acquire; undefined for a client-wide error. (`name` is the class name.) */
  readonly lockName: LockName | undefined
}
/** The lock was not acquired within the allowed wait. */
export declare class NotAcquiredError extends LockError {
  readonly code: 'NOT_ACQUIRED'
  /** `'held'`: someone else held it; `'unreachable'`: too few Redlock nodes answered; `'replicas'`: too few replicas acknowledged. */
  readonly reason: 'held' | 'unreachable' | 'replicas'
}
/** The lease is no longer held (expired, taken over, or renewal failed). */
export declare class LockLostError extends LockError {
  readonly code: 'LOCK_LOST' | 'STALE_FENCE'
}
/**
 * A fenced write was refused: the resource already accepted a newer fence (a
 * newer holder wrote, or the lock was force-released); nothing was written.
 */
export declare class StaleFenceError extends LockLostError {
  readonly code: 'STALE_FENCE'
  /** The Redis key or SQL table that refused the write. */
  readonly resource: string | Buffer
  /** The refused fence. */
  readonly fence: bigint
  /** The newer fence the resource had accepted. */
  readonly accepted: bigint
}
/** Redis was unreachable or answered with an error (`'REDIS'`), or the client is closed (ClientClosedError). */
export declare class RedisError extends LockError {
  readonly code: 'REDIS' | 'CLIENT_CLOSED'
}
/**
 * The client was closed: before the call (`acquire`, or `extend`/`release` of
 * one of its leases), or while an acquire waited. The message names the call.
 * Still a RedisError, as before it had a class of its own.
 */
export declare class ClientClosedError extends RedisError {
  readonly code: 'CLIENT_CLOSED'
}
