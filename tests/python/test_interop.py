"""One lock, three languages: Rust, Python and Node agents (separate
processes, each one fencelock client) share locks on one redis-server.

Agent protocol (tests/interop/agent.py, agent.js, and the Rust
tests/conformance/src/bin/fencelock-agent.rs): one JSON request per stdin
line, one JSON reply per stdout line, requests handled in order.
  {"op": "acquire", "name", "ttl": ms, "wait": ms|null, "auto_renew": bool}
                                                        -> {"ok", "lease": id, "fence": "n"}
  {"op": "try", "name", "ttl": ms}                      -> {"ok", "lease": id|null, ...}
  {"op": "extend", "lease": id, "ttl": ms|null} / {"op": "release", "lease": id} -> {"ok"}
  {"op": "lost", "lease": id}                           -> {"ok", "lost": bool}
An acquire or try may name a `primitive`: {"semaphore": permits} or
{"rw": "read"|"write"} (default: the mutex).
Failures: {"ok": false, "error": "NotAcquired"|"LockLost"|"Redis"}.

The wire test runs one scenario (acquire, extend, contended wait, release,
lost lease) with two agents of the same language under MONITOR, writes the
masked command stream to $FENCELOCK_WIRE_DIR/<lang>.txt, and compares it with
tests/vectors/wire.json; ci/test-interop.sh then diffs the three files.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from fltest import ROOT, Monitor, Redis, script_calls, vectors

SCRIPTS = vectors("commands.json")["scripts"]
# "wasm": the Node agent on fencelock/wasm over ioredis instead of the addon.
LANGS = ["rust", "python", "node", "wasm"]


def agent_command(lang: str, url: str) -> List[str]:
    if lang == "python":
        return [sys.executable, str(ROOT / "tests/interop/agent.py"), url]
    if lang in ("node", "wasm"):
        flavour = ["--wasm"] if lang == "wasm" else []
        return ["node", str(ROOT / "tests/interop/agent.js"), *flavour, url]
    exe = os.environ.get("FENCELOCK_RUST_AGENT", str(ROOT / "target/debug/fencelock-agent"))
    if not os.path.exists(exe):  # run alone: build it (ci/test-interop.sh did already)
        subprocess.run(["cargo", "build", "-q", "-p", "fencelock-conformance", "--bins"], cwd=ROOT, check=True)
    return [exe, url]


class Agent:
    def __init__(self, lang: str, url: str) -> None:
        self.lang = lang
        self.proc = subprocess.Popen(
            agent_command(lang, url), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.replies: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.reply(30)["ready"]

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))

    def send(self, **req: Any) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 15) -> Dict[str, Any]:
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.lang} agent did not answer within {timeout} s") from None

    def call(self, **req: Any) -> Dict[str, Any]:
        self.send(**req)
        return self.reply()

    def pending(self) -> bool:
        return self.replies.empty() and self.proc.poll() is None

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def agents(redis_url: str) -> Iterator[Dict[str, Agent]]:
    started = {lang: Agent(lang, redis_url) for lang in LANGS}
    yield started
    for agent in started.values():
        agent.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[Redis]:
    r = Redis(redis_url)
    yield r
    r.close()


def wait_until(cond: Any, what: str, timeout: float = 10.0) -> None:
    """Poll a condition on Redis (not a sleep hiding a race)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


PAIRS = list(itertools.permutations(LANGS, 2))


@pytest.mark.parametrize("holder,waiter", PAIRS, ids=[f"{h}-holds-{w}-waits" for h, w in PAIRS])
def test_holder_blocks_other_language_then_hands_over(
    holder: str, waiter: str, agents: Dict[str, Agent], raw: Redis
) -> None:
    h, w = agents[holder], agents[waiter]
    name = f"interop:{holder}-{waiter}:{uuid.uuid4().hex[:8]}"
    channel = f"fencelock:{{{name}}}:released".encode()
    held = h.call(op="acquire", name=name, ttl=30000, wait=0)
    assert held["ok"], held
    assert w.call(op="try", name=name, ttl=30000) == {"ok": True, "lease": None}
    w.send(op="acquire", name=name, ttl=30000, wait=10000)
    # The waiter is parked: subscribed to the release channel, no answer yet.
    wait_until(lambda: raw.execute("PUBSUB", "NUMSUB", channel)[1] >= 1, "the waiter never subscribed")
    assert w.pending(), "the waiter answered while the lock was held"
    released_at = time.monotonic()
    assert h.call(op="release", lease=held["lease"]) == {"ok": True}
    won = w.reply()
    handoff = time.monotonic() - released_at
    assert won["ok"], won
    assert int(won["fence"]) > int(held["fence"])
    # Woken by the release notification, not by its 1 s fallback timer.
    assert handoff < 0.5, f"handoff took {handoff:.3f} s"
    assert w.call(op="release", lease=won["lease"]) == {"ok": True}


