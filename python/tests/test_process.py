"""Process-level behaviour: os.fork, Ctrl-C, logging."""

from __future__ import annotations

import _thread
import asyncio
import gc
import logging
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterator, List

import pytest

import fencelock
from conftest import Redis, Server, lock_keys, run, subscribers, wait_until


def _wait_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung (deadlock?)")
        time.sleep(0.01)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_client_works_in_forked_child_while_parent_threads_are_busy(redis_url: str, r: Redis, name: str) -> None:
    client = fencelock.Client(redis_url)
    aclient = fencelock.AsyncClient(redis_url)
    # Runtime, connections and a held lease exist before the fork.
    held = client.acquire(name + ":parent", ttl=30.0)
    spare = fencelock.Client(redis_url)
    spare.acquire(name + ":spare", ttl=5.0).release()

    async def touch() -> None:
        await (await aclient.acquire(name + ":a", ttl=5.0)).release()

    run(touch())
    stop = threading.Event()
    errors: List[BaseException] = []

    def busy() -> None:  # keeps runtime threads and the GIL busy during the fork
        try:
            while not stop.is_set():
                client.acquire(name + ":busy", ttl=5.0, wait=5.0).release()
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=busy) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        children = []
        for k in range(4):
            pid = os.fork()
            if pid == 0 and k == 3:  # child that only drops the parent's objects
                try:
                    del held, spare  # their destructors must not touch the parent's runtime
                    gc.collect()
                    fresh = fencelock.Client(redis_url)
                    fresh.acquire(name + ":fresh", ttl=5.0, wait=10.0).release()
                finally:
                    os._exit(0)
            if pid == 0:  # child: must work, must not deadlock
                code = 1
                try:
                    lease = client.acquire(name + ":child", ttl=5.0, wait=10.0)
                    ok = Redis(redis_url).get(lock_keys(name + ":child")[0]) == lease.token.encode()
                    lease.release()
                    try:
                        held.release()  # a parent's lease is not the child's
                    except RuntimeError:
                        pass
                    else:
                        ok = False

                    async def child_async() -> None:
                        lease = await aclient.acquire(name + ":child-a", ttl=5.0, wait=10.0)
                        await lease.release()

                    asyncio.run(child_async())
                    code = 0 if ok else 2
                finally:
                    os._exit(code)
            children.append(pid)
        for pid in children:
            assert _wait_child(pid, 30) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors
    # The parent is unaffected.
    assert r.get(lock_keys(name + ":parent")[0]) == held.token.encode()
    held.release()
    client.acquire(name, ttl=1.0).release()
    client.close()
    spare.close()


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C handler, whatever SIGINT this run inherited. A
    suite started in the background (`make test &`, nohup) inherits SIGINT
    ignored, Python then installs no handler, and interrupt_main() does
    nothing: the acquire would simply wait for the holder's TTL."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_interrupts_blocking_acquire_promptly_and_leaves_nothing(redis_url: str, r: Redis, name: str) -> None:
    assert threading.current_thread() is threading.main_thread()
    holder_client = fencelock.Client(redis_url)
    client = fencelock.Client(redis_url)
    holder = holder_client.acquire(name, ttl=30.0)
    interrupted_at: List[float] = []

    def interrupt() -> None:
        wait_until(lambda: subscribers(r, name) > 0, what="the acquire to block")
        interrupted_at.append(time.monotonic())
        _thread.interrupt_main()  # raises SIGINT's handler, exactly like Ctrl-C

    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        client.acquire(name, ttl=30.0)  # waits forever unless interrupted
    returned_at = time.monotonic()
    t.join()
    assert returned_at - interrupted_at[0] < 0.5, "Ctrl-C must return promptly"
    wait_until(lambda: subscribers(r, name) == 0, what="the interrupted waiter to leave")
    holder.release()
    # Had the interrupted acquire stayed queued, it would take the lock now.
    time.sleep(0.3)
    assert r.execute("EXISTS", lock_keys(name)[0]) == 0
    lease = client.acquire(name, ttl=1.0, wait=2.0)  # and the client still works
    lease.release()
    holder_client.close()
    client.close()


