"""tests/vectors/*.json through Python's public API against a real
redis-server: the keys a lock creates, argument validation (error classes,
nothing sent), and the exact script calls of each scenario seen by MONITOR.
Rust (tests/conformance) and Node (tests/node/vectors.test.js) check the same
files."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import fencelock
from fltest import (
    TOKEN,
    Monitor,
    Redis,
    Server,
    as_bytes,
    as_name,
    number,
    script_calls,
    start_in_line,
    vectors,
)

COMMANDS = vectors("commands.json")
SCRIPTS: Dict[str, str] = COMMANDS["scripts"]
KEYS = vectors("keys.json")["cases"]
VALIDATION = vectors("validation.json")
LIST = vectors("list.json")


@pytest.fixture
def monitor(redis_url: str) -> Iterator[Monitor]:
    m = Monitor(redis_url)
    yield m
    m.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[Redis]:
    r = Redis(redis_url)
    yield r
    r.close()


def sent_nothing(monitor: Monitor) -> None:
    monitor.sync()
    assert script_calls(monitor.seen, SCRIPTS) == []


# ----------------------------------------------------------------- keys.json


@pytest.mark.parametrize("case", KEYS, ids=[f"{c['prefix']}{c['why']}" for c in KEYS])
def test_keys(case: Dict[str, Any], redis_url: str, raw: Redis, monitor: Monitor) -> None:
    lock, fence, channel = (as_bytes(case[k]) for k in ("lock", "fence", "channel"))
    prefix = case["prefix"]
    raw.execute("DEL", lock, fence)
    before = set(raw.execute("KEYS", prefix + "*"))
    with fencelock.Client(redis_url, prefix=prefix) as client:
        name = as_name(case["name"])
        lease = client.acquire(name, ttl=30.0, wait=0)
        assert lease.name == name
        assert set(raw.execute("KEYS", prefix + "*")) - before == {lock, fence}
        assert raw.execute("TYPE", lock) == "string"
        assert raw.execute("GET", lock) == lease.token.encode()
        assert 0 < raw.execute("PTTL", lock) <= 30000
        assert raw.execute("TYPE", fence) == "string"
        assert raw.execute("GET", fence) == str(lease.fence).encode()
        # The fence key expires: the lock's ttl + the grace (default 60 s).
        assert 30000 < raw.execute("PTTL", fence) <= 30000 + 60000
        lease.release()
        assert raw.execute("EXISTS", lock) == 0
        assert set(raw.execute("KEYS", prefix + "*")) - before == {fence}
    monitor.sync()
    calls = [c for c in script_calls(monitor.seen, SCRIPTS) if c["keys"][0] == lock]
    assert [(c["script"], c["keys"]) for c in calls] == [("acquire", [lock, fence]), ("release", [lock, channel])]


def test_every_key_of_a_lock_is_in_the_slot_redis_cluster_computes(tmp_path: Any) -> None:
    """keys.json's `slot` against Redis's own CLUSTER KEYSLOT (a private,
    cluster-enabled server; no slots need to be assigned for KEYSLOT)."""
    server = Server("--cluster-enabled", "yes", "--cluster-config-file", str(tmp_path / "nodes.conf"))
    r = Redis(server.url)
    try:
        for case in KEYS:
            for k in ("lock", "fence", "channel"):
                assert r.execute("CLUSTER", "KEYSLOT", as_bytes(case[k])) == case["slot"], (case["why"], k)
    finally:
        r.close()
        server.stop()


# ----------------------------------------------------------------- list.json


def test_list(redis_url: str, monitor: Monitor) -> None:
    run = uuid.uuid4().hex[:12]
    prefix = f"{LIST['prefix']}{run}:"
    with fencelock.Client(redis_url, prefix=prefix) as client:
        leases = [client.acquire(as_name(n), ttl=30.0) for n in LIST["held"]]
        for n in LIST["released"]:
            client.acquire(as_name(n), ttl=30.0).release()
        monitor.sync()
        for case in LIST["cases"]:
            found = [n.encode() if isinstance(n, str) else n for n, _ in client.list(as_name(case["pattern"]))]
            assert found == [as_bytes(n) for n in case["names"]], case["why"]
        for bad in LIST["bad"]:
            with pytest.raises(ValueError):
                client.list(as_name(bad))
        monitor.sync()
        for lease in leases:
            lease.release()
    # The documented MATCH for each pattern (the run id after the prefix),
    # and never KEYS.
    escaped = LIST["prefix"].replace("*", "\\*").replace("[", "\\[").replace("]", "\\]").encode()
    sent = [a[a.index(b"MATCH") + 1] for _, a in monitor.seen if a and a[0].upper() == b"SCAN"]
    for case in LIST["cases"]:
        match = as_bytes(case["match"]).replace(escaped, escaped + run.encode() + b":", 1)
        assert match in sent, (case["why"], match, sent[:5])
    assert not [a for _, a in monitor.seen if a and a[0].upper() == b"KEYS" and run.encode() in b" ".join(a)]


# ----------------------------------------------------------- validation.json


def try_both(client: fencelock.Client, name: Any, ttl: Any = 1.0, **kw: Any) -> List[BaseException]:
    errors: List[BaseException] = []
    for call in (lambda: client.acquire(name, ttl, **kw), lambda: client.try_acquire(name, ttl)):
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        errors.append(info.value)
        if kw:
            break
    return errors


def test_invalid_names_raise_value_error_and_send_nothing(redis_url: str, monitor: Monitor) -> None:
    with fencelock.Client(redis_url) as client:
        for case in VALIDATION["names"]["invalid"]:
            for err in try_both(client, as_name(case["name"])):
                assert type(err) is ValueError, case["why"]
        for bad in VALIDATION["names"]["wrong_type"]:
            for err in try_both(client, bad):
                assert type(err) is TypeError, repr(bad)
    sent_nothing(monitor)


def test_invalid_ttls_raise_and_send_nothing(redis_url: str, monitor: Monitor) -> None:
    with fencelock.Client(redis_url) as client:
        for case in VALIDATION["ttl"]["invalid"]:
            for err in try_both(client, "vectors:ttl", number(case["s"])):
                assert type(err) is ValueError, case
        for bad in VALIDATION["ttl"]["wrong_type"]:
            for err in try_both(client, "vectors:ttl", bad):
                assert type(err) is TypeError, repr(bad)
        for case in VALIDATION["wait"]["invalid"]:
            for err in try_both(client, "vectors:wait", 1.0, wait=number(case["s"])):
                assert type(err) is ValueError, case
        for bad in VALIDATION["wait"]["wrong_type"]:
            for err in try_both(client, "vectors:wait", 1.0, wait=bad):
                assert type(err) is TypeError, repr(bad)
    sent_nothing(monitor)


def test_valid_ttls_are_sent_in_whole_milliseconds_rounded_up(redis_url: str, raw: Redis, monitor: Monitor) -> None:
    name = "vectors:ttl-rounding"
    lock = b"fencelock:{" + name.encode() + b"}"
    with fencelock.Client(redis_url) as client:
        for case in VALIDATION["ttl"]["valid"]:
            raw.execute("DEL", lock)
            lease = client.acquire(name, ttl=case["s"], wait=0)
            try:
                lease.release()
            except fencelock.LockLost:
                assert case["s"] < 0.1  # a 1 ms lock may expire first
    monitor.sync()
    sent = [c["args"][1].decode() for c in script_calls(monitor.seen, SCRIPTS) if c["script"] == "acquire"]
    assert sent == [c["sent"] for c in VALIDATION["ttl"]["valid"]]


# ------------------------------------------------------------- commands.json

REAL = [s for s in COMMANDS["scenarios"] if s["real"]]


def resolve(v: Any, sc: Dict[str, Any]) -> bytes:
    if isinstance(v, str) and v.startswith("$") and v[1:] in sc["keys"]:
        return as_bytes(sc["keys"][v[1:]])
    if v in ("$token", "$waiter_token"):
        return v.encode()
    return as_bytes(v)


def acquirer(client: fencelock.Client, sc: Dict[str, Any]) -> Any:
    """What the scenario's acquire calls: the mutex's, or a semaphore's or a
    read-write lock side's (its `primitive`)."""
    name = as_name(sc["lock_name"])
    primitive = sc.get("primitive")
    if primitive is None:
        return lambda **kw: client.acquire(name, **kw)
    if primitive.get("fair"):
        return lambda **kw: client.acquire(name, fair=True, **kw)
    if "semaphore" in primitive:
        return client.semaphore(name, primitive["semaphore"]).acquire
    rw = client.rw_lock(name)
    return (rw.reader if primitive["rw"] == "read" else rw.writer).acquire