@pytest.mark.parametrize("waiter", ["rust", "node"])
def test_a_python_group_blocks_each_name_for_other_languages(
    waiter: str, agents: Dict[str, Agent], raw: Redis, redis_url: str
) -> None:
    """Python holds several locks at once (acquire_many); another language
    waits on one of them and gets it, with a higher fence, when the group
    is released: each name of the group is the same lock everywhere."""
    import fencelock

    w = agents[waiter]
    base = f"interop:many:{waiter}:{uuid.uuid4().hex[:8]}"
    names = [f"{base}:a", f"{base}:b", f"{base}:c"]
    channel = f"fencelock:{{{names[1]}}}:released".encode()
    client = fencelock.Client(redis_url)
    try:
        group = client.acquire_many(names, ttl=30.0)
        assert w.call(op="try", name=names[1], ttl=30000) == {"ok": True, "lease": None}
        w.send(op="acquire", name=names[1], ttl=30000, wait=10000)
        wait_until(lambda: raw.execute("PUBSUB", "NUMSUB", channel)[1] >= 1, "the waiter never subscribed")
        assert w.pending(), "the waiter answered while the group held the lock"
        group.release()
        won = w.reply()
        assert won["ok"], won
        assert int(won["fence"]) > group.leases[1].fence
        # And the other way round: a name the other language holds keeps the
        # whole group out, and nothing of it is left.
        assert client.try_acquire_many(names, ttl=5.0) is None
        assert raw.execute("EXISTS", f"fencelock:{{{names[0]}}}".encode()) == 0
        assert w.call(op="release", lease=won["lease"]) == {"ok": True}
    finally:
        client.close()


@pytest.mark.parametrize("holder,taker", PAIRS, ids=[f"{h}-loses-to-{t}" for h, t in PAIRS])
def test_lease_lost_to_other_language_is_reported_lost(
    holder: str, taker: str, agents: Dict[str, Agent]
) -> None:
    h, t = agents[holder], agents[taker]
    name = f"interop:lost:{holder}-{taker}:{uuid.uuid4().hex[:8]}"
    held = h.call(op="acquire", name=name, ttl=200, wait=0)
    assert held["ok"], held
    taken = t.call(op="acquire", name=name, ttl=30000, wait=5000)  # after the 200 ms expire
    assert taken["ok"], taken
    assert int(taken["fence"]) > int(held["fence"])
    # Redis says so (the key holds the taker's token) and the lease agrees.
    assert h.call(op="extend", lease=held["lease"], ttl=None)["error"] == "LockLost"
    assert h.call(op="lost", lease=held["lease"])["lost"] is True
    assert h.call(op="release", lease=held["lease"])["error"] == "LockLost"
    assert t.call(op="extend", lease=taken["lease"], ttl=None) == {"ok": True}
    assert t.call(op="release", lease=taken["lease"]) == {"ok": True}


RENEW_PAIRS = [("python", "node"), ("node", "rust"), ("rust", "python")]


@pytest.mark.parametrize("holder,other", RENEW_PAIRS, ids=[f"{h}-renews-{o}-tries" for h, o in RENEW_PAIRS])
def test_auto_renewal_keeps_other_language_out(holder: str, other: str, agents: Dict[str, Agent]) -> None:
    """A 1 s lease with auto-renewal outlives several TTLs: every try from
    the other language during 2.5 s finds it held. (1 s, not 300 ms: a renewal
    may then run ~650 ms late on a loaded machine without losing the lease.)"""
    h, o = agents[holder], agents[other]
    name = f"interop:renew:{holder}-{other}:{uuid.uuid4().hex[:8]}"
    held = h.call(op="acquire", name=name, ttl=1000, wait=0, auto_renew=True)
    assert held["ok"], held
    tries, until = 0, time.monotonic() + 2.5  # 2.5 TTLs
    while time.monotonic() < until:
        assert o.call(op="try", name=name, ttl=1000) == {"ok": True, "lease": None}
        tries += 1
    assert tries > 10
    assert h.call(op="lost", lease=held["lease"])["lost"] is False
    assert h.call(op="release", lease=held["lease"]) == {"ok": True}
    won = o.call(op="try", name=name, ttl=1000)
    assert won["lease"] is not None and int(won["fence"]) > int(held["fence"])
    assert o.call(op="release", lease=won["lease"]) == {"ok": True}


