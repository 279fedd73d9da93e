"""The system's CAs are loaded at a run's first handshake, not at start-up.

Parsing the system store was 25-70 ms of every ``verify`` start-up, for runs that
mostly check plain ``http://`` instances. Deferring it must never mean a handshake
against an empty store: a server signed by a CA only the *system* store holds (here
``SSL_CERT_FILE``, which OpenSSL reads as the system store) verifies on every
transport and through the certificate probe, and a bad ``http.ca_bundle`` is still a
configuration error before any request.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import trustme

from artifactcheck.fetch.tls import build_ssl_context, probe_certificate
from artifactcheck.model.errors import ConfigError, FetchConnectError
from artifactcheck.model.settings import HttpSettings
from artifactcheck_sim.web import Site, WebFleet

NAME = "shop.example"


@pytest.fixture
def system_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A CA that only the 'system' store trusts: OpenSSL's SSL_CERT_FILE."""
    ca = trustme.CA()
    path = tmp_path / "system.pem"
    ca.cert_pem.write_to_path(str(path))
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    return ca


def _site(ca: trustme.CA, fleet: WebFleet, host: Callable[[], str]) -> str:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(NAME).configure_cert(ctx)
    return fleet.add(Site(overrides={"/a.js": b"tls ok"}), host(), ssl_context=ctx)


def _cas(ctx: ssl.SSLContext) -> int:
    return int(ctx.cert_store_stats()["x509_ca"])


def test_no_ca_is_parsed_before_a_handshake(system_ca: trustme.CA) -> None:
    ctx = build_ssl_context(HttpSettings())
    assert _cas(ctx) == 0
    assert ctx.verify_mode is ssl.CERT_REQUIRED and ctx.check_hostname


async def test_the_system_store_verifies_the_first_handshake(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], system_ca: trustme.CA
) -> None:
    site = _site(system_ca, fleet, host)
    async with make_fetcher(http={"host_header": NAME}) as f:
        assert _cas(f.ssl_context) == 0
        got = await f.get_asset(site, "a.js")
        assert got.ok, got.error
        assert _cas(f.ssl_context) == 1  # the system store, loaded once, before it


async def test_a_ca_outside_the_system_store_is_still_refused(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], system_ca: trustme.CA
) -> None:
    site = _site(trustme.CA(), fleet, host)
    async with make_fetcher(http={"host_header": NAME}) as f:
        got = await f.get_asset(site, "a.js")
    assert got.error_kind == "tls", got.error
    assert fleet.server(site).request_count == 0


async def test_the_probe_loads_the_system_store_too(
    fleet: WebFleet, host: Callable[[], str], system_ca: trustme.CA
) -> None:
    site = _site(system_ca, fleet, host)
    address, port = site.removeprefix("https://").rstrip("/").split(":")
    ctx = build_ssl_context(HttpSettings())
    info = await probe_certificate(
        address, int(port), server_name=NAME, ssl_context=ctx, timeout=10
    )
    assert info.issuer.startswith("OU=Testing CA")  # verified against the system store
    assert _cas(ctx) == 1
    with pytest.raises(FetchConnectError):  # and still verifies: another CA, refused
        other = _site(trustme.CA(), fleet, host)
        address, port = other.removeprefix("https://").rstrip("/").split(":")
        await probe_certificate(address, int(port), server_name=NAME, ssl_context=ctx, timeout=10)


def test_a_bad_ca_bundle_is_a_configuration_error_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="http.ca_bundle: cannot load"):
        build_ssl_context(HttpSettings(ca_bundle=str(bad)))
    with pytest.raises(ConfigError, match="http.ca_bundle: cannot load"):
        build_ssl_context(HttpSettings(ca_bundle=str(tmp_path / "missing.pem")))
