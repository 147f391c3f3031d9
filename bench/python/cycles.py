"""N sequential acquire + release cycles of fencelock's AsyncClient and
nothing else, for callgrind (bench/README.md, "Profiling the Node and
asyncio front ends"): the difference between two counts of N is the cost of
a cycle, start-up cancelled out.

    python cycles.py N URL
"""

import asyncio
import os
import sys

import fencelock


async def main(n: int, url: str) -> None:
    client = fencelock.AsyncClient(url)
    name = f"bench:cycles:py:{os.getpid()}"
    for _ in range(n):
        lease = await client.acquire(name, ttl=10.0)
        await lease.release()
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "redis://127.0.0.1:6379/0"))