@pytest.mark.usefixtures("ctrl_c")
def test_ctrl_c_at_random_moments_of_a_blocked_acquire(redis_url: str, r: Redis, name: str) -> None:
    """Interrupt blocked acquires after random delays (inside the Rust call:
    a KeyboardInterrupt that lands in Python code after `acquire` returned is
    Python's business, like for any other resource)."""
    holder_client = fencelock.Client(redis_url)
    client = fencelock.Client(redis_url)
    holder = holder_client.acquire(name, ttl=30.0)
    lock_key = lock_keys(name)[0]
    for i in range(8):
        timer = threading.Timer(0.001 + 0.013 * i, _thread.interrupt_main)
        with pytest.raises(KeyboardInterrupt):
            # Started inside: on a loaded machine the 1 ms timer can fire
            # while `start()` still waits for its thread.
            timer.start()
            client.acquire(name, ttl=30.0)
        timer.join()
    wait_until(lambda: subscribers(r, name) == 0, what="the interrupted waiters to leave")
    holder.release()
    time.sleep(0.3)
    assert r.execute("EXISTS", lock_key) == 0
    client.acquire(name, ttl=1.0, wait=2.0).release()
    holder_client.close()
    client.close()


def test_logging_receives_diagnostics_but_never_tokens(redis_url: str, r: Redis, name: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fencelock")
    client = fencelock.Client(redis_url)
    lease = client.acquire(name, ttl=0.3, auto_renew=True)
    tokens = [lease.token]
    r.execute("SCRIPT", "FLUSH")  # NOSCRIPT reload is logged
    lost = threading.Event()
    lease.on_lost(lambda _l: lost.set())
    r.execute("DEL", lock_keys(name)[0])  # "lease lost" is logged (WARNING)
    assert lost.wait(3)
    other = client.acquire(name, ttl=1.0)
    tokens.append(other.token)
    other.release()
    client.close()
    records = [rec for rec in caplog.records if rec.name == "fencelock"]
    messages = [rec.getMessage() for rec in records]
    assert any("lost" in m for m in messages), messages
    assert any(rec.levelno == logging.WARNING for rec in records), messages
    assert any("NOSCRIPT" in m for m in messages), messages
    for m in messages:
        for token in tokens:
            assert token not in m
    # Level changes take effect: nothing below WARNING once raised.
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="fencelock")
    c2 = fencelock.Client(redis_url)
    c2.acquire(name, ttl=1.0).release()
    c2.close()
    assert [rec for rec in caplog.records if rec.name == "fencelock" and rec.levelno < logging.WARNING] == []


def test_password_never_logged(redis_server: Callable[..., Server], caplog: pytest.LogCaptureFixture,
                               name: str) -> None:
    server = redis_server(password="pw-top-secret")
    caplog.set_level(logging.DEBUG, logger="fencelock")
    c = fencelock.Client(server.url)
    c.acquire(name, ttl=1.0).release()
    c.close()
    bad = fencelock.Client(server.url.replace("pw-top-secret", "pw-wrong-secret"))
    with pytest.raises(fencelock.RedisError):
        bad.acquire(name, ttl=1.0)
    text = "\n".join(rec.getMessage() for rec in caplog.records)
    assert "connected" in text
    assert "top-secret" not in text and "wrong-secret" not in text


EXIT_SCRIPT = """
import asyncio, sys, fencelock
url = sys.argv[1]
async def main():
    ac = fencelock.AsyncClient(url)
    async with ac.lock("exit-test", ttl=5.0, auto_renew=True) as lease:
        lease.on_lost(print)
    lease = await ac.acquire("exit-test", ttl=5.0)
    await lease.release()
    await ac.close()
asyncio.run(main())
with fencelock.Client(url) as c:
    held = c.acquire("exit-test:held", ttl=0.5, auto_renew=True)  # still held at exit
"""


def test_interpreter_exit_is_clean_right_after_async_work(redis_url: str) -> None:
    """Runtime threads still delivering results while Python finalizes must
    not crash the process (they used to be killed while holding the GIL)."""
    import subprocess
    for _ in range(15):
        done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, redis_url], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


# --------------------------------------------------------------------------
# A stalled interpreter: one lease expires, the renewed ones must live on.

