"""Prometheus metrics (``artifactcheck_*``): the only module importing prometheus_client.

Each controller owns a :class:`Metrics` with its own registry (explicit dependency, so
two controllers in one test process do not share counters). The alerts and the
dashboard built on these names are in k8s/integrations/ (docs/monitoring.md); a
series that outlived what it describes (a deleted check, a pod gone with its
certificate) would keep an alert firing, so such series are removed, not left behind.
"""

from __future__ import annotations

from collections.abc import Iterable

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
        self.cycle_failures = Counter(
            "artifactcheck_cycle_failures_total",
            "Check cycles that ended in an unexpected error (no report, no status).",
            ["check"],
            registry=r,
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
        self.verdict_forwards = Counter(
            "artifactcheck_verdict_api_forwards_total",
            "Verdict API requests this standby passed to the leader, by outcome "
            "(forwarded; leader_unknown, leader_unreachable: answered 503).",
            ["outcome"],
            registry=r,
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
            "Earliest certificate expiry seen per endpoint (Unix time), for the endpoints "
            "the checks observe now.",
            ["endpoint"],
            registry=r,
        )
        self._finding_keys: dict[str, set[tuple[str, str]]] = {}
        self._tls_endpoints: dict[str, set[str]] = {}
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
        self.cycle_failures.labels(check)  # exported at 0, so a first failure is an increase
        self.cycle_seconds.labels(check).observe(report.elapsed)
        self.requests.labels(check).inc(report.requests)
        self.retries.labels(check).inc(report.retries)
        self.quarantined.labels(check).set(quarantined)
        seen: dict[tuple[str, str], int] = {}
        for f in list(report.findings) + [f for r in report.results for f in r.findings]:
            key = (f.kind.value, f.severity.value)
            seen[key] = seen.get(key, 0) + 1
        # only this check's kinds that are gone: the other checks' findings stay
        for kind, severity in self._finding_keys.get(check, set()) - seen.keys():
            self.findings.remove(check, kind, severity)
        self._finding_keys[check] = set(seen)
        for (kind, severity), n in seen.items():
            self.findings.labels(check, kind, severity).set(n)
        suspect = any(f.kind.value == "suspect-expectation" for f in report.findings)
        self.suspect.labels(check).set(1 if suspect else 0)
        if report.started_at is not None:
            self.last_cycle.labels(check).set(report.started_at.timestamp() + report.elapsed)
        for a in report.actions:
            self.actions.labels(check, a.kind.value, str(a.dry_run).lower()).inc()

    def record_tls(self, check: str, expiries: Iterable[tuple[str, float]]) -> None:
        """Set each endpoint's certificate expiry (Unix time) seen by ``check`` this
        cycle; an endpoint no check observes any more (a pod replaced) is removed, so
        its certificate cannot page anyone."""
        now: dict[str, float] = {}
        for endpoint, not_after in expiries:
            now[endpoint] = min(not_after, now.get(endpoint, not_after))
        before = self._tls_endpoints.get(check, set())
        self._tls_endpoints[check] = set(now)
        for endpoint, not_after in now.items():
            self.tls_expiry.labels(endpoint).set(not_after)
        self._drop_endpoints(before - now.keys())

    def _drop_endpoints(self, endpoints: Iterable[str]) -> None:
        still: set[str] = set().union(*self._tls_endpoints.values())
        for endpoint in set(endpoints) - still:
            self.tls_expiry.remove(endpoint)

    def forget(self, check: str) -> None:
        """Remove every series of a deleted check: a check that no longer exists is
        neither stale nor failing."""
        per_check = (
            (self.instances, ("check", "verdict")),
            (self.cycles, ("check",)),
            (self.cycle_failures, ("check",)),
            (self.cycle_seconds, ("check",)),
            (self.actions, ("check", "kind", "dry_run")),
            (self.findings, ("check", "kind", "severity")),
            (self.suspect, ("check",)),
            (self.quarantined, ("check",)),
            (self.requests, ("check",)),
            (self.retries, ("check",)),
            (self.last_cycle, ("check",)),
        )
        for metric, names in per_check:
            for values in _label_sets(metric, names, check):
                metric.remove(*values)
        self._finding_keys.pop(check, None)
        self._drop_endpoints(self._tls_endpoints.pop(check, set()))

    def exposition(self) -> bytes:
        """The text exposition format for /metrics."""
        return generate_latest(self.registry)


def _label_sets(
    metric: Counter | Gauge | Histogram, names: tuple[str, ...], check: str
) -> set[tuple[str, ...]]:
    """The label values of ``metric``'s series of one check, read from what it exports
    (``names`` in the metric's label order)."""
    return {
        tuple(sample.labels[n] for n in names)
        for family in metric.collect()
        for sample in family.samples
        if sample.labels.get("check") == check
    }
