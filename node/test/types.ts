// Type-checked (tsc --noEmit) usage of the public API: the README's API plus the
// error classes. Not executed; test/readme.test.js runs the README's snippets.
import { Client, ClientClosedError, Lease, LockError, LockLostError, NotAcquiredError, RedisError, metrics, type LockOptions } from 'fencelock'

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
  await lease.release()
  await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true, maxHold: 60_000 }, (l) => l.stopRenewing())
  const result: number = await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true }, async (l) => {
    const s: AbortSignal = l.signal
    return s.aborted ? 0 : 1
  })
  const sync: string = await client.withLock(Buffer.from('raw'), { ttl: 10_000 }, () => 'x')
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
    } else if (err instanceof LockLostError || err instanceof RedisError) {
      const base: LockError = err
      void base
    }
  }
  void [maybe, name, token, fence, validFor, lost, result, sync]
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
