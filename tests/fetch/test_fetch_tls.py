"""TLS: verification on by default, a custom CA bundle, SNI to an IP, certificate expiry."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trustme
from fetch_support import server_context

from artifactcheck.fetch.tls import days_left, probe_certificate, unverified_context
from artifactcheck.model.errors import FetchConnectError, FetchError, FetchTimeout
from artifactcheck_sim.web import Site, WebFleet

NAME = "shop.example"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def tls_site(ca: trustme.CA, fleet: WebFleet, host: Callable[[], str]) -> Iterator[str]:
    """An https site on an IP whose certificate names only shop.example."""
    yield fleet.add(
        Site(overrides={"/a.js": b"tls ok"}), host(), ssl_context=server_context(ca, NAME)
    )


async def test_host_header_sets_sni_and_verifies(
    make_fetcher, fleet: WebFleet, tls_site: str, ca_file: str
) -> None:
    async with make_fetcher(http={"ca_bundle": ca_file, "host_header": NAME}) as f:
        got = await f.get_asset(tls_site, "a.js")
    assert got.ok, got.error
    (request,) = fleet.server(tls_site).received
    assert request.sni == NAME and request.host == NAME
    assert tls_site.startswith("https://127.")


async def test_host_header_with_a_port(
    make_fetcher, fleet: WebFleet, tls_site: str, ca_file: str
) -> None:
    async with make_fetcher(http={"ca_bundle": ca_file}) as f:
        got = await f.get_asset(tls_site, "a.js", host_header=f"{NAME}:443")
    assert got.ok, got.error
    assert fleet.server(tls_site).received[0].sni == NAME


async def test_unknown_ca_is_a_tls_error(make_fetcher, fleet: WebFleet, tls_site: str) -> None:
    async with make_fetcher(http={"host_header": NAME}) as f:
        got = await f.get_asset(tls_site, "a.js")
    assert got.error_kind == "tls"
    assert "certificate verif" in (got.error or "")
    assert got.attempts == 1  # not retried: it would fail the same way
    assert fleet.server(tls_site).request_count == 0


async def test_name_mismatch_without_host_header(
    make_fetcher, fleet: WebFleet, tls_site: str, ca_file: str
) -> None:
    async with make_fetcher(http={"ca_bundle": ca_file}) as f:
        got = await f.get_asset(tls_site, "a.js")
    assert got.error_kind == "tls", got.error
    assert fleet.server(tls_site).request_count == 0


async def test_verification_can_be_turned_off(make_fetcher, tls_site: str) -> None:
    async with make_fetcher(http={"verify_tls": False}) as f:
        got = await f.get_asset(tls_site, "a.js")
    assert got.ok


async def test_certificate_for_the_ip_itself(
    make_fetcher, ca: trustme.CA, fleet: WebFleet, host: Callable[[], str], ca_file: str
) -> None:
    address = host()
    base = fleet.add(
        Site(overrides={"/a.js": b"x"}), address, ssl_context=server_context(ca, address)
    )
    async with make_fetcher(http={"ca_bundle": ca_file}) as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok, got.error


async def test_one_ssl_context_is_shared(make_fetcher, tls_site: str, ca_file: str) -> None:
    async with make_fetcher(http={"ca_bundle": ca_file, "host_header": NAME}) as f:
        context = f.ssl_context
        for _ in range(3):
            assert (await f.get_asset(tls_site, "a.js")).ok
        assert f.ssl_context is context


async def test_tls_connection_to_a_plain_http_server(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/a.js": b"x"}), host())
    async with make_fetcher(retry={"attempts": 1}) as f:
        got = await f.get_asset(base.replace("http://", "https://"), "a.js")
    assert got.error_kind == "tls", got.error


# ----------------------------------------------------------------------------- probe


def _endpoint(base: str) -> tuple[str, int]:
    host, port = base.split("/")[2].rsplit(":", 1)
    return host, int(port)


async def test_probe_reads_expiry_and_sends_sni(
    ca: trustme.CA, fleet: WebFleet, host: Callable[[], str], ca_file: str
) -> None:
    not_after = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
    base = fleet.add(Site(), host(), ssl_context=server_context(ca, NAME, not_after=not_after))
    address, port = _endpoint(base)
    verifying = ssl.create_default_context(cafile=ca_file)
    info = await probe_certificate(
        address, port, server_name=NAME, ssl_context=verifying, timeout=2
    )
    assert info.not_after == not_after
    assert info.endpoint == f"{address}:{port}"
    assert "trustme" in info.issuer
    assert days_left(info, now=datetime(2031, 5, 1, 3, 2, 1, tzinfo=UTC)) == pytest.approx(3)
    await asyncio.sleep(0.05)  # the server records the name once the handshake completes
    assert fleet.server(base).request_count == 0  # a handshake, not a request


async def test_probe_reads_an_expired_certificate_without_verifying(
    ca: trustme.CA, fleet: WebFleet, host: Callable[[], str], ca_file: str
) -> None:
    expired = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    base = fleet.add(Site(), host(), ssl_context=server_context(ca, NAME, not_after=expired))
    address, port = _endpoint(base)
    info = await probe_certificate(address, port, server_name=NAME, ssl_context=None, timeout=2)
    assert info.not_after == expired
    assert days_left(info) < -2.9
    verifying = ssl.create_default_context(cafile=ca_file)
    with pytest.raises(FetchConnectError, match="expired"):
        await probe_certificate(address, port, server_name=NAME, ssl_context=verifying, timeout=2)


async def test_probe_unknown_ca_with_a_verifying_context(tls_site: str) -> None:
    address, port = _endpoint(tls_site)
    with pytest.raises(FetchConnectError, match="verification failed"):
        await probe_certificate(
            address, port, server_name=NAME, ssl_context=ssl.create_default_context(), timeout=2
        )


async def test_probe_errors_are_typed(fleet: WebFleet, host: Callable[[], str]) -> None:
    plain = fleet.add(Site(), host())
    address, port = _endpoint(plain)
    with pytest.raises(FetchConnectError):
        await probe_certificate(address, port, server_name=None, ssl_context=None, timeout=2)
    closed = host()
    with socket.socket() as sock:
        sock.bind((closed, 0))
        free = sock.getsockname()[1]
    with pytest.raises(FetchConnectError, match="cannot connect"):
        await probe_certificate(closed, free, server_name=None, ssl_context=None, timeout=2)
    silent = socket.socket()  # accepts TCP, never speaks TLS
    try:
        silent.bind((host(), 0))
        silent.listen(4)
        address, port = silent.getsockname()
        with pytest.raises(FetchTimeout):
            await probe_certificate(
                address, port, server_name=None, ssl_context=unverified_context(), timeout=0.3
            )
    finally:
        silent.close()
    assert issubclass(FetchTimeout, FetchError)


async def test_tls_connections_are_kept_alive(
    make_fetcher, fleet: WebFleet, tls_site: str, ca_file: str
) -> None:
    """A silent TLS socket is reusable: post-handshake records (session tickets) are
    read with the first response and do not condemn the connection."""
    async with make_fetcher(http={"ca_bundle": ca_file, "host_header": NAME}) as f:
        for _ in range(3):
            got = await f.get_asset(tls_site, "a.js")
            assert got.ok, got.error
            await asyncio.sleep(0.05)  # time for anything late to arrive
    assert fleet.server(tls_site).connections_total == 1
