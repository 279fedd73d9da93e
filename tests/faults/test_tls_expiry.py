"""Certificate expiry with real certificates: verify report, investigate, controller metric.

An expired internal certificate started the outage of docs/architecture.md ("Why this exists")
and nobody saw
it coming. Certificates here are made with ``cryptography`` (valid for 200 days,
expiring in 3 days, expired 2 days ago, valid but for another host name) and served
over loopback https. Below ``http.tls_expiry_warning_days`` (default 14) a
``tls-expiring`` finding appears: a warning before expiry, an error after, also when
the expired certificate makes the instance unreachable. The controller exports
``artifactcheck_tls_cert_expiry_timestamp_seconds`` per endpoint; that is checked on a
simulated cluster whose pods and CDN all serve https.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from faults_support import CertAuthority, Recorder

from artifactcheck.cli.main import main
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.running import RunningController
from artifactcheck_sim.web import Site, WebFleet

SITE = "shop.example"
METRIC = "artifactcheck_tls_cert_expiry_timestamp_seconds"


@pytest.fixture(scope="module")
def ca() -> CertAuthority:
    return CertAuthority()


@pytest.fixture
def https_fleet(
    make_fleet, web: WebFleet, subnet: int, ca: CertAuthority, tmp_path: Path
) -> Iterator[dict[str, Any]]:
    """Four https instances of 1.4.2 by IP, their certificates naming the site (or not)."""
    fleet: SimFleet = make_fleet(1, version="1.4.2")
    root = fleet.releases["1.4.2"]
    certs = {
        "valid": (SITE, 200),
        "soon": (SITE, 3),
        "expired": (SITE, -2),
        "wrong-host": ("other.example", 200),
    }
    targets, not_after = [], {}
    for i, (name, (host_name, days)) in enumerate(certs.items()):
        ctx, not_after[name] = ca.server_context(host_name, days=days)
        url = web.add(
            Site(root=root, version="1.4.2"), f"127.97.{subnet}.{100 + i}", ssl_context=ctx
        )
        targets.append((name, url))
    yield {
        "fleet": fleet,
        "targets": targets,
        "not_after": not_after,
        "ca_file": ca.write(tmp_path / "ca.pem"),
    }


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def cli_args(env: dict[str, Any], *command: str) -> list[str]:
    """``command`` over the https fleet: its release, its CA, the site's name, every target."""
    args = [*command, "--release-manifest", env["fleet"].release_template]
    args += ["--ca-bundle", env["ca_file"], "--host-header", SITE]
    for _, url in env["targets"]:
        args += ["--target", f"{url}=1.4.2"]
    return args


def verify_args(env: dict[str, Any], config: Path | None = None) -> list[str]:
    args = cli_args(env, "verify", "--output", "json")
    return args + ["-c", str(config)] if config is not None else args


def expiring(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f["kind"] == "tls-expiring"]


def test_verify_reports_expiry_below_the_threshold(
    https_fleet, tmp_path: Path, fault: Recorder
) -> None:
    fault.describe(
        "tls-expiry-verify",
        group="TLS expiry",
        fault="https instances: valid 200 d, expiring in 3 d, expired 2 d ago, wrong host",
        expected="tls-expiring: warning for 3 d, error for expired (unreachable too); none "
        "above the threshold; threshold 2 d silences the 3-day warning",
    )
    env = https_fleet
    names = {url: name for name, url in env["targets"]}
    with fault.probe(memory="none"):
        code, out = cli(*verify_args(env))
        doc = json.loads(out)
        quiet = tmp_path / "quiet.yaml"
        quiet.write_text("http:\n  tls_expiry_warning_days: 2\n")
        code_quiet, out_quiet = cli(*verify_args(env, quiet))
    results = {names[r["instance"]]: r for r in doc["results"]}
    fault.verdicts = {n: r["verdict"] for n, r in sorted(results.items())}
    assert code == 3, doc["counts"]  # unreachable instances: inconclusive run
    assert results["valid"]["verdict"] == "consistent" and not expiring(results["valid"])
    (soon,) = expiring(results["soon"])
    assert soon["severity"] == "warning" and "expires" in soon["message"]
    assert soon["actual"] == env["not_after"]["soon"].isoformat()
    assert results["soon"]["verdict"] == "consistent"  # a warning, not a verdict
    (gone,) = expiring(results["expired"])
    assert gone["severity"] == "error" and "expired" in gone["message"]
    assert results["expired"]["verdict"] == "unreachable"
    assert results["wrong-host"]["verdict"] == "unreachable"
    assert not expiring(results["wrong-host"])
    quiet_results = {names[r["instance"]]: r for r in json.loads(out_quiet)["results"]}
    assert code_quiet == 3
    assert not expiring(quiet_results["soon"])
    assert expiring(quiet_results["expired"])  # expired is always reported
    fault.observed = "3-day: warning; expired: error + unreachable; threshold 2 d: 3-day silent"
    fault.leaked_tasks = fault.false_quarantines = 0
    fault.assert_clean()