SEMAPHORE_PAIRS = [("python", "node"), ("node", "rust"), ("rust", "wasm"), ("wasm", "python")]


@pytest.mark.parametrize("holder,waiter", SEMAPHORE_PAIRS, ids=[f"{h}-holds-{w}-waits" for h, w in SEMAPHORE_PAIRS])
def test_semaphore_permits_are_shared_across_languages(
    holder: str, waiter: str, agents: Dict[str, Agent], raw: Redis
) -> None:
    """Two permits: the holder's language takes both, the other language's
    try finds none and its waiter stands in the server's line; a release
    hands a permit over (woken by the notification), with a larger fence."""
    h, w = agents[holder], agents[waiter]
    name = f"interop:sem:{holder}-{waiter}:{uuid.uuid4().hex[:8]}"
    sem = {"semaphore": 2}
    waiting = f"fencelock:{{{name}}}:semaphore:waiting".encode()
    first = h.call(op="acquire", name=name, ttl=30000, wait=0, primitive=sem)
    second = h.call(op="acquire", name=name, ttl=30000, wait=0, primitive=sem)
    assert first["ok"] and second["ok"] and int(second["fence"]) > int(first["fence"])
    assert w.call(op="try", name=name, ttl=30000, primitive=sem) == {"ok": True, "lease": None}
    w.send(op="acquire", name=name, ttl=30000, wait=10000, primitive=sem)
    wait_until(lambda: raw.execute("ZCARD", waiting) == 1, "the waiter never stood in line")
    assert w.pending()
    released_at = time.monotonic()
    assert h.call(op="release", lease=first["lease"]) == {"ok": True}
    won = w.reply()
    assert won["ok"], won
    assert int(won["fence"]) > int(second["fence"])
    assert time.monotonic() - released_at < 0.5, "woken by the release notification"
    for agent, lease in ((h, second), (w, won)):
        assert agent.call(op="release", lease=lease["lease"]) == {"ok": True}


RW_PAIRS = [("python", "node"), ("node", "rust"), ("rust", "python"), ("wasm", "rust")]


@pytest.mark.parametrize("reader,writer", RW_PAIRS, ids=[f"{r}-reads-{w}-writes" for r, w in RW_PAIRS])
def test_read_write_lock_across_languages(reader: str, writer: str, agents: Dict[str, Agent], raw: Redis) -> None:
    """Readers of one language share; a writer of another waits for them and,
    while it waits, keeps new readers out."""
    r, w = agents[reader], agents[writer]
    name = f"interop:rw:{reader}-{writer}:{uuid.uuid4().hex[:8]}"
    read, write = {"rw": "read"}, {"rw": "write"}
    waiting = f"fencelock:{{{name}}}:rw:waiting".encode()
    r1 = r.call(op="acquire", name=name, ttl=30000, wait=0, primitive=read)
    assert r1["ok"], r1
    assert w.call(op="try", name=name, ttl=30000, primitive=write) == {"ok": True, "lease": None}
    w.send(op="acquire", name=name, ttl=30000, wait=10000, primitive=write)
    wait_until(lambda: raw.execute("ZCARD", waiting) == 1, "the writer never stood in line")
    assert r.call(op="try", name=name, ttl=30000, primitive=read) == {"ok": True, "lease": None}
    assert r.call(op="release", lease=r1["lease"]) == {"ok": True}
    won = w.reply()
    assert won["ok"] and int(won["fence"]) > int(r1["fence"]), won
    assert w.call(op="release", lease=won["lease"]) == {"ok": True}


REDLOCK_PAIRS = [("python", "node"), ("node", "rust"), ("rust", "python"), ("wasm", "python"), ("rust", "wasm")]


