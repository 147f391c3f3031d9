"""Random passwords through every error path — a malformed URL, a wrong
password, an unreachable server, a TLS failure — never appear (raw or
percent-encoded) in an exception's str or repr, a client's repr, or a log
record."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any, List, Optional
from urllib.parse import quote

import pytest

import fencelock
from conftest import Server
from test_tls import certs, tls_server  # noqa: F401  (fixtures)

ALPHABET = "abcdefXYZ0123456789/?#@:%!$&'()*+,;= -._~[]"


def passwords(n: int) -> List[str]:
    return ["".join(secrets.choice(ALPHABET) for _ in range(8 + secrets.randbelow(16))) for _ in range(n)]


def texts(error: BaseException) -> List[str]:
    return [str(error), repr(error)]


def test_random_passwords_never_leak(tls_server: Any, certs: Path) -> None:  # noqa: F811
    records: List[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("fencelock")
    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    server = Server(password="the-right-one")
    down = Server()
    down.kill()
    tls = tls_server()
    seen: List[tuple[str, str, str]] = []
    tried = passwords(25)
    try:
        for pw in tried:
            enc = quote(pw, safe="")
            for url in (f"redis://u:{pw}@127.0.0.1:{server.port}/0", f"redis://u:{pw}@127.0.0.1:99999/0",
                        f"redis://u:{pw}@127.0.0.1:{server.port}/nodb"):
                try:
                    client = fencelock.Client(url)
                except ValueError as e:
                    seen += [("bad url", pw, t) for t in texts(e)]
                    continue
                seen.append(("repr", pw, repr(client)))
                with pytest.raises(fencelock.LockError) as info:
                    client.acquire("secrets", ttl=1, wait=0)
                seen += [("raw url", pw, t) for t in texts(info.value)]
                client.close()
            cases: List[tuple[str, str, Optional[Path]]] = [
                ("wrong password", f"redis://:{enc}@127.0.0.1:{server.port}/0", None),
                ("unreachable", f"redis://:{enc}@127.0.0.1:{down.port}/0", None),
                ("tls", f"rediss://:{enc}@127.0.0.1:{tls.port}/0", certs / "other-ca.crt"),
            ]
            for label, url, ca in cases:
                made = (fencelock.Client(url, connect_timeout=0.5, tls_ca=ca) if ca is not None
                        else fencelock.Client(url, connect_timeout=0.5))
                with made as client:
                    seen.append(("repr", pw, repr(client)))
                    with pytest.raises(fencelock.RedisError) as info:
                        client.acquire("secrets", ttl=1, wait=0)
                    seen += [(label, pw, t) for t in texts(info.value)]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        server.stop()
        down.stop()
    assert len(seen) >= 25 * 4
    for path, pw, text in seen:
        for form in (pw, quote(pw, safe="")):
            assert form not in text, f"{path}: {pw!r} leaked in {text!r}"
    for record in records:
        message = record.getMessage()
        for pw in tried:
            for form in (pw, quote(pw, safe="")):
                assert form not in message, f"log: {pw!r} leaked in {message!r}"