ERRORS = {fencelock.NotAcquired: "NotAcquired", fencelock.LockLost: "LockLost", fencelock.RedisError: "Redis",
          fencelock.ClientClosed: "Closed"}


def outcome_of(call: Any) -> Tuple[Any, Any]:
    try:
        return call(), None
    except fencelock.NotAcquired as e:
        return None, {"error": "NotAcquired", "reason": e.reason}
    except fencelock.LockError as e:
        return None, {"error": ERRORS[type(e)]}


class Waiter:
    """The waiter of a handoff scenario: an acquire of the same client on a
    thread of its own, started once the first lease holds the lock; `start`
    returns once it is in the client's local line (the client logs "in line
    behind ..." after the place is taken, inside the call)."""

    def __init__(self, name: Any) -> None:
        self.name = name
        self.result: Tuple[Any, Any] = (None, None)
        self.thread: Optional[threading.Thread] = None

    def start(self, acquire: Callable[[], fencelock.Lease]) -> None:
        self.thread = threading.Thread(target=lambda: setattr(self, "result", outcome_of(acquire)), daemon=True)
        start_in_line(self.name, self.thread.start)

    def outcome(self) -> Tuple[Any, Any]:
        assert self.thread is not None
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.result


@pytest.mark.parametrize("sc", REAL, ids=[s["name"] for s in REAL])
def test_commands(sc: Dict[str, Any], redis_url: str, raw: Redis, monitor: Monitor) -> None:
    for cmd in sc["setup"]:
        raw.execute(*(resolve(a, sc) for a in cmd))
    expected: List[Tuple[str, List[bytes], List[bytes]]] = []
    # The scenario's lease and, in handoff scenarios, the waiter's.
    leases: Dict[str, Optional[fencelock.Lease]] = {"first": None, "waiter": None}
    waiter = Waiter(as_name(sc["lock_name"]))
    got: Dict[str, Any] = {}
    with fencelock.Client(redis_url, prefix=sc["prefix"]) as client:
        for step in sc["steps"]:
            who = step.get("lease", "first")
            if "call" in step:
                lease = leases[who]
                if step["call"] == "acquire":
                    wait = None if sc["wait_ms"] is None else sc["wait_ms"] / 1000
                    acquire = acquirer(client, sc)

                    def attempt() -> fencelock.Lease:
                        return acquire(ttl=sc["ttl_ms"] / 1000, wait=wait)

                    if who == "waiter":
                        waiter.start(attempt)  # its outcome is read at its outcome step
                        got[who] = waiter
                        continue
                    lease, err = outcome_of(attempt)
                    leases[who] = lease
                    got[who] = acquired(lease, err, step_outcome(sc, step))
                else:
                    assert lease is not None
                    ttl = step.get("ttl_ms")
                    op = lease.extend if step["call"] == "extend" else lease.release
                    args = () if ttl is None or op == lease.release else (ttl / 1000,)
                    _, err = outcome_of(lambda: op(*args))
                    got[who] = err or "ok"
            elif "sent" in step:
                for c in step["sent"]:
                    expected.append(
                        (c["script"], [resolve(k, sc) for k in c["keys"]], [resolve(a, sc) for a in c["args"]])
                    )
            elif "external" in step:
                for cmd in step["external"]:
                    raw.execute(*(resolve(a, sc) for a in cmd))
            elif "outcome" in step and step["outcome"] is not None:
                if got.get(who) is waiter:
                    lease, err = waiter.outcome()
                    leases[who] = lease
                    got[who] = acquired(lease, err, step["outcome"])
                want = dict(step["outcome"]) if isinstance(step["outcome"], dict) else step["outcome"]
                if isinstance(want, dict):
                    want.pop("valid_until_ms", None)
                assert got.get(who) == want, step
    monitor.sync()
    lock, fence = as_bytes(sc["keys"]["lock"]), as_bytes(sc["keys"]["fence"])
    calls = [c for c in script_calls(monitor.seen, SCRIPTS) if c["keys"][0] in (lock, fence)]
    tokens = {c["args"][0] for c in calls if c["script"] != "raise_fence"}
    assert len(tokens) <= (2 if "waiter_token" in sc else 1) and all(TOKEN.match(t) for t in tokens)
    placeholders = {b"$token": leases["first"], b"$waiter_token": leases["waiter"]}
    masks = {lease.token.encode(): mask for mask, lease in placeholders.items() if lease is not None}
    if leases["first"] is None:  # a failed acquire: its token is still the first's
        masks.update({t: b"$token" for t in tokens - set(masks)})
    assert tokens <= set(masks), "every token is a lease's"
    masked = [(c["script"], c["keys"], [masks.get(a, a) for a in c["args"]]) for c in calls]
    assert masked == expected
    for key, value in sc.get("final", {}).items():
        assert raw.execute("GET", resolve(key, sc)) == (None if value is None else value.encode()), key


