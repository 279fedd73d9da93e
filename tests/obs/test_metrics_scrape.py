"""The controller's /metrics as Prometheus gets it: lint-clean for promtool, and the
names the alert rules use are names it really exports.

The scrape is of the real controller on the simulated cluster, after real cycles
(conftest.py ``scrape``), not of a registry filled in by hand.
"""

from __future__ import annotations

from datetime import UTC, datetime

from obs_support import alerts, exported_names, metric_names, rule_spec, run_promtool

from artifactcheck.control.metrics import Metrics
from artifactcheck.model.values import (
    Finding,
    FindingKind,
    Report,
    Severity,
)


def test_a_real_scrape_passes_promtool_check_metrics(promtool: str, scrape: str) -> None:
    out = run_promtool(promtool, "check", "metrics", stdin=scrape)
    assert out.strip() == "", out  # any naming or help problem is printed


def test_the_scrape_has_the_cycle_the_alerts_watch(scrape: str) -> None:
    assert 'artifactcheck_instances{check="shop/web",verdict="mismatch"} 1.0' in scrape
    assert "artifactcheck_leader 1.0" in scrape
    assert 'artifactcheck_last_cycle_timestamp_seconds{check="shop/web"}' in scrape
    # exported at 0 before any failure, so the first one is an increase()
    assert 'artifactcheck_cycle_failures_total{check="shop/web"} 0.0' in scrape


def test_every_registered_metric_is_in_the_scrape(scrape: str) -> None:
    registered = {f.name for f in Metrics().registry.collect()}
    assert registered <= exported_names(scrape)


def test_alert_rules_name_only_exported_metrics(scrape: str) -> None:
    exported = exported_names(scrape)
    used: set[str] = set()
    for group in rule_spec()["groups"]:
        for rule in group["rules"]:
            names = metric_names(rule["expr"])
            assert names, f"{rule.get('alert')}: no metric found in {rule['expr']!r}"
            assert names <= exported, f"{rule.get('alert')}: not exported: {names - exported}"
            used |= names
    assert len(alerts()) >= 9 and "artifactcheck_leader" in used


def test_metric_names_reads_promql_as_prometheus_does() -> None:
    """The extractor the name checks rely on, on the constructs they meet."""
    expr = (
        "sum by (check) "
        '(rate(artifactcheck_http_requests_total{check=~"$check"}[$__rate_interval]))'
        " / ignoring (le) histogram_quantile(0.9, up offset 5m) and on (instance)"
        ' (process_cpu_seconds_total{job="x"} == 1) - time() < 14 * 86400 unless absent(foo)'
    )
    assert metric_names(expr) == {
        "artifactcheck_http_requests_total",
        "up",
        "process_cpu_seconds_total",
        "foo",
    }


def _report(*findings: Finding) -> Report:
    return Report(results=(), findings=findings, started_at=datetime.now(UTC), elapsed=0.1)


def _finding(kind: FindingKind) -> Finding:
    return Finding(kind=kind, severity=Severity.ERROR, message="m")


def test_one_checks_findings_do_not_erase_anothers() -> None:
    m = Metrics()
    m.record_report("a/web", _report(_finding(FindingKind.CDN_MISSING)), quarantined=0)
    m.record_report("b/web", _report(), quarantined=0)
    text = m.exposition().decode()
    assert 'artifactcheck_findings{check="a/web",kind="cdn-missing",severity="error"} 1.0' in text
    m.record_report("a/web", _report(), quarantined=0)
    assert 'kind="cdn-missing"' not in m.exposition().decode()


def test_a_deleted_check_leaves_no_series_behind() -> None:
    m = Metrics()
    m.record_report("a/web", _report(_finding(FindingKind.CDN_MISSING)), quarantined=1)
    m.record_report("b/web", _report(), quarantined=0)
    m.cycle_failures.labels("a/web").inc()
    m.record_tls("a/web", [("https://10.0.0.1:443", 100.0), ("https://cdn:443", 50.0)])
    m.record_tls("b/web", [("https://cdn:443", 50.0)])
    m.forget("a/web")
    text = m.exposition().decode()
    assert 'check="a/web"' not in text and "10.0.0.1" not in text
    assert 'check="b/web"' in text
    assert 'endpoint="https://cdn:443"' in text  # still observed by b/web


def test_an_endpoint_no_check_observes_any_more_is_removed() -> None:
    m = Metrics()
    m.record_tls("a/web", [("https://10.0.0.1:443", 100.0), ("https://10.0.0.1:443", 90.0)])
    assert (
        'artifactcheck_tls_cert_expiry_timestamp_seconds{endpoint="https://10.0.0.1:443"} 90.0'
        in (m.exposition().decode())
    )
    m.record_tls("a/web", [("https://10.0.0.2:443", 100.0)])
    text = m.exposition().decode()
    assert "10.0.0.1" not in text and "10.0.0.2" in text
