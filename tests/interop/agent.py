"""Interop agent, Python side: one fencelock.Client driven by JSON lines on
stdin (see tests/python/test_interop.py for the protocol), one reply line per
request on stdout. Usage: agent.py REDIS_URL[,URL2,...] (several: Redlock)"""

import json
import sys

import fencelock

ERRORS = {fencelock.NotAcquired: "NotAcquired", fencelock.LockLost: "LockLost", fencelock.RedisError: "Redis",
          fencelock.ClientClosed: "Closed"}


def side(client: fencelock.Client, req: dict):  # type: ignore[type-arg]
    """The request's `primitive` (a semaphore, a read-write lock side), or
    None for the mutex."""
    primitive = req.get("primitive")
    if primitive is None:
        return None
    if "semaphore" in primitive:
        return client.semaphore(req["name"], primitive["semaphore"])
    rw = client.rw_lock(req["name"])
    return rw.reader if primitive["rw"] == "read" else rw.writer


def main() -> None:
    urls = sys.argv[1].split(",")  # several URLs: Redlock
    client = fencelock.Client(urls if len(urls) > 1 else urls[0])
    leases = {}
    print(json.dumps({"ready": True, "lang": "python"}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        op, lease = req["op"], leases.get(req.get("lease"))
        try:
            if op == "acquire" or op == "try":
                ttl = req["ttl"] / 1000
                held = side(client, req)
                if op == "acquire":
                    wait = None if req.get("wait") is None else req["wait"] / 1000
                    renew = bool(req.get("auto_renew"))
                    if held is None:
                        got = client.acquire(req["name"], ttl=ttl, wait=wait, auto_renew=renew)
                    else:
                        got = held.acquire(ttl=ttl, wait=wait, auto_renew=renew)
                else:
                    got = client.try_acquire(req["name"], ttl=ttl) if held is None else held.try_acquire(ttl=ttl)
                if got is None:
                    reply = {"ok": True, "lease": None}
                else:
                    leases[str(len(leases))] = got
                    reply = {"ok": True, "lease": str(len(leases) - 1), "fence": str(got.fence)}
            elif op == "extend":
                lease.extend(*(() if req.get("ttl") is None else (req["ttl"] / 1000,)))
                reply = {"ok": True}
            elif op == "release":
                lease.release()
                reply = {"ok": True}
            elif op == "lost":
                reply = {"ok": True, "lost": lease.lost}
            else:
                reply = {"ok": False, "error": f"unknown op {op}"}
        except fencelock.LockError as e:
            reply = {"ok": False, "error": ERRORS[type(e)], "message": str(e)}
        print(json.dumps(reply), flush=True)
    client.close()


if __name__ == "__main__":
    main()