def test_investigate_shows_expiry(https_fleet, fault: Recorder) -> None:
    fault.describe(
        "tls-expiry-investigate",
        group="TLS expiry",
        fault="investigate the instance whose certificate expires in 3 days",
        expected="the TLS section shows ~3 days left; the tls-expiring finding is listed",
    )
    env = https_fleet
    url = dict(env["targets"])["soon"]
    args = cli_args(env, "investigate", url)
    with fault.probe(memory="none"):
        code_text, text = cli(*args)
        code_json, out = cli(*args, "--output", "json")
    doc = json.loads(out)
    flat = " ".join(text.split())
    assert "tls-expiring" in flat or "expires" in flat, text
    assert "TLS certificates" in text
    (row,) = [t for t in doc["tls"] if t["role"] == "instance"]
    assert 2.5 < row["days_left"] < 3.5, row
    assert row["not_after"].startswith(env["not_after"]["soon"].strftime("%Y-%m-%dT%H:%M"))
    kinds = [f["kind"] for f in doc["findings"]]
    assert "tls-expiring" in kinds, kinds
    fault.observed = f"days_left={row['days_left']}; findings: {sorted(set(kinds))}"
    fault.leaked_tasks = fault.false_quarantines = 0
    fault.assert_clean()


def test_controller_exports_expiry_per_endpoint(
    subnet: int, ca: CertAuthority, tmp_path: Path, fault: Recorder
) -> None:
    """Pods and CDN on https: the gauge holds each endpoint's notAfter (Unix time)."""
    fault.describe(
        "tls-expiry-metric",
        group="TLS expiry",
        fault="controller over https pods (one certificate expiring in 3 days) and an https CDN",
        expected=f"{METRIC} per endpoint = notAfter; findings gauge tls-expiring warning",
    )
    with SimCluster(first_host=f"127.97.{subnet}.1", cdn_host=f"127.98.{subnet}.1") as cluster:
        expiry: dict[str, float] = {}
        for days in (200, 200, 3):
            pod = cluster.add_pod()
            ctx, not_after = ca.server_context(pod.host, days=days)
            cluster.web.remove(pod.url)  # serve the same site, same address, over TLS
            pod.url = cluster.web.add(pod.site, pod.host, port=cluster.port, ssl_context=ctx)
            expiry[f"{pod.host}:{cluster.port}"] = not_after.timestamp()
        cdn_ctx, cdn_after = ca.server_context(cluster.cdn_host, days=90)
        cluster.web.remove(cluster.cdn_url)
        cluster.cdn_url = cluster.web.add(cluster.cdn_site, cluster.cdn_host, ssl_context=cdn_ctx)
        port = cluster.cdn_url.rsplit(":", 1)[1].rstrip("/")
        expiry[f"{cluster.cdn_host}:{port}"] = cdn_after.timestamp()
        cluster.add_check(
            interval=0.3,
            kubernetes={
                "namespace": "shop",
                "selector": "app=web",
                "port": cluster.port,
                "scheme": "https",
            },
            http={"credentials": ["lab-ca"]},  # the admin's CA bundle, granted by name
        )
        lab_ca = {
            "name": "lab-ca",
            "namespaces": ["shop"],
            "ca_bundle": ca.write(tmp_path / "ca.pem"),
        }
        with fault.probe(memory="rss", collect=True):
            ctl = RunningController(cluster, admin=cluster.lab_admin(credentials=[lab_ca])).start()
            try:
                wait_for(lambda: ctl.controller.cycles_completed >= 2, timeout=20)
                metrics = ctl.controller.metrics.exposition().decode()
                status = cluster.check_status()
            finally:
                ctl.stop()
                fault.leaked_tasks = 0
    exported = {}
    for line in metrics.splitlines():
        if line.startswith(METRIC + "{"):
            endpoint = line.split('endpoint="', 1)[1].split('"', 1)[0]
            exported[endpoint] = float(line.rsplit(" ", 1)[1])
    assert exported == expiry, (exported, expiry)
    assert status["counts"]["consistent"] == 3, status
    warning = 'artifactcheck_findings{check="shop/web",kind="tls-expiring",severity="warning"} 1.0'
    assert warning in metrics
    fault.observed = f"{len(exported)} endpoints exported (3 pods + CDN), 1 tls-expiring warning"
    fault.false_quarantines = 0
    fault.assert_clean()
