"""TLS against `redis-server --tls-port` with ci/tls.sh's certificates: a
private CA works when given (path, os.PathLike or PEM), mutual TLS works and
is required where configured, a wrong CA and a certificate for another host
fail clearly, and nothing connects unverified without the loud option."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import fencelock
from conftest import Server
from fltest import claim_ports, harness_env, release_ports

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def certs() -> Path:
    made = os.environ.get("FENCELOCK_TEST_TLS_DIR") or tempfile.mkdtemp(prefix="fencelock-tls-py-")
    subprocess.run(["bash", str(ROOT / "ci" / "tls.sh"), made], check=True, stdout=subprocess.DEVNULL)
    return Path(made)


class TlsServer:
    """A redis-server presenting `cert` (server or otherhost) on a TLS port
    of its own (its plain port only serves the launcher's readiness check)."""

    def __init__(self, certs: Path, cert: str, auth_clients: str) -> None:
        self.port = claim_ports()[0]
        self.server = Server(
            "--tls-port", str(self.port),
            "--tls-cert-file", str(certs / f"{cert}.crt"), "--tls-key-file", str(certs / f"{cert}.key"),
            "--tls-ca-cert-file", str(certs / "ca.crt"), "--tls-auth-clients", auth_clients)

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.server.stop()
        release_ports(self.port)


@pytest.fixture
def tls_server(certs: Path) -> Iterator[Any]:
    servers: List[TlsServer] = []

    def make(cert: str = "server", auth_clients: str = "no") -> TlsServer:
        server = TlsServer(certs, cert, auth_clients)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def round_trip(client: fencelock.Client, name: str) -> None:
    lease = client.acquire(name, ttl=5)
    lease.extend()
    lease.release()


def test_a_private_ca_as_a_path_a_pathlike_or_pem_works(tls_server: Any, certs: Path, name: str) -> None:
    server = tls_server()
    ca = certs / "ca.crt"
    for given in (str(ca), ca, ca.read_bytes(), ca.read_text()):
        with fencelock.Client(server.url, tls_ca=given) as client:
            round_trip(client, name)


def test_the_system_store_does_not_trust_a_private_ca(tls_server: Any, name: str) -> None:
    server = tls_server()
    with fencelock.Client(server.url) as client:
        with pytest.raises(fencelock.RedisError, match="certificate"):
            client.acquire(name, ttl=5, wait=0)


def test_a_wrong_ca_fails_clearly(tls_server: Any, certs: Path, name: str) -> None:
    server = tls_server()
    with fencelock.Client(server.url, tls_ca=certs / "other-ca.crt") as client:
        with pytest.raises(fencelock.RedisError, match="UnknownIssuer"):
            client.acquire(name, ttl=5, wait=0)


def test_a_certificate_for_another_host_fails_clearly(tls_server: Any, certs: Path, name: str) -> None:
    server = tls_server("otherhost")
    with fencelock.Client(server.url, tls_ca=certs / "ca.crt") as client:
        with pytest.raises(fencelock.RedisError, match="not valid for name"):
            client.acquire(name, ttl=5, wait=0)


def test_mutual_tls_works_and_is_required_where_configured(tls_server: Any, certs: Path, name: str) -> None:
    server = tls_server(auth_clients="yes")
    with fencelock.Client(server.url, tls_ca=certs / "ca.crt") as client:
        with pytest.raises(fencelock.RedisError):
            client.acquire(name, ttl=5, wait=0)
    with fencelock.Client(server.url, tls_ca=certs / "ca.crt", tls_cert=certs / "client.crt",
                          tls_key=certs / "client.key") as client:
        round_trip(client, name)


def test_skipping_verification_takes_the_loud_option(tls_server: Any, certs: Path, name: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fencelock")
    server = tls_server("otherhost")
    with pytest.raises(ValueError, match="dangerously"):
        fencelock.Client(server.url + "#insecure")
    verified = tls_server()
    with fencelock.Client(verified.url, tls_ca=certs / "ca.crt") as client:
        round_trip(client, name)
    assert not [r for r in caplog.records if "verification is OFF" in r.getMessage()], "only the option warns"
    with fencelock.Client(server.url, tls_dangerously_skip_verification=True) as client:
        round_trip(client, name)
    # close() has handed every queued record to logging.
    loud = [r for r in caplog.records if r.name == "fencelock" and "verification is OFF" in r.getMessage()]
    # Once per client: checking the options at construction does not warn,
    # connecting does.
    assert len(loud) == 1, [r.getMessage() for r in caplog.records]
    assert loud[0].levelno == logging.WARNING
    assert "dangerously_skip_verification" in loud[0].getMessage()


def test_bad_tls_options_are_errors_at_construction(certs: Path) -> None:
    with pytest.raises(ValueError):
        fencelock.Client("rediss://127.0.0.1:1/0", tls_cert=certs / "client.crt")
    with pytest.raises(ValueError):
        fencelock.Client("rediss://127.0.0.1:1/0", tls_ca="/nonexistent/ca.crt")
    with pytest.raises(ValueError):
        fencelock.Client("redis://127.0.0.1:1/0", tls_ca=certs / "ca.crt")
    with pytest.raises(TypeError):
        fencelock.Client("rediss://127.0.0.1:1/0", tls_ca=42)  # type: ignore[arg-type]


def test_a_server_name_override_verifies_that_name(tls_server: Any, certs: Path, name: str) -> None:
    # The certificate names other.invalid only; the URL's host is 127.0.0.1.
    server = tls_server("otherhost")
    with fencelock.Client(server.url, tls_ca=certs / "ca.crt", tls_server_name="other.invalid") as client:
        round_trip(client, name)
    for wrong in (None, "redis.internal"):
        with fencelock.Client(server.url, tls_ca=certs / "ca.crt", tls_server_name=wrong) as client:
            with pytest.raises(fencelock.RedisError, match="not valid for name"):
                client.acquire(name, ttl=5, wait=0)
    # Only the name changes: the chain is still checked.
    with fencelock.Client(server.url, tls_ca=certs / "other-ca.crt", tls_server_name="other.invalid") as client:
        with pytest.raises(fencelock.RedisError, match="UnknownIssuer"):
            client.acquire(name, ttl=5, wait=0)


def test_bad_server_names_are_errors_at_construction() -> None:
    url = "rediss://127.0.0.1:1/0"
    with pytest.raises(ValueError, match="server name"):
        fencelock.Client(url, tls_server_name="not a host name")
    with pytest.raises(ValueError, match="server name"):
        fencelock.Client(url, tls_server_name="other.invalid", tls_dangerously_skip_verification=True)
    with pytest.raises(ValueError, match="cluster"):
        fencelock.Client(url, topology="cluster", tls_server_name="other.invalid")
    with pytest.raises(TypeError, match="tls_server_name"):
        fencelock.Client(url, tls_server_name=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("topology", ["cluster", "sentinel"])
def test_tls_options_apply_to_a_cluster_and_to_sentinels(topology: str, name: str) -> None:
    # The harness's TLS cluster and TLS Sentinel: private CA, client
    # certificates required, TLS on every connection.
    certs = Path(harness_env("FENCELOCK_TEST_TLS_DIR"))
    if topology == "cluster":
        urls = harness_env("FENCELOCK_TEST_TLS_CLUSTER_URLS").split(",")
        where: Dict[str, Any] = {"topology": "cluster"}
    else:
        urls = harness_env("FENCELOCK_TEST_TLS_SENTINEL_URLS").split(",")
        where = {"topology": "sentinel", "service": harness_env("FENCELOCK_TEST_SENTINEL_SERVICE")}
    mtls: Dict[str, Any] = {"tls_cert": certs / "client.crt", "tls_key": certs / "client.key"}
    with fencelock.Client(urls, **where, tls_ca=certs / "ca.crt", **mtls) as client:
        for i in range(12):  # names on every shard
            round_trip(client, f"{name}-{i}")
    with fencelock.Client(urls, **where, **mtls) as client:
        with pytest.raises(fencelock.RedisError, match="UnknownIssuer"):
            client.acquire(name, ttl=5, wait=0)
    with fencelock.Client(urls, **where, tls_ca=certs / "ca.crt") as client:
        with pytest.raises(fencelock.RedisError):
            client.acquire(name, ttl=5, wait=0)
    with fencelock.Client(urls, **where, tls_dangerously_skip_verification=True, **mtls) as client:
        round_trip(client, name)
