"""The README's least-privilege ACL line (read from the README, so the two
cannot drift apart) is enough for the core cases: acquire, extend, wait,
hand-off on release, auto-renewal, release."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, List

import fencelock
from conftest import Redis, Server

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_acl() -> List[str]:
    line = next(l for l in README.read_text().splitlines() if l.startswith("ACL SETUSER app on "))
    return [">acl-pass" if part == ">password" else part for part in line.split()[1:]]


def test_the_readme_acl_is_enough_for_the_core_cases(redis_server: Callable[..., Server], name: str) -> None:
    server = redis_server()
    admin = Redis(server.url)
    admin.execute("ACL", *readme_acl())
    admin.close()
    url = f"redis://app:acl-pass@127.0.0.1:{server.port}/0"
    with fencelock.Client(url) as holder_client, fencelock.Client(url) as other:
        holder = holder_client.acquire(name, ttl=5, wait=5)
        holder.extend()
        assert other.try_acquire(name, ttl=5) is None
        got: List[float] = []

        def wait() -> None:
            lease = other.acquire(name, ttl=5, wait=5)
            got.append(time.monotonic())
            lease.release()

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.2)  # let the waiter subscribe (a later start only makes it faster)
        released = time.monotonic()
        holder.release()
        thread.join()
        assert got and got[0] - released < 0.5  # woken by the notification
        renewed = holder_client.acquire(name, ttl=0.3, auto_renew=True)
        time.sleep(0.7)  # two renewals
        assert not renewed.lost
        renewed.release()
