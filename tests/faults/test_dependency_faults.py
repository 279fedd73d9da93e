"""TLS failures on an instance and on the CDN, the CDN down, the release source down.

A dependency that fails must degrade verdicts to ``inconclusive`` with a clear reason,
never to ``mismatch`` (docs/architecture.md ("Behaving well under failure")): the auth-provider
outage of docs/architecture.md ("Why this exists")
was a cache outage that became a full outage. Each fleet carries one instance that
really drifted, so the tests also show which evidence survives the outage (the release
manifest still convicts it while the CDN is down; the CDN still witnesses against it
while the release source is down, but a CDN witness alone never quarantines).

Instances are reached by IP with the site's name as Host header and TLS server name,
as in a cluster; the CDN is a different host and must be reached under its own name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from faults_support import (
    DRIFTED,
    HEALTHY,
    CertAuthority,
    Recorder,
    check,
    check_faulty,
    counted,
    fault_spec,
    planted_fleet,
)

from artifactcheck.model.values import FindingKind, Severity, Verdict
from artifactcheck.release.sources import Expectations, TemplateSource, limits_of
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import Site, Status, WebFleet

SITE = "shop.example"


@pytest.fixture(scope="module")
def ca() -> CertAuthority:
    return CertAuthority()


@pytest.fixture(scope="module")
def stranger() -> CertAuthority:
    return CertAuthority("a CA nobody trusts")


@pytest.fixture
def ca_file(ca: CertAuthority, tmp_path: Path) -> str:
    return ca.write(tmp_path / "ca.pem")


def kinds(findings) -> set[FindingKind]:
    return {f.kind for f in findings}


# --------------------------------------------------------------------------- TLS, instance


@dataclass(frozen=True)
class TlsCase:
    key: str
    fault: str
    names: tuple[str, ...]
    days: float
    untrusted: bool = False


TLS_CASES = [
    TlsCase("instance-tls-expired", "certificate expired 2 days ago", (SITE,), -2),
    TlsCase("instance-tls-wrong-host", "certificate for other.example", ("other.example",), 90),
    TlsCase("instance-tls-unknown-ca", "certificate signed by an unknown CA", (SITE,), 90, True),
]


@pytest.mark.parametrize("case", TLS_CASES, ids=[c.key for c in TLS_CASES])
def test_tls_failure_on_an_instance(
    case: TlsCase,
    make_fleet,
    web: WebFleet,
    subnet: int,
    ca: CertAuthority,
    stranger: CertAuthority,
    ca_file: str,
    fault: Recorder,
) -> None:
    fault.describe(
        case.key,
        group="instance TLS",
        fault=case.fault,
        expected="unreachable (TLS verification failed), certificate expiry still recorded",
        related=("tests/fetch/test_fetch_tls.py::test_unknown_ca_is_a_tls_error",),
    )
    fleet = planted_fleet(make_fleet)
    issuer = stranger if case.untrusted else ca
    ctx, not_after = issuer.server_context(*case.names, days=case.days)
    url = web.add(
        Site(root=fleet.releases["1.4.2"], version="1.4.2"), f"127.97.{subnet}.100", ssl_context=ctx
    )
    http = {"ca_bundle": ca_file, "host_header": SITE}
    outcome, result = check_faulty(fault, fleet, url, http=http)
    assert result.verdict is Verdict.UNREACHABLE
    assert result.observation.error_kind == "tls"
    assert "TLS certificate verification failed" in result.reason
    # the certificate was read anyway (unverified), so its expiry is on record
    assert result.observation.tls is not None
    assert result.observation.tls.not_after == not_after
    expiring = [f for f in result.findings if f.kind is FindingKind.TLS_EXPIRING]
    assert bool(expiring) == (case.days < 14)
    if case.days < 0:
        assert expiring[0].severity is Severity.ERROR and "expired" in expiring[0].message
    assert outcome.verdict(DRIFTED) is Verdict.MISMATCH
    assert all(outcome.verdict(n) is Verdict.CONSISTENT for n in HEALTHY)
    assert fault.quarantined == [DRIFTED]
    fault.assert_clean()


# --------------------------------------------------------------------------- CDN


@dataclass(frozen=True)
class CdnCase:
    key: str
    fault: str
    expected: str
    healthy: Verdict
    cert: tuple[str, float, bool] | None = None  # (name, days, untrusted)
    site_fault: bool = False
    down: bool = False


CDN_CASES = [
    CdnCase(
        "cdn-tls-valid",
        "https CDN, valid certificate for its own address; instances use a Host header",
        "consistent: the CDN is reached under its own name, not the site's",
        Verdict.CONSISTENT,
        cert=("{ip}", 90, False),
    ),
    CdnCase(
        "cdn-tls-expired",
        "https CDN whose certificate expired yesterday",
        "inconclusive (CDN unreachable); tls-expiring error for the CDN",
        Verdict.INCONCLUSIVE,
        cert=("{ip}", -1, False),
    ),
    CdnCase(
        "cdn-tls-wrong-host",
        "https CDN presenting a certificate for another name",
        "inconclusive (CDN unreachable: hostname mismatch)",
        Verdict.INCONCLUSIVE,
        cert=("cdn.other.example", 90, False),
    ),
    CdnCase(
        "cdn-tls-unknown-ca",
        "https CDN signed by an unknown CA",
        "inconclusive (CDN unreachable: unknown CA)",
        Verdict.INCONCLUSIVE,
        cert=("{ip}", 90, True),
    ),
    CdnCase(
        "cdn-down",
        "nothing listens at the CDN address (connection refused)",
        "inconclusive (CDN unreachable); the release manifest still convicts the drifted one",
        Verdict.INCONCLUSIVE,
        down=True,
    ),
    CdnCase(
        "cdn-503",
        "the CDN answers 503 for everything",
        "inconclusive (assets unchecked on the CDN), never cdn-missing",
        Verdict.INCONCLUSIVE,
        site_fault=True,
    ),
]


@pytest.mark.parametrize("case", CDN_CASES, ids=[c.key for c in CDN_CASES])
def test_cdn_fault(
    case: CdnCase,
    make_fleet,
    web: WebFleet,
    subnet: int,
    ca: CertAuthority,
    stranger: CertAuthority,
    ca_file: str,
    fault: Recorder,
) -> None:
    fault.describe(
        case.key,
        group="CDN",
        fault=case.fault,
        expected=case.expected,
        related=(
            ("tests/e2e/test_verify.py::test_cdn_down_is_inconclusive_never_mismatch",)
            if case.down
            else ()
        ),
    )
    fleet = planted_fleet(make_fleet)
    cdn_host = f"127.98.{subnet}.200"
    cdn_site = Site(root=fleet.releases["1.4.2"], server_header="AmazonS3")
    if case.site_fault:
        cdn_site.fault = Status(503)
    ctx = None
    not_after: datetime | None = None
    if case.cert is not None:
        name, days, untrusted = case.cert
        issuer = stranger if untrusted else ca
        ctx, not_after = issuer.server_context(name.format(ip=cdn_host), days=days)
    cdn = web.add(cdn_site, cdn_host, ssl_context=ctx)
    if case.down:
        web.remove(cdn)
    spec = fault_spec(fleet, cdn=cdn, http={"ca_bundle": ca_file, "host_header": SITE})
    outcome = check(fault, spec, drifted=[DRIFTED])
    fault.observed = counted(outcome)
    for name in HEALTHY:
        assert outcome.verdict(name) is case.healthy, outcome.result(name).reason
    assert outcome.verdict(DRIFTED) is Verdict.MISMATCH
    assert fault.quarantined == [DRIFTED]
    fleet_kinds = kinds(outcome.last.findings)
    if case.healthy is Verdict.INCONCLUSIVE and not case.site_fault:
        assert FindingKind.OBSERVATION_FAILED in fleet_kinds
    if not case.down and not case.site_fault:
        received = web.server(cdn).received
        assert all(r.host != SITE and r.sni != SITE for r in received), received[:2]
    if case.cert is not None and case.cert[1] < 14:
        (expiry,) = [f for f in outcome.last.findings if f.kind is FindingKind.TLS_EXPIRING]
        assert expiry.severity is Severity.ERROR and not_after is not None
        assert expiry.actual == not_after.isoformat()
    fault.assert_clean()


# --------------------------------------------------------------------------- release source


def url_source(web: WebFleet, fleet: SimFleet, host: str, *, fault=None) -> tuple[str, Site]:
    """Serve the fleet's release manifests over HTTP; returns the template and the site."""
    site = Site(root=fleet.release_dir, fault=fault)
    return web.add(site, host) + "{version}.json", site


