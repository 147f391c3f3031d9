"""Waiters of one client for one name are served in the order acquire was
called (the place in the local line is taken inside the call)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import List, Tuple

import fencelock


def test_a_thousand_async_waiters_are_served_in_call_order(redis_url: str, name: str) -> None:
    async def main() -> List[Tuple[int, int]]:
        client = fencelock.AsyncClient(redis_url)
        holder = await client.acquire(name, ttl=30)
        served: List[Tuple[int, int]] = []

        async def waiter(i: int) -> None:
            lease = await client.acquire(name, ttl=30)
            served.append((i, lease.fence))
            await lease.release()

        # Tasks start in creation order, each calling acquire at its start.
        tasks = [asyncio.create_task(waiter(i)) for i in range(1000)]
        await asyncio.sleep(0)
        await holder.release()
        await asyncio.gather(*tasks)
        await client.close()
        return served

    served = asyncio.run(main())
    assert len(served) == 1000
    inversions = sum(1 for a, b in zip(served, served[1:]) if b[0] < a[0])
    assert inversions == 0
    assert all(b[1] > a[1] for a, b in zip(served, served[1:]))


def test_a_thousand_waiting_threads_are_served_in_call_order(redis_url: str, name: str) -> None:
    # Waiter i+1 starts only once waiter i is provably in line: the client
    # logs "in line behind ..." after the place is taken, inside the call.
    in_line = threading.Semaphore(0)

    class InLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("in line behind") and name in message:
                in_line.release()

    logger = logging.getLogger("fencelock")
    handler, level = InLine(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    threads: List[threading.Thread] = []
    try:
        with fencelock.Client(redis_url) as client:
            holder = client.acquire(name, ttl=30)
            served: List[Tuple[int, int]] = []

            def waiter(i: int) -> None:
                lease = client.acquire(name, ttl=30)
                served.append((i, lease.fence))
                lease.release()

            for i in range(1000):
                thread = threading.Thread(target=waiter, args=(i,), daemon=True)
                thread.start()
                threads.append(thread)
                assert in_line.acquire(timeout=30), f"waiter {i} never lined up"
            holder.release()
            for thread in threads:
                thread.join(timeout=60)
                assert not thread.is_alive()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert len(served) == 1000
    inversions = sum(1 for a, b in zip(served, served[1:]) if b[0] < a[0])
    assert inversions == 0
    assert all(b[1] > a[1] for a, b in zip(served, served[1:]))
