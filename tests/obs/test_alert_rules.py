"""The PrometheusRule: valid rule groups, and each alert fires when it should and not
otherwise, evaluated by promtool (Prometheus's own rule engine) over input series.

Every alert has at least one case where it fires and one where it does not (checked
below, so a new alert cannot go untested). The expected annotations are the rule's
templates filled in, so a template naming a label the alert does not carry fails.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from obs_support import RUNBOOK, alerts, rule_spec, run_promtool

CTL = {"job": "artifactcheck-metrics", "namespace": "artifactcheck-system"}
A, B = "10.0.0.1:8080", "10.0.0.2:8080"  # the two replicas' scrape addresses


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def leader(instance: str, values: str) -> dict[str, str]:
    return series("artifactcheck_leader", values, instance=instance, **CTL)


def check_series(name: str, values: str, instance: str = A, **labels: str) -> dict[str, str]:
    return series(name, values, instance=instance, check="shop/web", **CTL, **labels)


# Each case: the input series, then (eval time, alert, labels of each firing alert
# or [] for none, the rendered $value / humanized $value).
Case = dict[str, Any]
CASES: list[Case] = [
    {
        "name": "a mismatch on the leader fires after 2 minutes",
        "series": [
            check_series("artifactcheck_instances", "0 0 2x20", verdict="mismatch"),
            leader(A, "1x22"),
        ],
        "evals": [
            ("1m", "ArtifactCheckContentMismatch", [], None),
            ("3m", "ArtifactCheckContentMismatch", [], None),  # pending
            (
                "5m",
                "ArtifactCheckContentMismatch",
                [{"check": "shop/web", "verdict": "mismatch", "instance": A, **CTL}],
                {"value": "2"},
            ),
        ],
    },
    {
        "name": "the gauge left behind by a replica that lost the lease does not fire",
        "series": [
            check_series("artifactcheck_instances", "1x20", verdict="mismatch"),
            check_series("artifactcheck_instances", "0x20", instance=B, verdict="mismatch"),
            leader(A, "0x20"),
            leader(B, "1x20"),
        ],
        "evals": [("10m", "ArtifactCheckContentMismatch", [], None)],
    },
    {
        "name": "an expectation suspect for 5 minutes fires",
        "series": [
            check_series("artifactcheck_suspect_expectation", "0 1x20"),
            leader(A, "1x21"),
        ],
        "evals": [
            ("4m", "ArtifactCheckExpectationSuspect", [], None),
            (
                "7m",
                "ArtifactCheckExpectationSuspect",
                [{"check": "shop/web", "instance": A, **CTL}],
                {"value": "1"},
            ),
        ],
    },
    {
        "name": "an expectation that is not suspect does not fire",
        "series": [check_series("artifactcheck_suspect_expectation", "0x20"), leader(A, "1x20")],
        "evals": [("10m", "ArtifactCheckExpectationSuspect", [], None)],
    },
    {
        "name": "files missing from the CDN fire, summed over finding severities",
        "series": [
            check_series("artifactcheck_findings", "2x20", kind="cdn-missing", severity="error"),
            check_series("artifactcheck_findings", "1x20", kind="cdn-missing", severity="alert"),
            check_series("artifactcheck_findings", "5x20", kind="drift", severity="warning"),
            leader(A, "1x20"),
        ],
        "evals": [
            ("3m", "ArtifactCheckCDNMissingAssets", [], None),
            (
                "6m",
                "ArtifactCheckCDNMissingAssets",
                [{"check": "shop/web", "instance": A}],
                {"value": "3"},
            ),
        ],
    },
    {
        "name": "other findings do not mean the CDN lacks files",
        "series": [
            check_series("artifactcheck_findings", "5x20", kind="drift", severity="warning"),
            leader(A, "1x20"),
        ],
        "evals": [("10m", "ArtifactCheckCDNMissingAssets", [], None)],
    },
    {
        # expiry at 10 days + 20 minutes (Unix time 0 = the test's start): at 20m,
        # 10 days are left; a certificate with 30 days left never fires.
        "name": "a certificate expiring within 14 days fires, one with 30 days left does not",
        "series": [
            series(
                "artifactcheck_tls_cert_expiry_timestamp_seconds",
                f"{10 * 86400 + 1200}x30",
                endpoint="https://10.1.0.7:8443",
                instance=A,
                **CTL,
            ),
            series(
                "artifactcheck_tls_cert_expiry_timestamp_seconds",
                f"{30 * 86400}x30",
                endpoint="https://cdn.example.com:443",
                instance=A,
                **CTL,
            ),
            leader(A, "1x30"),
        ],
        "evals": [
            ("5m", "ArtifactCheckCertificateExpiringSoon", [], None),  # pending
            (
                "20m",
                "ArtifactCheckCertificateExpiringSoon",
                [{"endpoint": "https://10.1.0.7:8443", "instance": A, **CTL}],
                {"value": str(10 * 86400), "duration": "10d 0h 0m 0s"},
            ),
        ],
    },
    {
        "name": "a cycle failure counted after the series existed fires, then resolves",
        "series": [check_series("artifactcheck_cycle_failures_total", "0 0 0 1x60")],
        "evals": [
            ("2m", "ArtifactCheckCycleFailing", [], None),
            (
                "5m",
                "ArtifactCheckCycleFailing",
                [{"check": "shop/web", "instance": A, **CTL}],
                {"value": "1"},
            ),
            ("40m", "ArtifactCheckCycleFailing", [], None),
        ],
    },
    {
        "name": "a failure counter that first appears at 1 fires too (increase() misses it)",
        "series": [check_series("artifactcheck_cycle_failures_total", "_x5 1x60")],
        "evals": [
            (
                "7m",
                "ArtifactCheckCycleFailing",
                [{"check": "shop/web", "instance": A, **CTL}],
                {"value": "1"},
            ),
            ("50m", "ArtifactCheckCycleFailing", [], None),
        ],
    },
    {
        "name": "no cycle failures, no alert",
        "series": [check_series("artifactcheck_cycle_failures_total", "0x60")],
        "evals": [("30m", "ArtifactCheckCycleFailing", [], None)],
    },
    {
        "name": "instances unreachable or inconclusive for 15 minutes fire",
        "series": [
            check_series("artifactcheck_instances", "1x30", verdict="unreachable"),
            check_series("artifactcheck_instances", "2x30", verdict="inconclusive"),
            check_series("artifactcheck_instances", "7x30", verdict="consistent"),
            leader(A, "1x30"),
        ],
        "evals": [
            ("10m", "ArtifactCheckCannotVerify", [], None),
            (
                "16m",
                "ArtifactCheckCannotVerify",
                [{"check": "shop/web", "instance": A}],
                {"value": "3"},
            ),
        ],
    },
    {
        "name": "every instance judged: nothing to say",
        "series": [
            check_series("artifactcheck_instances", "0x30", verdict="unreachable"),
            check_series("artifactcheck_instances", "0x30", verdict="inconclusive"),
            check_series("artifactcheck_instances", "7x30", verdict="consistent"),
            leader(A, "1x30"),
        ],
        "evals": [("20m", "ArtifactCheckCannotVerify", [], None)],
    },
    {
        # the last cycle ended at 10m and none since: stale past 25m, firing 5m later
        "name": "no completed cycle for 15 minutes fires",
        "series": [check_series("artifactcheck_last_cycle_timestamp_seconds", "60+60x9 600x40")],
        "evals": [
            ("20m", "ArtifactCheckStale", [], None),
            ("27m", "ArtifactCheckStale", [], None),  # pending
            (
                "31m",
                "ArtifactCheckStale",
                [{"check": "shop/web"}],
                {"value": "1260", "duration": "21m 0s"},
            ),
        ],
    },
    {
        "name": "a standby's old timestamp does not make a fresh check stale",
        "series": [
            check_series("artifactcheck_last_cycle_timestamp_seconds", "600x40"),
            check_series("artifactcheck_last_cycle_timestamp_seconds", "0+60x40", instance=B),
        ],
        "evals": [("35m", "ArtifactCheckStale", [], None)],
    },
    {
        "name": "two replicas, neither leading, for 5 minutes fire",
        "series": [leader(A, "1 1 0x20"), leader(B, "0x22")],
        "evals": [
            ("5m", "ArtifactCheckNoLeader", [], None),  # pending
            ("8m", "ArtifactCheckNoLeader", [CTL], {"value": "0"}),
        ],
    },
    {
        "name": "one replica leading: no alert",
        "series": [leader(A, "0x20"), leader(B, "1x20")],
        "evals": [("10m", "ArtifactCheckNoLeader", [], None)],
    },
    {
        "name": "no controller scraped for 10 minutes fires",
        "series": [series("up", "1x30", job="something-else", instance="10.9.9.9:9100")],
        "evals": [("11m", "ArtifactCheckControllerAbsent", [{}], {"value": "1"})],
    },
    {
        "name": "a scraped controller is not absent",
        "series": [leader(A, "0x30")],
        "evals": [("20m", "ArtifactCheckControllerAbsent", [], None)],
    },
    {
        "name": "a configuration error for 5 minutes fires",
        "series": [
            series(
                "artifactcheck_config_error", "1x20", reason="lease-namespace", instance=A, **CTL
            )
        ],
        "evals": [
            ("3m", "ArtifactCheckConfigError", [], None),
            (
                "6m",
                "ArtifactCheckConfigError",
                [{"reason": "lease-namespace", **CTL}],
                {"value": "1"},
            ),
        ],
    },
    {
        "name": "a configuration error that was fixed does not fire",
        "series": [
            series(
                "artifactcheck_config_error",
                "1 1 0x20",
                reason="lease-namespace",
                instance=A,
                **CTL,
            )
        ],
        "evals": [("10m", "ArtifactCheckConfigError", [], None)],
    },
]


def render(template: str, labels: dict[str, str], value: dict[str, str]) -> str:
    """The subset of Go templating the rules use: labels, $value, humanizeDuration."""

    def one(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        if expr == "$value":
            return value["value"]
        if expr == "$value | humanizeDuration":
            return value["duration"]
        if expr.startswith("$labels."):
            return labels[expr.removeprefix("$labels.")]  # KeyError: not an alert label
        raise AssertionError(f"template not understood by this test: {expr}")

    return re.sub(r"\{\{(.*?)\}\}", one, template)


def expected(alert: str, labels: dict[str, str], value: dict[str, str]) -> dict[str, Any]:
    rule = next(r for r in alerts() if r["alert"] == alert)
    all_labels = {**labels, **rule["labels"]}
    return {
        "exp_labels": all_labels,
        "exp_annotations": {
            k: render(v.strip(), all_labels, value) for k, v in rule["annotations"].items()
        },
    }


def unit_tests() -> dict[str, Any]:
    tests = []
    for case in CASES:
        tests.append(
            {
                "name": case["name"],
                "interval": "1m",
                "input_series": case["series"],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [expected(alert, labels, value) for labels in firing],
                    }
                    for at, alert, firing, value in case["evals"]
                ],
            }
        )
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule_spec(), sort_keys=False), encoding="utf-8")
    return path


def test_rule_groups_pass_promtool_check(promtool: str, rules_file: Path) -> None:
    out = run_promtool(promtool, "check", "rules", str(rules_file))
    assert f"SUCCESS: {len(alerts())} rules found" in out


def test_every_alert_fires_and_stays_quiet_as_the_input_says(
    promtool: str, rules_file: Path
) -> None:
    tests = rules_file.parent / "rules-test.yaml"
    tests.write_text(yaml.safe_dump(unit_tests(), sort_keys=False), encoding="utf-8")
    out = run_promtool(promtool, "test", "rules", str(tests))
    assert "SUCCESS" in out


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in CASES:
        for _, alert, firing, _ in case["evals"]:
            (fires if firing else quiet).add(alert)
    names = {r["alert"] for r in alerts()}
    assert names - fires == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown quiet"
    assert (fires | quiet) <= names


def github_anchor(heading: str) -> str:
    """The anchor GitHub (and most renderers) give a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_alert_is_labelled_explained_and_has_a_runbook_section() -> None:
    anchors = {
        github_anchor(line.lstrip("#"))
        for line in RUNBOOK.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for rule in alerts():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        notes = rule["annotations"]
        assert notes["summary"].strip() and notes["description"].strip(), rule["alert"]
        url = notes["runbook_url"]
        assert url.startswith("https://") and "/docs/runbook.md#" in url, url
        assert url.rsplit("#", 1)[1] in anchors, f"{rule['alert']}: no section {url}"


def test_the_monitoring_guide_lists_every_alert_with_its_runbook_link() -> None:
    guide = (RUNBOOK.parent / "monitoring.md").read_text(encoding="utf-8")
    for rule in alerts():
        anchor = rule["annotations"]["runbook_url"].rsplit("#", 1)[1]
        assert f"[{rule['alert']}](runbook.md#{anchor})" in guide, rule["alert"]
        assert rule["labels"]["severity"] in guide.split(f"[{rule['alert']}]", 1)[1].split("\n")[0]