@pytest.mark.parametrize("holder,waiter", REDLOCK_PAIRS, ids=[f"{h}-holds-{w}-waits" for h, w in REDLOCK_PAIRS])
def test_redlock_fences_and_hand_over_across_languages(holder: str, waiter: str, redlock_urls: List[str]) -> None:
    """Five independent nodes, three fence counters far ahead of the clocks
    (2^62) and apart: every majority mixes values, so the acquire hears every
    node, and the holder's fence (the highest) is written back to a majority;
    the other language then gets a larger one."""
    name = f"interop:redlock:{holder}-{waiter}:{uuid.uuid4().hex[:8]}"
    fence_key = f"fencelock:{{{name}}}:fence".encode()
    channel = f"fencelock:{{{name}}}:released".encode()
    nodes = [Redis(u) for u in redlock_urls]
    h, w = Agent(holder, ",".join(redlock_urls)), Agent(waiter, ",".join(redlock_urls))
    try:
        ahead = 2**62
        for i in range(3):  # three counters ahead, all different
            nodes[i].execute("SET", fence_key, ahead + 10 * i)
        top = ahead + 20 + 1
        held = h.call(op="acquire", name=name, ttl=30000, wait=0)
        assert held["fence"] == str(top), held
        at_max = [n.execute("GET", fence_key) for n in nodes].count(str(top).encode())
        assert at_max >= 3, "the fence was not written back to a majority"
        assert w.call(op="try", name=name, ttl=30000) == {"ok": True, "lease": None}
        w.send(op="acquire", name=name, ttl=30000, wait=10000)
        wait_until(
            lambda: sum(n.execute("PUBSUB", "NUMSUB", channel)[1] >= 1 for n in nodes) >= 3,
            "the waiter never subscribed on a majority",
        )
        assert w.pending()
        released_at = time.monotonic()
        assert h.call(op="release", lease=held["lease"]) == {"ok": True}
        won = w.reply()
        assert won["ok"], won
        assert int(won["fence"]) > top
        assert time.monotonic() - released_at < 0.5
        assert w.call(op="release", lease=won["lease"]) == {"ok": True}
    finally:
        h.close()
        w.close()
        for n in nodes:
            n.close()


# ----------------------------------------------------------------- the wire

WIRE = vectors("wire.json")


def masked_stream(monitor: Monitor, keys: List[bytes]) -> List[str]:
    """Script calls on these keys and (un)subscriptions to the channel, as
    text; tokens replaced by <T1>, <T2>... in order of appearance."""
    tokens: Dict[bytes, str] = {}

    def show(b: bytes) -> str:
        if re.fullmatch(rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", b):
            return tokens.setdefault(b, f"<T{len(tokens) + 1}>")
        return b.decode()

    lines = [
        " ".join([c["script"], *map(show, c["keys"]), *map(show, c["args"])])
        for c in script_calls(monitor.seen, SCRIPTS)
        if c["keys"][0] in keys
    ]
    # Subscriptions travel on a separate pub/sub connection, so their order
    # relative to script calls is not fixed: compared as their own list.
    # Command names are case-insensitive (ioredis sends "subscribe").
    subs = [
        " ".join([args[0].decode().upper(), *(a.decode() for a in args[1:])])
        for client, args in monitor.seen
        if client != "lua" and args[0].upper() in (b"SUBSCRIBE", b"UNSUBSCRIBE") and keys[2] in args
    ]
    return lines + ["--- subscriptions"] + subs


@pytest.mark.parametrize("lang", LANGS)
def test_wire_commands_are_identical_in_every_language(lang: str, redis_url: str, raw: Redis) -> None:
    name = WIRE["lock_name"]
    keys = [f"fencelock:{{{name}}}{s}".encode() for s in ("", ":fence", ":released")]
    raw.execute("DEL", keys[0], keys[1])
    # A stored fence far ahead of the server clock: each acquire adds one,
    # exactly (2^62 + n is not a double).
    ahead = 2**62
    raw.execute("SET", keys[1], ahead)
    a, b = Agent(lang, redis_url), Agent(lang, redis_url)
    monitor = Monitor(redis_url)
    try:
        first = a.call(op="acquire", name=name, ttl=10000, wait=0)
        assert first["fence"] == str(ahead + 1)
        assert a.call(op="extend", lease=first["lease"], ttl=20000) == {"ok": True}
        b.send(op="acquire", name=name, ttl=10000, wait=5000)
        # B tries, subscribes, tries again once subscribed, then waits.
        monitor.wait_for(lambda seen: sum(1 for c in script_calls(seen, SCRIPTS) if c["script"] == "acquire") == 3)
        assert b.pending()
        assert a.call(op="release", lease=first["lease"]) == {"ok": True}
        second = b.reply()
        assert second["fence"] == str(ahead + 2)
        raw.execute("DEL", keys[0])  # B's lock expires (as if B had paused)
        third = a.call(op="acquire", name=name, ttl=10000, wait=0)
        assert third["fence"] == str(ahead + 3)
        assert b.call(op="extend", lease=second["lease"], ttl=None)["error"] == "LockLost"
        assert b.call(op="release", lease=second["lease"])["error"] == "LockLost"
        assert a.call(op="release", lease=third["lease"]) == {"ok": True}
        monitor.sync()
        stream = masked_stream(monitor, keys)
    finally:
        monitor.close()
        a.close()
        b.close()
    out = os.environ.get("FENCELOCK_WIRE_DIR")
    if out:
        Path(out, f"{lang}.txt").write_text("\n".join(stream) + "\n")
    assert stream == WIRE["stream"]
