"""`make demo`: Python and Node workers share per-resource fencelock locks
while processing one job queue, writing to per-resource ledgers with
fencelock's fenced writes (`lease.fenced_hset` / `lease.fencedHSet`: a ledger
refuses a stale fencing token). Mid-run one lock holder is SIGKILLed (its lock
expires and is taken over), another is SIGSTOPped past its TTL and resumed
(its late write must be refused: its lease knows it expired), and a third,
slow one has its lock force-released by an "operator" who then writes to
that ledger (the slow holder's write, sent with a still-valid lease, must be
refused by the ledger itself). Prints progress, then a summary; exits 1 if
an invariant broke.

Environment: REDIS_URL (default: a private redis-server on a free loopback
port, stopped at the end), DEMO_JOBS (300), DEMO_RESOURCES (4), DEMO_TTL_MS
(1000), DEMO_WORKERS (3 per language); DEMO_UNFENCED=1 makes the workers
write with a plain HSET instead, to see the invariant checks fail; DEMO_WASM=1 runs the first
Node worker on fencelock/wasm (the WebAssembly core over an ioredis client).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
from fltest import Redis, Server  # noqa: E402

import fencelock  # noqa: E402

JOBS = int(os.environ.get("DEMO_JOBS", "300"))
RESOURCES = int(os.environ.get("DEMO_RESOURCES", "4"))
TTL_MS = int(os.environ.get("DEMO_TTL_MS", "1000"))
PER_LANG = int(os.environ.get("DEMO_WORKERS", "3"))
WASM = os.environ.get("DEMO_WASM") == "1"
TIME_LIMIT = 60.0

T0 = time.time()


def say(msg: str) -> None:
    print(f"[{time.time() - T0:5.1f}s] {msg}", flush=True)


class Worker:
    def __init__(self, name: str, lang: str, url: str, ns: str, events: "queue.Queue[Dict[str, Any]]") -> None:
        self.name, self.lang = name, lang
        script = HERE / ("worker.py" if lang == "python" else "worker.js")
        exe = sys.executable if lang == "python" else "node"
        flavour = {"FENCELOCK_NODE_FLAVOUR": "wasm"} if lang == "wasm" else {}
        self.proc = subprocess.Popen(
            [exe, str(script), url, ns, name, str(TTL_MS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **flavour},
        )
        self.fate = ""  # "SIGKILL" / "SIGSTOP+SIGCONT"
        threading.Thread(target=self._read, args=(events,), daemon=True).start()
        threading.Thread(target=self._stderr, daemon=True).start()

    def _stderr(self) -> None:
        assert self.proc.stderr
        for line in self.proc.stderr:  # e.g. fencelock's "lease lost" warning
            say(f"{self.name} (stderr): {line.rstrip()}")

    def _read(self, events: "queue.Queue[Dict[str, Any]]") -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            if line.startswith("{"):
                events.put(json.loads(line))
        events.put({"ev": "exit", "w": self.name, "t": time.time()})


class Demo:
    def __init__(self, url: str) -> None:
        self.url = url
        self.redis = Redis(url)
        self.ns = f"demo:{uuid.uuid4().hex[:8]}:"
        self.events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.log: List[Dict[str, Any]] = []
        self.done: Dict[str, int] = {}
        self.problems: List[str] = []
        self.killed: Optional[Dict[str, Any]] = None  # the SIGKILLed holder's acquire event
        self.paused: Optional[Dict[str, Any]] = None  # the SIGSTOPped holder's acquire event
        self.resumed = False
        self.forced: Optional[Dict[str, Any]] = None  # the force-released holder's acquire event
        self.ready = 0

    def run(self) -> int:
        ns, r = self.ns, self.redis
        r.execute("RPUSH", ns + "jobs", *[f"job-{i:03d} acct-{i % RESOURCES}" for i in range(JOBS)])
        names = [(f"py-{i}", "python") for i in range(1, PER_LANG + 1)]
        names += [(f"node-{i}", "wasm" if WASM and i == 1 else "node") for i in range(1, PER_LANG + 1)]
        self.workers = {n: Worker(n, lang, self.url, ns, self.events) for n, lang in names}
        say(f"{JOBS} jobs on {RESOURCES} resources, {len(self.workers)} workers "
            f"({PER_LANG} Python, {PER_LANG} Node), lock TTL {TTL_MS} ms, namespace {ns}")
        self.kill_victim, self.pause_victim = f"node-{min(2, PER_LANG)}", f"py-{min(2, PER_LANG)}"
        self.force_victim = f"node-{min(3, PER_LANG)}"
        next_progress = time.time()
        try:
            while self.total() < JOBS:
                if time.time() - T0 > TIME_LIMIT:
                    self.problems.append(f"not finished within {TIME_LIMIT:.0f} s")
                    break
                try:
                    self.handle(self.events.get(timeout=0.1))
                except queue.Empty:
                    pass
                if time.time() >= next_progress:
                    self.progress()
                    next_progress = time.time() + 0.5
            self.progress()
        finally:
            r.execute("SET", ns + "stop", 1)
            for w in self.workers.values():
                if w.proc.poll() is None:
                    os.kill(w.proc.pid, signal.SIGCONT)  # never leave one stopped
            for w in self.workers.values():
                try:
                    w.proc.wait(10)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    self.problems.append(f"{w.name} did not exit")
            while not self.events.empty():
                self.handle(self.events.get())
        return self.summary()

    def total(self) -> int:
        return sum(self.done.values())

    # ---------------------------------------------------------- events

    def handle(self, e: Dict[str, Any]) -> None:
        self.log.append(e)
        w, ev = e["w"], e["ev"]
        if ev == "wrote":
            self.done[w] = self.done.get(w, 0) + 1
        if ev == "ready":
            self.ready += 1
            if self.ready == len(self.workers):
                say("all workers ready")
        if ev == "exit" and self.workers[w].fate != "SIGKILL" and self.workers[w].proc.wait() != 0:
            self.problems.append(f"{w} exited with status {self.workers[w].proc.returncode}")
        if ev == "acquired":
            self.on_acquired(e)
        if ev == "stale" and e["by"] == "ledger":
            say(f"ledger REJECTED {w}'s late write for {e['res']}: fence {e['fence']} < {e['last']} (job {e['job']} re-queued)")
        elif ev == "stale":
            say(f"lease REFUSED {w}'s late write for {e['res']}: it knows its lock expired (job {e['job']} re-queued)")
        if ev == "stale" and self.forced and w == self.forced["w"] and e["res"] == self.forced["res"]:
            self.forced["refused_by"] = e["by"]
        if ev == "lost" and self.paused and w == self.paused["w"]:
            say(f"{w}: release says LockLost, as it should")
        if (ev == "wrote" and self.paused and not self.resumed and e["res"] == self.paused["res"]
                and e["fence"] > self.paused["fence"]):  # a takeover, not an earlier holder's write
            say(f"{w} took over {e['res']} with fence {e['fence']} (> {self.paused['fence']}) and wrote; SIGCONT {self.paused['w']}")
            self.resumed = True
            os.kill(self.workers[self.paused["w"]].proc.pid, signal.SIGCONT)

    def on_acquired(self, e: Dict[str, Any]) -> None:
        w = e["w"]
        if self.killed and not self.killed.get("taken") and e["res"] == self.killed["res"]:
            self.killed["taken"] = e
            after = (e["t"] - self.killed["killed_at"]) * 1000
            say(f"{w} took over {e['res']} from the dead {self.killed['w']} with fence {e['fence']}, {after:.0f} ms after the kill")
        if not self.killed and w == self.kill_victim and self.total() >= JOBS * 0.15:
            self.workers[w].proc.kill()
            self.workers[w].fate = "SIGKILL"
            self.killed = dict(e, killed_at=time.time())
            say(f"SIGKILL {w} while it holds {e['res']} (fence {e['fence']}); the lock stays until its TTL ends")
            self.workers[w].proc.wait()
            self.requeue(w)
        if not self.paused and w == self.pause_victim and self.total() >= JOBS * 0.35:
            if not e["slow"]:
                self.redis.execute("SET", self.ns + "slow:" + w, 1)  # its next job runs long enough to be caught
                return
            os.kill(self.workers[w].proc.pid, signal.SIGSTOP)
            self.workers[w].fate = "SIGSTOP+SIGCONT"
            self.paused = e
            say(f"SIGSTOP {w} while it holds {e['res']} (fence {e['fence']}), past its {TTL_MS} ms TTL")
        if (not self.forced and w == self.force_victim and w not in (self.kill_victim, self.pause_victim)
                and self.total() >= JOBS * 0.55):
            if not e["slow"]:
                self.redis.execute("SET", self.ns + "slow:" + w, 1)
                return
            self.force_release(e)

    def force_release(self, e: Dict[str, Any]) -> None:
        """An operator takes the lock back from a slow holder and writes to
        the ledger with a newer fence; the slow holder's lease stays valid,
        so its write reaches the ledger, which must refuse it."""
        lock = self.ns + e["res"]
        with fencelock.Client(self.url) as operator:
            fence = operator.force_release(lock)
            with operator.lock(lock, ttl=TTL_MS / 1000, wait=5.0) as lease:
                lease.fenced_hset(self.ns + "ledger:" + e["res"], "operator", "took it back")
        self.forced = dict(e)
        say(f"operator force-released {e['res']} from the slow {e['w']} (fence {e['fence']}; new fence {fence}) and wrote")

    def requeue(self, w: str) -> None:
        """The dead worker's unfinished job goes back to the queue."""
        for job in self.redis.execute("LRANGE", self.ns + "processing:" + w, 0, -1):
            job_id, resource = job.split()
            if not self.redis.execute("HEXISTS", self.ns + "ledger:" + resource.decode(), job_id):
                self.redis.execute("LPUSH", self.ns + "jobs", job)
                say(f"re-queued {job.decode()} from the dead {w}")
        self.redis.execute("DEL", self.ns + "processing:" + w)

    def progress(self) -> None:
        per = " ".join(f"{n} {self.done.get(n, 0):3d}" for n in self.workers)
        say(f"jobs {self.total():3d}/{JOBS} | {per}")

    # ---------------------------------------------------------- summary

    def summary(self) -> int:
        r, ns = self.redis, self.ns
        # What the ledgers hold (jobs per resource, beside each one's "fence"),
        # and what the workers reported: writes accepted and refused.
        done_jobs = set()
        for i in range(RESOURCES):
            fields = r.execute("HKEYS", f"{ns}ledger:acct-{i}")
            done_jobs.update(f for f in fields if f.startswith(b"job-"))
        wrote = [e for e in self.log if e["ev"] == "wrote"]
        stale = sum(1 for e in self.log if e["ev"] == "stale")
        per_job: Dict[str, int] = {}
        for e in wrote:
            per_job[e["job"]] = per_job.get(e["job"], 0) + 1
        double = sum(1 for n in per_job.values() if n > 1)

        # Handoffs: consecutive holders of a resource that differ; latency =
        # from the previous holder's release to the acquire of one who was
        # already waiting when it was released.
        handoffs, latencies = 0, []
        by_res: Dict[str, List[Dict[str, Any]]] = {}
        for e in self.log:
            if e["ev"] in ("acquired", "released", "lost"):
                by_res.setdefault(e["res"], []).append(e)
        for evs in by_res.values():
            holder, released_at = None, None
            for e in sorted(evs, key=lambda e: e["t"]):
                if e["ev"] == "acquired":
                    if holder is not None and holder != e["w"]:
                        handoffs += 1
                        if released_at is not None and e["waited_from"] < released_at:
                            latencies.append((e["t"] - released_at) * 1000)
                    holder, released_at = e["w"], None
                elif e["ev"] == "released":
                    released_at = e["t"]

        print()
        print(f"{'worker':<8} {'language':<8} {'jobs':>5}  fate")
        for n, w in self.workers.items():
            print(f"{n:<8} {w.lang:<8} {self.done.get(n, 0):>5}  {w.fate}")
        for lang in ("python", "node", "wasm") if WASM else ("python", "node"):
            jobs = sum(self.done.get(n, 0) for n, w in self.workers.items() if w.lang == lang)
            print(f"{'all':<8} {lang:<8} {jobs:>5}")
        print()
        median = f"{statistics.median(latencies):.1f} ms" if latencies else "n/a"
        rows = [
            ("jobs done (ledger)", f"{len(done_jobs)}/{JOBS}"),
            ("lock handoffs", str(handoffs)),
            ("median handoff latency", f"{median} (release -> waiter's acquire, {len(latencies)} samples)"),
            ("stale writes rejected", str(stale)),
            ("double-processed jobs", str(double)),
        ]
        for k, v in rows:
            print(f"{k:<24} {v}")

        # Invariants.
        if double:
            self.problems.append(f"{double} job(s) processed twice")
        if len(done_jobs) != JOBS:
            self.problems.append(f"{JOBS - len(done_jobs)} job(s) never done")
        # Accepted writes, in the order they were reported: a holder reports
        # its write before releasing, and the next holder writes only after
        # acquiring, so per resource the fences must increase.
        last: Dict[str, int] = {}
        for e in sorted(wrote, key=lambda e: e["t"]):
            res, fence = e["res"], int(e["fence"])
            if fence <= last.get(res, 0):
                self.problems.append(f"ledger accepted fence {fence} on {res} after {last[res]}")
            last[res] = fence
        if not self.killed or not self.killed.get("taken"):
            self.problems.append("the SIGKILLed holder's lock was never taken over")
        elif self.killed["taken"]["fence"] <= self.killed["fence"]:
            self.problems.append("the takeover after the SIGKILL did not get a larger fence")
        if not self.paused:
            self.problems.append("no holder was paused")
        elif not any(e["ev"] == "stale" and e["w"] == self.paused["w"] for e in self.log):
            self.problems.append("the paused holder's late write was not rejected")
        if self.force_victim not in (self.kill_victim, self.pause_victim):
            if not self.forced:
                self.problems.append("no holder was force-released")
            elif self.forced.get("refused_by") != "ledger":
                self.problems.append("the force-released holder's write was not refused by the ledger")
        print()
        if self.problems:
            for p in self.problems:
                print(f"INVARIANT BROKEN: {p}")
            return 1
        print("OK: every job done exactly once; the late writes were fenced off")
        return 0

    def cleanup(self) -> None:
        keys = self.redis.execute("KEYS", self.ns + "*") + self.redis.execute("KEYS", "fencelock:{" + self.ns + "*")
        if keys:
            self.redis.execute("DEL", *keys)
        self.redis.close()


def main() -> int:
    url, server = os.environ.get("REDIS_URL"), None
    if not url:
        server = Server()
        url = server.url
        say(f"started redis-server on {url} (stopped at the end; set REDIS_URL to use yours)")
    try:
        demo = Demo(url)
        try:
            return demo.run()
        finally:
            demo.cleanup()
    finally:
        if server:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
