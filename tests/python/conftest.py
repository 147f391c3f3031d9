"""Fixtures of the cross-language Python tests: the harness's redis-servers
(FENCELOCK_TEST_REDIS_URL, FENCELOCK_TEST_REDLOCK_URLS) or private ones for
this session."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from fltest import Server, redis_url_or_server  # noqa: E402


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url, server = redis_url_or_server()
    yield url
    if server:
        server.stop()


@pytest.fixture(scope="session")
def redlock_urls() -> Iterator[list]:
    """FENCELOCK_TEST_REDLOCK_URLS (five independent servers), or five private ones."""
    env = os.environ.get("FENCELOCK_TEST_REDLOCK_URLS")
    if env:
        yield env.split(",")
        return
    servers = [Server() for _ in range(5)]
    yield [s.url for s in servers]
    for s in servers:
        s.stop()
