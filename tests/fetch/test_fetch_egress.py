"""The egress hook: every new connection goes only to an address the policy approved.

A stand-in policy (refuse 127.0.0.2, allow 127.0.0.3) against real loopback servers;
the refused server must see no connection at all. Names are resolved once, and the
connection goes to the address that was checked (no DNS rebinding in between).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from fetch_support import RecordingSleep, server_context, settings

from artifactcheck.fetch import Fetcher
from artifactcheck.fetch.tls import probe_certificate
from artifactcheck.model.errors import UnsafeReferenceError
from artifactcheck.model.settings import RetrySettings
from artifactcheck_sim.web import Site, WebFleet

REFUSED, ALLOWED = "127.0.0.2", "127.0.0.3"


class Policy:
    """Refuses REFUSED, allows everything else; records every question."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, int]] = []

    def __call__(self, host: str, ip: str, port: int) -> str | None:
        self.asked.append((host, ip, port))
        return "another tenant's address" if ip == REFUSED else None


@pytest.fixture
def sites(fleet: WebFleet) -> tuple[str, str]:
    refused = fleet.add(Site(overrides={"/a.js": b"secret"}), REFUSED)
    allowed = fleet.add(Site(overrides={"/a.js": b"public"}), ALLOWED)
    return refused, allowed


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names answered from a table, one answer per lookup (the last one repeats)."""
    answers: dict[str, list[str]] = {}
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(host, str) and host in answers:
            lookups.append(host)
            queue = answers[host]
            ip = queue.pop(0) if len(queue) > 1 else queue[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ip, port))]
        return real(host, port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    answers["__lookups__"] = lookups
    return answers


def port_of(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


async def test_a_refused_address_gets_no_connection(
    make_fetcher, fleet: WebFleet, sites: tuple[str, str]
) -> None:
    refused, allowed = sites
    policy = Policy()
    async with make_fetcher(egress=policy) as f:
        bad = await f.get_asset(refused, "a.js")
        good = await f.get_asset(allowed, "a.js")
        again = await f.get_asset(allowed, "a.js")  # pooled: no new connection, no question
    assert bad.error_kind == "egress" and not bad.ok
    assert "another tenant's address" in (bad.error or "") and REFUSED in (bad.error or "")
    assert bad.attempts == 1  # never retried
    assert good.ok and again.ok
    assert fleet.server(refused).connections_total == 0
    assert fleet.server(refused).request_count == 0
    assert fleet.server(allowed).connections_total == 1
    assert policy.asked == [
        (REFUSED, REFUSED, port_of(refused)),
        (ALLOWED, ALLOWED, port_of(allowed)),
    ]


async def test_a_name_is_resolved_once_and_the_checked_address_is_used(
    make_fetcher, fleet: WebFleet, sites: tuple[str, str], resolver: dict[str, list[str]]
) -> None:
    refused, allowed = sites
    port = port_of(allowed)
    # the first answer is allowed; any later lookup would rebind the name to REFUSED
    resolver["shop.test"] = [ALLOWED, REFUSED]
    policy = Policy()
    async with make_fetcher(egress=policy) as f:
        got = await f.get_asset(f"http://shop.test:{port}/", "a.js")
    assert got.ok, got.error
    assert resolver["__lookups__"] == ["shop.test"]
    assert policy.asked == [("shop.test", ALLOWED, port)]
    (request,) = fleet.server(allowed).received
    assert request.host == f"shop.test:{port}"  # the name is kept for the Host header


async def test_a_name_resolving_to_a_refused_address_gets_no_connection(
    make_fetcher, fleet: WebFleet, sites: tuple[str, str], resolver: dict[str, list[str]]
) -> None:
    refused, _ = sites
    resolver["evil.test"] = [REFUSED]
    async with make_fetcher(egress=Policy()) as f:
        got = await f.get_asset(f"http://evil.test:{port_of(refused)}/", "a.js")
    assert got.error_kind == "egress" and "evil.test (127.0.0.2)" in (got.error or "")
    assert fleet.server(refused).connections_total == 0


async def test_tls_keeps_the_name_for_sni(
    make_fetcher,
    fleet: WebFleet,
    resolver: dict[str, list[str]],
    tmp_path: Path,
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    site = fleet.add(
        Site(overrides={"/a.js": b"tls"}), ALLOWED, ssl_context=server_context(ca, "shop.test")
    )
    resolver["shop.test"] = [ALLOWED]
    async with make_fetcher(http={"ca_bundle": str(ca_file)}, egress=Policy()) as f:
        got = await f.get_asset(f"https://shop.test:{port_of(site)}/", "a.js")
    assert got.ok, got.error
    (request,) = fleet.server(site).received
    assert request.sni == "shop.test"


async def test_a_failing_policy_refuses(
    make_fetcher, fleet: WebFleet, sites: tuple[str, str]
) -> None:
    _, allowed = sites

    def broken(host: str, ip: str, port: int) -> str | None:
        raise LookupError("policy store down")

    async with make_fetcher(egress=broken) as f:
        got = await f.get_asset(allowed, "a.js")
    assert got.error_kind == "egress" and "LookupError" in (got.error or "")
    assert fleet.server(allowed).connections_total == 0


def test_an_injected_transport_refuses_a_policy_it_cannot_enforce() -> None:
    with pytest.raises(ValueError, match="egress policy .* not an injected transport"):
        Fetcher(
            http=settings(),
            retry=RetrySettings(),
            egress=Policy(),
            transport=httpx.MockTransport(lambda request: httpx.Response(200)),
            sleep=RecordingSleep(),
        )


async def test_a_certificate_probe_asks_the_policy_too(
    fleet: WebFleet, resolver: dict[str, list[str]]
) -> None:
    """A certificate probe is one more connection: refused, it is never made."""
    ca = trustme.CA()
    context = server_context(ca, "shop.test")
    refused = fleet.add(Site(), REFUSED, ssl_context=context)
    allowed = fleet.add(Site(), ALLOWED, ssl_context=context)
    policy = Policy()
    with pytest.raises(UnsafeReferenceError, match="another tenant's address"):
        await probe_certificate(
            REFUSED, port_of(refused), server_name=None, ssl_context=None, timeout=2, egress=policy
        )
    assert fleet.server(refused).connections_total == 0
    resolver["shop.test"] = [ALLOWED, REFUSED]
    cert = await probe_certificate(
        "shop.test", port_of(allowed), server_name=None, ssl_context=None, timeout=2, egress=policy
    )
    assert cert.endpoint == f"shop.test:{port_of(allowed)}" and cert.not_after is not None
    assert resolver["__lookups__"] == ["shop.test"]
    assert policy.asked[-1] == ("shop.test", ALLOWED, port_of(allowed))
    assert fleet.server(allowed).connections_total == 1


async def test_the_fetcher_exposes_its_policy(make_fetcher) -> None:
    policy = Policy()
    async with make_fetcher(egress=policy) as f:
        assert f.egress is policy