def acquired(lease: Optional[fencelock.Lease], err: Any, want: Dict[str, Any]) -> Any:
    """An acquire's outcome in the vectors' notation; the validity is checked
    against `valid_until_ms` when the vector gives one."""
    if lease is None:
        return err
    if "valid_until_ms" in want:
        assert 0 < lease.valid_for * 1000 <= want["valid_until_ms"]
    return {"acquired": str(lease.fence)}


FENCED = COMMANDS["fenced_writes"]["cases"]


@pytest.mark.parametrize("case", FENCED, ids=[c["name"] for c in FENCED])
def test_fenced_writes(case: Dict[str, Any], redis_url: str, raw: Redis, monitor: Monitor) -> None:
    for cmd in case["setup"]:
        raw.execute(*(resolve(a, case) for a in cmd))
    key, value = resolve(case["key"], case), resolve(case["value"], case)
    with fencelock.Client(redis_url) as client:
        lease = client.acquire(as_name(case["lock_name"]), ttl=10.0)
        assert str(lease.fence) == case["fence"]
        try:
            if "field" in case:
                lease.fenced_hset(key, resolve(case["field"], case), value)
            else:
                lease.fenced_set(key, value)
            got: Any = "ok"
        except fencelock.StaleFence as e:
            got = {"error": "StaleFence", "accepted": str(e.accepted)}
        lease.release()
    assert got == case["outcome"]
    monitor.sync()
    sent = case["sent"]
    calls = [c for c in script_calls(monitor.seen, SCRIPTS) if c["script"] == sent["script"]]
    assert [(c["keys"], c["args"]) for c in calls] == [
        ([resolve(k, case) for k in sent["keys"]], [resolve(a, case) for a in sent["args"]])
    ]
    fields = raw.execute("HGETALL", key)
    pairs = sorted(zip(fields[::2], fields[1::2]))
    assert pairs == sorted((resolve(f, case), resolve(v, case)) for f, v in case["final"])


def step_outcome(sc: Dict[str, Any], call_step: Dict[str, Any]) -> Dict[str, Any]:
    """The first non-null outcome after `call_step`."""
    steps = sc["steps"]
    for step in steps[steps.index(call_step) + 1 :]:
        if step.get("outcome") is not None:
            return step["outcome"] if isinstance(step["outcome"], dict) else {}
    return {}


def test_vectors_are_not_empty() -> None:
    assert len(KEYS) >= 20 and len(REAL) >= 5 and len(VALIDATION["ttl"]["valid"]) >= 5