@pytest.mark.parametrize("kind", ["file", "url-503", "url-refused"])
def test_release_source_down(
    kind: str, make_fleet, web: WebFleet, subnet: int, tmp_path: Path, fault: Recorder
) -> None:
    fault.describe(
        f"release-source-{kind}",
        group="release source",
        fault={
            "file": "release manifest file missing",
            "url-503": "release manifest URL answers 503",
            "url-refused": "release manifest URL refuses connections",
        }[kind],
        expected="inconclusive, expectation-unavailable; no quarantine (the CDN alone never "
        "quarantines)",
        related=(
            "tests/e2e/test_verify.py::test_release_source_down_without_copy_is_inconclusive",
            "tests/e2e/test_verify.py::test_release_source_url_down_is_inconclusive",
        ),
    )
    fleet = planted_fleet(make_fleet)
    if kind == "file":
        template = str(tmp_path / "{version}.json")  # no such files: the source is down
    else:
        template, _ = url_source(
            web, fleet, f"127.97.{subnet}.150", fault=Status(503) if kind == "url-503" else None
        )
        if kind == "url-refused":
            web.remove(template.removesuffix("{version}.json"))
    spec = fault_spec(fleet, release={"manifests": [template]})
    outcome = check(fault, spec, drifted=[])
    fault.observed = counted(outcome)
    for name in HEALTHY:
        assert outcome.verdict(name) is Verdict.INCONCLUSIVE, outcome.result(name).reason
    # the CDN still witnesses against the drifted instance, but cannot quarantine it
    assert outcome.verdict(DRIFTED) is Verdict.CDN_MISMATCH
    assert FindingKind.EXPECTATION_UNAVAILABLE in kinds(outcome.last.findings)
    assert fault.quarantined == []
    fault.assert_clean()


