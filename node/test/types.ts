// Type-checked (tsc --noEmit) usage of the public API: the README's API plus the
// error classes. Not executed; test/readme.test.js runs the README's snippets.
import { Client, ClientClosedError, Lease, LockError, LockGroup, LockLostError, NotAcquiredError, RedisError, RwLock, RwSide, Semaphore, metrics, StaleFenceError, type LockInfo, type LockOptions } from 'fencelock'
import { fencedUpdate } from 'fencelock/sql'

export async function example(signal: AbortSignal): Promise<void> {
  const client: Client = await Client.connect('redis://127.0.0.1:6379') // array => Redlock
  const redlock: Client = await Client.connect(['redis://a:6379', 'redis://b:6379', 'redis://c:6379'], {
    prefix: 'app:',
    connectTimeout: 1_000,
    responseTimeout: 1_000,
  })
  const lease: Lease = await client.acquire('invoice:42', { ttl: 10_000, wait: 5_000, signal })
  const maybe: Lease | null = await client.tryAcquire('invoice:42', { ttl: 10_000 })
  const name: string | Buffer = lease.name
  const token: string = lease.token
  const fence: bigint = lease.fence
  const validFor: number = lease.validFor
  const lost: boolean = lease.lost
  await lease.extend()
  await lease.extend(30_000)
  const stopped: void = lease.stopRenewing()
  void stopped
  await lease.fencedSet('invoice:42:total', '120')
  await lease.fencedHSet(Buffer.from('invoice:42:total'), 'paid_by', Buffer.from('me'))
  const pg = { query: async (_: { text: string; values: unknown[]; rowMode?: 'array' }) => ({ rowCount: 1, rows: [] }) }
  const rows: number = await fencedUpdate(pg, ['billing', 'invoices'], { total: 120 }, { where: { id: 42 }, fence: lease })
  await fencedUpdate(pg, 'invoices', {}, { where: { id: 42 }, fence: 7n, fenceColumn: 'fence' })
  void rows
  await lease.release()
  await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true, maxHold: 60_000 }, (l) => l.stopRenewing())
  const result: number = await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true }, async (l) => {
    const s: AbortSignal = l.signal
    return s.aborted ? 0 : 1
  })
  const sync: string = await client.withLock(Buffer.from('raw'), { ttl: 10_000 }, () => 'x')
  const group: LockGroup = await client.acquireMany(['a', Buffer.from('b')], { ttl: 10_000, wait: 1_000 })
  const firstFence: bigint = group.leases[0].fence
  const tried: LockGroup | null = await client.tryAcquireMany(['a', 'b'] as const, { ttl: 10_000 })
  const fences: bigint[] = await client.withLocks(['a', 'b'], { ttl: 10_000 }, (g) => g.leases.map((l) => l.fence))
  await group.release()
  {
    await using held = await client.acquire('invoice:42', { ttl: 10_000 })
    held.fence satisfies bigint
  }
  const options: LockOptions = { ttl: 1_000 }
  try {
    await client.acquire('x', options)
  } catch (err) {
    if (err instanceof NotAcquiredError) {
      const code: 'NOT_ACQUIRED' = err.code
      void code
    } else if (err instanceof ClientClosedError) {
      const code: 'CLIENT_CLOSED' = err.code
      const redis: RedisError = err
      void [code, redis]
    } else if (err instanceof StaleFenceError) {
      const refused: [string | Buffer, bigint, bigint] = [err.resource, err.fence, err.accepted]
      const lostToo: LockLostError = err
      void [refused, lostToo]
    } else if (err instanceof LockLostError || err instanceof RedisError) {
      const base: LockError = err
      void base
    }
  }
  const pool: Semaphore = client.semaphore('pool', { permits: 3 })
  const permits: number = pool.permits
  const permit: Lease = await pool.acquire({ ttl: 10_000, wait: 5_000, signal })
  const spare: Lease | null = await pool.tryAcquire({ ttl: 10_000 })
  const info: LockInfo = await pool.inspect()
  await pool.withLock({ ttl: 10_000, autoRenew: true }, (p) => p.fence)
  const rw: RwLock = client.rwLock('doc')
  const writer: RwSide = rw.writer
  const read: Lease = await rw.reader.acquire({ ttl: 10_000 })
  const written: bigint = await writer.withLock({ ttl: 10_000 }, (w) => w.fence)
  void [maybe, name, token, fence, validFor, lost, result, sync, permits, permit, spare, info, read, written]
  await redlock.close()
  await client.close()
}

// Misuse the types reject:
export async function misuse(client: Client): Promise<void> {
  // @ts-expect-error ttl is required
  await client.acquire('x', {})
  // @ts-expect-error ttl is a number of ms
  await client.acquire('x', { ttl: '10s' })
  // @ts-expect-error names are strings or Buffers
  await client.acquire(42, { ttl: 1_000 })
  // @ts-expect-error fence is a bigint
  const n: number = (await client.acquire('x', { ttl: 1 })).fence
  // @ts-expect-error no public constructor
  new Client()
  // @ts-expect-error a fence is a lease or a bigint
  await fencedUpdate({ query: async () => ({ rowCount: 0, rows: [] }) }, 't', {}, { where: { id: 1 }, fence: 7 })
  void n
}

// Operator tools: listing, watching, metrics.
export async function operations(client: Client, registry: { registerMetric(metric: unknown): void }): Promise<void> {
  for await (const { name, info } of client.list('invoice:*')) {
    const shown: string | Buffer = name
    const fence: bigint | null = info.fence
    void [shown, fence]
  }
  for await (const info of client.watch('invoice:42', { interval: 250 })) {
    const held: boolean = info.held
    void held
    break
  }
  metrics.install(registry)
  const families = metrics.snapshot()
  void families
  // @ts-expect-error the interval is a number of ms
  client.watch('x', { interval: '1s' })
}
