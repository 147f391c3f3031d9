"""Fixtures of the cross-language Python tests: the harness's redis-server
(FENCELOCK_TEST_REDIS_URL) or a private one for this session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from fltest import redis_url_or_server  # noqa: E402


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url, server = redis_url_or_server()
    yield url
    if server:
        server.stop()
