// Type-checked (tsc --noEmit) usage of fencelock/wasm: the same Lease and
// error classes as the main entry, a Client built from the app's clients.
import Redis from 'ioredis'
import { createClient } from 'redis'
import { Client, ClientClosedError, Lease, LockLostError, type RedisAdapter, adapters } from 'fencelock/wasm'
import * as native from 'fencelock'

export async function example(signal: AbortSignal): Promise<void> {
  const client: Client = Client.fromRedis(new Redis('redis://127.0.0.1:6379'), { prefix: 'app:', responseTimeout: 1_000, replicas: 1 })
  const redlock: Client = Client.fromRedis([new Redis(6380), new Redis(6381), new Redis(6382)])
  const nodeRedis: Client = Client.fromRedis(await createClient({ url: 'redis://127.0.0.1:6379' }).connect())
  const lease: Lease = await client.acquire('invoice:42', { ttl: 10_000, wait: 5_000, signal })
  const same: native.Lease = lease
  const fence: bigint = same.fence
  const maybe: Lease | null = await redlock.tryAcquire('invoice:42', { ttl: 10_000 })
  await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true }, async (l) => l.signal.aborted)
  await client.withLock('invoice:42', { ttl: 10_000, autoRenew: true, maxHold: 60_000 }, (l) => l.stopRenewing())
  {
    await using held = await nodeRedis.acquire('invoice:42', { ttl: 10_000 })
    held.validFor satisfies number
  }
  const custom: RedisAdapter = adapters.ioredis(new Redis())
  Client.fromRedis(custom)
  const lost: boolean = new LockLostError('x') instanceof native.LockLostError
  const closedIsRedis: boolean = new ClientClosedError('x') instanceof native.RedisError
  void [fence, maybe, lost, closedIsRedis]
  await client.close()
}