def test_release_source_fails_after_a_good_load(
    make_fleet, web: WebFleet, subnet: int, fault: Recorder
) -> None:
    """The source goes down between cycles: the last known good copy is used, and said so."""
    fault.describe(
        "release-source-last-known-good",
        group="release source",
        fault="release URL answers 503 from the second cycle on (refresh every cycle)",
        expected="same verdicts as before from the last known good copy, expectation-stale",
    )
    fleet = planted_fleet(make_fleet)
    template, site = url_source(web, fleet, f"127.97.{subnet}.150")
    spec = fault_spec(
        fleet, release={"manifests": [template]}, cdn=None, http={"host_header": SITE}
    )

    def refreshing(spec, fetcher) -> Expectations:
        assert spec.release is not None and spec.release.manifests is not None
        source = TemplateSource(spec.release.manifests[0], fetcher=fetcher, limits=limits_of(spec))
        return Expectations(source, refresh_after=0.0)

    def break_source(cycle: int) -> None:
        site.fault = Status(503)

    outcome = check(
        fault, spec, drifted=[DRIFTED], cycles=2, expectations=refreshing, between=break_source
    )
    first, second = outcome.reports
    fault.observed = counted(outcome)
    assert [r.verdict for r in first.results] == [r.verdict for r in second.results]
    assert outcome.verdict(DRIFTED) is Verdict.MISMATCH
    assert FindingKind.EXPECTATION_STALE in kinds(second.findings)
    assert FindingKind.EXPECTATION_STALE not in kinds(first.findings)
    received = web.server(template.removesuffix("{version}.json")).received
    assert len(received) >= 2
    assert all(r.host != SITE for r in received), "the site's Host header went to the source"
    assert fault.quarantined == [DRIFTED]
    fault.assert_clean()


def test_expiry_is_read_when_the_instance_is_healthy(
    make_fleet, web: WebFleet, subnet: int, ca: CertAuthority, ca_file: str, fault: Recorder
) -> None:
    """Control for the TLS rows: a valid certificate verifies, with SNI, and is recorded."""
    fault.describe(
        "instance-tls-valid",
        group="instance TLS",
        fault="control: valid certificate for the site name, reached by IP with SNI",
        expected="consistent, no tls-expiring finding, expiry recorded",
    )
    fleet = planted_fleet(make_fleet)
    ctx, not_after = ca.server_context(SITE, days=200)
    url = web.add(
        Site(root=fleet.releases["1.4.2"], version="1.4.2"), f"127.97.{subnet}.100", ssl_context=ctx
    )
    http = {"ca_bundle": ca_file, "host_header": SITE}
    outcome, result = check_faulty(fault, fleet, url, http=http)
    assert result.verdict is Verdict.CONSISTENT
    assert result.observation.tls is not None and result.observation.tls.not_after == not_after
    assert FindingKind.TLS_EXPIRING not in kinds(result.findings)
    assert {r.sni for r in web.server(url).received} == {SITE}
    assert datetime.now(UTC) < not_after
    fault.assert_clean()
