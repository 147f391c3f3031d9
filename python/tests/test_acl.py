"""The README's least-privilege ACL line (read from the README, so the two
cannot drift apart) is enough for the core cases: acquire, extend, wait,
hand-off on release, auto-renewal, release. A user without channel rights
still releases (the refused PUBLISH is logged once, waiters use their timer)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable, List

import fencelock
from conftest import Redis, Server, lock_keys, wait_until

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
        # Past its 1 s TTL only through renewals (each may run ~0.65 s late under load).
        renewed = holder_client.acquire(name, ttl=1.0, auto_renew=True)
        time.sleep(1.5)
        assert not renewed.lost
        assert other.try_acquire(name, ttl=5) is None  # still held in Redis
        renewed.release()


def evalsha_calls(admin: Redis) -> int:
    info: bytes = admin.execute("INFO", "commandstats")
    for line in info.decode().splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def test_a_user_without_channel_rights_releases_and_waiters_fall_back_to_their_timer(
        redis_server: Callable[..., Server], name: str) -> None:
    # The README's line minus its channel grant: Redis refuses the release
    # script's PUBLISH (and the waiters' SUBSCRIBE) for this user.
    acl = ["resetchannels" if part.startswith("&") else part for part in readme_acl()]
    assert "resetchannels" in acl
    server = redis_server()
    admin = Redis(server.url)
    admin.execute("ACL", *acl)
    url = f"redis://app:acl-pass@127.0.0.1:{server.port}/0"
    lock_key, fence_key, channel = lock_keys(name)
    denied = admin.execute("ACL", "DRYRUN", "app", "PUBLISH", channel, "x")
    assert denied != "OK" and b"channel" in denied, denied  # the case under test
    refused: List[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "refused to PUBLISH" in record.getMessage():
                refused.append(record.getMessage())

    logger = logging.getLogger("fencelock")
    handler, old_level = Keep(logging.WARNING), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    holder_client = fencelock.Client(url)
    other = fencelock.Client(url)
    try:
        # Release 1: release() itself.
        lease = holder_client.acquire(name, ttl=10, wait=0)
        lease.release()  # no RedisError: the DEL stands although PUBLISH failed
        assert admin.execute("EXISTS", lock_key) == 0
        assert not lease.lost

        # Release 2: the end of a `with` block, while another client waits.
        got: List[fencelock.Lease] = []
        with holder_client.lock(name, ttl=10, wait=0):
            admin.execute("CONFIG", "RESETSTAT")
            waiter = threading.Thread(target=lambda: got.append(other.acquire(name, ttl=10, wait=10)))
            waiter.start()
            wait_until(lambda: evalsha_calls(admin) >= 1, 5.0, "the waiter's first (refused) attempt")
            assert not got
        released = time.monotonic()  # the block exited without raising
        waiter.join(15)
        assert got, "the waiter in the other client got the lock"
        assert time.monotonic() - released < 5.0, "woken by its timer, long before its wait ran out"
        assert admin.execute("GET", lock_key) == got[0].token.encode()

        # close() hands every queued record to logging: the warning came
        # once for the holder's client although both releases were refused.
        holder_client.close()
        assert len(refused) == 1, refused
        assert "channel rights" in refused[0]

        got[0].release()
        assert admin.execute("EXISTS", lock_key) == 0
        # Nothing left but the fence counter, which expires by itself.
        assert admin.keys(b"fencelock:*") == [fence_key]
        assert admin.execute("PTTL", fence_key) > 0
    finally:
        holder_client.close()
        other.close()
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        admin.close()
