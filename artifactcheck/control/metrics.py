"""Prometheus metrics (``artifactcheck_*``): the only module importing prometheus_client.

Each controller owns a :class:`Metrics` with its own registry (explicit dependency, so
two controllers in one test process do not share counters).
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from artifactcheck.model.values import Report, Verdict

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The controller's metrics, registered in a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.instances = Gauge(
            "artifactcheck_instances",
            "Instances by verdict in the last cycle of each check.",
            ["check", "verdict"],
            registry=r,
        )
        self.cycles = Counter(
            "artifactcheck_cycles_total", "Check cycles run.", ["check"], registry=r
        )
        self.cycle_seconds = Histogram(
            "artifactcheck_cycle_duration_seconds",
            "Wall time of one check cycle.",
            ["check"],
            registry=r,
        )
        self.actions = Counter(
            "artifactcheck_actions_total",
            "Actions performed (dry-run actions counted with dry_run=true).",
            ["check", "kind", "dry_run"],
            registry=r,
        )
        self.findings = Gauge(
            "artifactcheck_findings",
            "Findings in the last cycle by kind and severity.",
            ["check", "kind", "severity"],
            registry=r,
        )
        self.suspect = Gauge(
            "artifactcheck_suspect_expectation",
            "1 when most of a workload disagrees with its expected release (alert).",
            ["check"],
            registry=r,
        )
        self.quarantined = Gauge(
            "artifactcheck_quarantined", "Instances quarantined now.", ["check"], registry=r
        )
        self.requests = Counter(
            "artifactcheck_http_requests_total", "HTTP requests sent.", ["check"], registry=r
        )
        self.retries = Counter(
            "artifactcheck_http_retries_total", "HTTP retries sent.", ["check"], registry=r
        )
        self.api_errors = Counter(
            "artifactcheck_api_errors_total",
            "Kubernetes API calls that failed.",
            ["operation"],
            registry=r,
        )
        self.leader = Gauge(
            "artifactcheck_leader", "1 while this replica holds the leader lease.", registry=r
        )
        self.config_error = Gauge(
            "artifactcheck_config_error",
            "1 while a configuration error keeps this replica from leading, by reason "
            "(lease-namespace: the Lease's namespace does not exist).",
            ["reason"],
            registry=r,
        )
        self.last_cycle = Gauge(
            "artifactcheck_last_cycle_timestamp_seconds",
            "Unix time of the last completed cycle.",
            ["check"],
            registry=r,
        )
        self.tls_expiry = Gauge(
            "artifactcheck_tls_cert_expiry_timestamp_seconds",
            "Earliest certificate expiry seen per endpoint (Unix time).",
            ["endpoint"],
            registry=r,
        )
        self.verdict_latency = Histogram(
            "artifactcheck_new_pod_verdict_seconds",
            "Time from a pod's containers becoming ready (its ContainersReady condition's "
            "lastTransitionTime) to its first verdict.",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=r,
        )

    def record_report(self, check: str, report: Report, *, quarantined: int) -> None:
        """Update the gauges and counters from one cycle's report."""
        counts = report.counts()
        for verdict in Verdict:
            self.instances.labels(check, verdict.value).set(counts[verdict.value])
        self.cycles.labels(check).inc()
        self.cycle_seconds.labels(check).observe(report.elapsed)
        self.requests.labels(check).inc(report.requests)
        self.retries.labels(check).inc(report.retries)
        self.quarantined.labels(check).set(quarantined)
        seen: dict[tuple[str, str], int] = {}
        for f in list(report.findings) + [f for r in report.results for f in r.findings]:
            key = (f.kind.value, f.severity.value)
            seen[key] = seen.get(key, 0) + 1
        self.findings.clear()
        for (kind, severity), n in seen.items():
            self.findings.labels(check, kind, severity).set(n)
        suspect = any(f.kind.value == "suspect-expectation" for f in report.findings)
        self.suspect.labels(check).set(1 if suspect else 0)
        if report.started_at is not None:
            self.last_cycle.labels(check).set(report.started_at.timestamp() + report.elapsed)
        for a in report.actions:
            self.actions.labels(check, a.kind.value, str(a.dry_run).lower()).inc()

    def exposition(self) -> bytes:
        """The text exposition format for /metrics."""
        return generate_latest(self.registry)
