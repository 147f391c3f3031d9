"""The Python side of `make bench`: one scenario, several implementations in
the given order, one JSON line each on stdout.

    python bench_py.py SCENARIO --impls a,b,c --url URL [--urls U1,U2,...]
                       [--secs 1.0] [--workers 64] [--leases 10000]

Scenarios: s1 (sequential acquire+release, 10 s TTL), s2 (N workers, each
on its own key), s3 (N workers on ONE key, ~0 ms hold; latency = wait from
asking to getting), s4 (s1 over the Redlock URLs), mem (hold N locks, print
the RSS growth, wait for a line on stdin, release, next).

Implementations (sync: threads; *-async: asyncio tasks):
  fencelock, fencelock-async          this project
  redis-py, redis-py-async            redis.lock.Lock (default sleep 0.1 s)
  redis-py:tuned, redis-py-async:tuned        ... with sleep=0.001
  pottery, pottery:tuned              pottery.Redlock (retry delay U(0,0.2) s
                                      by default; tuned U(0,0.002) s)
  floor, floor-async                  hand-written SET NX PX + EVALSHA
                                      compare-and-delete on redis-py+hiredis
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
import uuid

import redis
import redis.asyncio

RELEASE_LUA = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) end return 0"
)
TTL_S = 10.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------- sync impls


class Fencelock:
    def __init__(self, urls: list[str]) -> None:
        import fencelock

        self.client = fencelock.Client(urls[0] if len(urls) == 1 else urls)

    def acquire(self, name: str):
        return self.client.acquire(name, ttl=TTL_S)

    def release(self, lease) -> None:
        lease.release()

    def close(self) -> None:
        self.client.close()


class RedisPy:
    def __init__(self, urls: list[str], sleep: float = 0.1) -> None:
        self.r = redis.Redis.from_url(urls[0])
        self.sleep = sleep

    def acquire(self, name: str):
        lock = self.r.lock(name, timeout=TTL_S, sleep=self.sleep)
        lock.acquire()
        return lock

    def release(self, lock) -> None:
        lock.release()

    def close(self) -> None:
        self.r.close()


class Pottery:
    def __init__(self, urls: list[str], delay: float | None = None) -> None:
        from pottery import Redlock

        self.masters = {redis.Redis.from_url(u) for u in urls}
        cls = Redlock
        if delay is not None:
            cls = type("TunedRedlock", (Redlock,), {"_RETRY_DELAY": delay})
        self.cls = cls

    def acquire(self, name: str):
        lock = self.cls(key=name, masters=self.masters, auto_release_time=TTL_S)
        lock.acquire()
        return lock

    def release(self, lock) -> None:
        lock.release()

    def close(self) -> None:
        for m in self.masters:
            m.close()


class Floor:
    def __init__(self, urls: list[str]) -> None:
        self.r = redis.Redis.from_url(urls[0])
        self.sha = self.r.script_load(RELEASE_LUA)

    def acquire(self, name: str):
        token = str(uuid.uuid4())
        while not self.r.set(name, token, nx=True, px=int(TTL_S * 1000)):
            time.sleep(0.001)
        return (name, token)

    def release(self, held) -> None:
        self.r.evalsha(self.sha, 1, held[0], held[1])

    def close(self) -> None:
        self.r.close()


# -------------------------------------------------------------- async impls


class FencelockAsync:
    def __init__(self, urls: list[str]) -> None:
        import fencelock

        self.client = fencelock.AsyncClient(urls[0] if len(urls) == 1 else urls)

    async def acquire(self, name: str):
        return await self.client.acquire(name, ttl=TTL_S)

    async def release(self, lease) -> None:
        await lease.release()

    async def close(self) -> None:
        await self.client.close()


class RedisPyAsync:
    def __init__(self, urls: list[str], sleep: float = 0.1) -> None:
        self.r = redis.asyncio.Redis.from_url(urls[0])
        self.sleep = sleep

    async def acquire(self, name: str):
        lock = self.r.lock(name, timeout=TTL_S, sleep=self.sleep)
        await lock.acquire()
        return lock

    async def release(self, lock) -> None:
        await lock.release()

    async def close(self) -> None:
        await self.r.aclose()


class FloorAsync:
    def __init__(self, urls: list[str]) -> None:
        self.r = redis.asyncio.Redis.from_url(urls[0])
        self.sha = None

    async def acquire(self, name: str):
        if self.sha is None:
            self.sha = await self.r.script_load(RELEASE_LUA)
        token = str(uuid.uuid4())
        while not await self.r.set(name, token, nx=True, px=int(TTL_S * 1000)):
            await asyncio.sleep(0.001)
        return (name, token)

    async def release(self, held) -> None:
        await self.r.evalsha(self.sha, 1, held[0], held[1])

    async def close(self) -> None:
        await self.r.aclose()


SYNC = {
    "fencelock": Fencelock,
    "redis-py": RedisPy,
    "redis-py:tuned": lambda urls: RedisPy(urls, sleep=0.001),
    "pottery": Pottery,
    "pottery:tuned": lambda urls: Pottery(urls, delay=0.002),
    "floor": Floor,
}
ASYNC = {
    "fencelock-async": FencelockAsync,
    "redis-py-async": RedisPyAsync,
    "redis-py-async:tuned": lambda urls: RedisPyAsync(urls, sleep=0.001),
    "floor-async": FloorAsync,
}

# ------------------------------------------------------------------ phases


def sync_phase(imp, names: list[str], until: float, wait_only: bool):
    results: list[tuple[list[float], int]] = [([], 0)] * len(names)

    def worker(i: int, name: str) -> None:
        lat: list[float] = []
        errors = 0
        clock = time.perf_counter
        while clock() < until:
            t0 = clock()
            try:
                held = imp.acquire(name)
                got = clock()
                imp.release(held)
                lat.append(((got if wait_only else clock()) - t0) * 1e6)
            except Exception:  # noqa: BLE001 - counted, reported
                errors += 1
        results[i] = (lat, errors)

    if len(names) == 1:
        worker(0, names[0])
    else:
        threads = [
            threading.Thread(target=worker, args=(i, n)) for i, n in enumerate(names)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results


async def async_phase(imp, names: list[str], until: float, wait_only: bool):
    async def worker(name: str):
        lat: list[float] = []
        errors = 0
        clock = time.perf_counter
        while clock() < until:
            t0 = clock()
            try:
                held = await imp.acquire(name)
                got = clock()
                await imp.release(held)
                lat.append(((got if wait_only else clock()) - t0) * 1e6)
            except Exception:  # noqa: BLE001 - counted, reported
                errors += 1
        return lat, errors

    return await asyncio.gather(*(worker(n) for n in names))


def summarize(args, kind: str, results, elapsed: float, cpu: float, workers: int):
    lat = sorted(x for r in results for x in r[0])
    per = [len(r[0]) for r in results]

    def pct(p: float) -> float:
        return lat[round((len(lat) - 1) * p)] if lat else float("nan")

    return {
        "lang": "python",
        "scenario": args.scenario,
        "impl": kind,
        "cycles": len(lat),
        "secs": round(elapsed, 4),
        "rate": round(len(lat) / elapsed, 1),
        "p50_us": round(pct(0.5), 1),
        "p99_us": round(pct(0.99), 1),
        "p999_us": round(pct(0.999), 1),
        "cpu_us_per_cycle": round(cpu * 1e6 / len(lat), 2) if lat else None,
        "errors": sum(r[1] for r in results),
        "min_per_worker": min(per),
        "max_per_worker": max(per),
        "workers": workers,
    }


def shape(args):
    if args.scenario == "s1":
        return [args.url], 1, False, False
    if args.scenario == "s2":
        return [args.url], args.workers, False, False
    if args.scenario == "s3":
        return [args.url], args.workers, True, True
    if args.scenario == "s4":
        return args.urls, 1, False, False
    raise SystemExit(f"unknown scenario {args.scenario}")


def names_for(args, kind: str, workers: int, shared: bool) -> list[str]:
    run = uuid.uuid4().hex
    base = f"bench:{args.scenario}:py-{kind}:{run}"
    return [base if shared else f"{base}:{i}" for i in range(workers)]


def run_sync(args, kind: str) -> dict:
    urls, workers, shared, wait_only = shape(args)
    imp = SYNC[kind](urls)
    names = names_for(args, kind, workers, shared)
    warm = min(args.secs / 4, 0.3)
    sync_phase(imp, names, time.perf_counter() + warm, wait_only)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    results = sync_phase(imp, names, t0 + args.secs, wait_only)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    imp.close()
    return summarize(args, kind, results, elapsed, cpu, workers)


async def run_async(args, kind: str) -> dict:
    urls, workers, shared, wait_only = shape(args)
    imp = ASYNC[kind](urls)
    names = names_for(args, kind, workers, shared)
    warm = min(args.secs / 4, 0.3)
    await async_phase(imp, names, time.perf_counter() + warm, wait_only)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    results = await async_phase(imp, names, t0 + args.secs, wait_only)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    await imp.close()
    return summarize(args, kind, results, elapsed, cpu, workers)


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run_mem(args, kind: str) -> None:
    """Hold args.leases locks; report RSS growth; wait for the orchestrator."""
    if kind in ASYNC:
        async def go():
            imp = ASYNC[kind]([args.url])
            for i in range(100):
                await imp.release(await imp.acquire(f"bench:mem:warm:{i}"))
            rss0 = rss_bytes()
            held = []
            for start in range(0, args.leases, 256):
                batch = range(start, min(start + 256, args.leases))
                held += await asyncio.gather(
                    *(imp.acquire(f"bench:mem:py-{kind}:{i}") for i in batch)
                )
            report(kind, len(held), rss_bytes() - rss0)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            for h in held:
                try:
                    await imp.release(h)
                except Exception:  # noqa: BLE001 - cleanup only
                    pass
            await imp.close()

        asyncio.run(go())
        return
    imp = SYNC[kind]([args.url])
    for i in range(100):
        imp.release(imp.acquire(f"bench:mem:warm:{i}"))
    rss0 = rss_bytes()
    held = [imp.acquire(f"bench:mem:py-{kind}:{i}") for i in range(args.leases)]
    report(kind, len(held), rss_bytes() - rss0)
    sys.stdin.readline()
    for h in held:
        try:
            imp.release(h)
        except Exception:  # noqa: BLE001 - cleanup only
            pass
    imp.close()


def report(kind: str, n: int, grew: int) -> None:
    emit(
        {
            "lang": "python",
            "scenario": "mem",
            "impl": kind,
            "leases": n,
            "rss_bytes_per_lease": round(grew / n, 1),
            "holding": True,
        }
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--impls", required=True)
    p.add_argument("--url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--urls", default="")
    p.add_argument("--secs", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--leases", type=int, default=10000)
    args = p.parse_args()
    args.urls = [u for u in args.urls.split(",") if u]
    if args.scenario == "mem":
        # Holding 10,000 locks takes the slowest peer longer than 10 s.
        global TTL_S
        TTL_S = 300.0
    for kind in args.impls.split(","):
        if args.scenario == "mem":
            run_mem(args, kind)
        elif kind in SYNC:
            emit(run_sync(args, kind))
        elif kind in ASYNC:
            emit(asyncio.run(run_async(args, kind)))
        else:
            raise SystemExit(f"unknown implementation {kind}")


if __name__ == "__main__":
    main()