CONTENDER = """
import sys, time, fencelock
url, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
with fencelock.Client(url) as c:
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        lease = c.try_acquire(name, ttl=5.0)
        if lease is not None:
            print("stolen", flush=True)
            lease.release()
            break
        time.sleep(0.02)
    else:
        print("never", flush=True)
"""


def _hold_the_gil(seconds: float) -> float:
    """A C call that keeps the GIL: ctypes.PyDLL functions run without
    releasing it (a long `sum(range(n))` or a GC pause does the same)."""
    import ctypes
    libc = ctypes.PyDLL(None)
    t0 = time.monotonic()
    libc.usleep(int(seconds * 1_000_000))
    return time.monotonic() - t0


class _Contender:
    """Another process that tries to take `name` every 20 ms for `seconds`."""

    def __init__(self, redis_url: str, name: str, seconds: float) -> None:
        import subprocess
        self.proc = subprocess.Popen([sys.executable, "-c", CONTENDER, redis_url, name, str(seconds)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def outcome(self) -> str:
        out, _ = self.proc.communicate(timeout=60)
        return out.strip()


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_a_stalled_interpreter_loses_only_the_lease_that_expired(
        redis_url: str, r: Redis, name: str, caplog: pytest.LogCaptureFixture, flavour: str) -> None:
    """X (ttl 2 s, auto-renewed) and S (ttl 0.6 s, not renewed); then the GIL
    is held for 3 s. S expires and its "lease lost" WARNING is emitted while
    the GIL is held; X's renewals must still go out on time: no other process
    gets X during or after the stall, and X is neither lost nor unreleasable."""
    caplog.set_level(logging.WARNING, logger="fencelock")  # the warning is forwarded
    x_name, s_name = name + ":x", name + ":s"

    def check(x: "fencelock.Lease | fencelock.AsyncLease", s: "fencelock.Lease | fencelock.AsyncLease",
              stalled: float, contender: _Contender) -> None:
        assert stalled >= 2.9, stalled
        assert s.lost, "the short lease ran out during the stall"
        assert not x.lost, "the renewed lease was lost"
        assert r.get(lock_keys(x_name)[0]) == x.token.encode(), "X is no longer ours in Redis"
        assert contender.outcome() == "never", "another process took X"

    if flavour == "sync":
        client = fencelock.Client(redis_url)
        x = client.acquire(x_name, ttl=2.0, auto_renew=True)
        contender = _Contender(redis_url, x_name, 4.5)
        s = client.acquire(s_name, ttl=0.6)
        check(x, s, _hold_the_gil(3.0), contender)
        x.release()  # raises LockLost if X had been lost
        client.close()
    else:
        async def main() -> None:
            aclient = fencelock.AsyncClient(redis_url)
            x = await aclient.acquire(x_name, ttl=2.0, auto_renew=True)
            contender = _Contender(redis_url, x_name, 4.5)
            s = await aclient.acquire(s_name, ttl=0.6)
            check(x, s, _hold_the_gil(3.0), contender)
            await x.release()
            await aclient.close()

        run(main())
    # close() delivered what was logged: S's loss, and nothing about X.
    lost = [rec.getMessage() for rec in caplog.records if rec.name == "fencelock" and "lost" in rec.getMessage()]
    assert any(s_name in m for m in lost), lost
    assert not any(x_name in m for m in lost), lost


# --------------------------------------------------------------------------
# Awaitables run on a runtime thread of their own, one per process.

RUNTIME_THREADS_SCRIPT = """
import asyncio, os, sys, fencelock
url, name = sys.argv[1], sys.argv[2]

def named(comm):
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().strip() == comm
        except FileNotFoundError:
            pass
    return count

with fencelock.Client(url) as c:
    c.acquire(name, ttl=5.0).release()
before = named("fencelock-async")  # the kernel keeps 15 bytes of a name

async def main():
    ac = fencelock.AsyncClient(url)
    await (await ac.acquire(name, ttl=5.0)).release()
    await ac.close()

asyncio.run(main())
asyncio.run(main())  # a second event loop shares the thread
print(before, named("fencelock-async"))
"""


def test_awaitables_share_one_runtime_thread_of_their_own(redis_url: str, name: str) -> None:
    import subprocess
    done = subprocess.run([sys.executable, "-c", RUNTIME_THREADS_SCRIPT, redis_url, name],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "1"], done.stdout
