"""Helpers of the monitoring tests: promtool, the rule file, exported names, PromQL.

promtool comes from Debian's ``prometheus`` package (.ci/docker.sh installs it). Outside
CI a machine without it skips these tests; with ``CI=true`` a missing promtool is a
failure, so the checks cannot silently stop running.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_support import tool
from prometheus_client.parser import text_string_to_metric_families

from artifactcheck_sim.cluster import SimCluster
from artifactcheck_sim.running import RunningController

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "k8s" / "integrations" / "prometheus" / "artifactcheck-rules.yaml"
DASHBOARD = ROOT / "k8s" / "integrations" / "grafana" / "artifactcheck-dashboard.json"
RUNBOOK = ROOT / "docs" / "runbook.md"


def find_promtool() -> str:
    return tool("promtool", "Debian package prometheus; .ci/docker.sh")


def run_promtool(promtool: str, *args: str, stdin: str | None = None) -> str:
    """Run promtool; a non-zero exit fails the test with its whole output."""
    proc = subprocess.run(
        [promtool, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"promtool {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout + proc.stderr


def rule_spec() -> dict[str, Any]:
    """The PrometheusRule's ``spec``: a plain Prometheus rule file (``groups``)."""
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    spec: dict[str, Any] = doc["spec"]
    return spec


def alerts() -> list[dict[str, Any]]:
    return [r for g in rule_spec()["groups"] for r in g["rules"] if "alert" in r]


# --------------------------------------------------------------------------- scrape


_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("_sum", "_count", "_created"),
}


def exported_names(exposition: str) -> set[str]:
    """Every series name the exposition offers: the families and the names their
    samples have (a histogram's ``_bucket``, a counter's ``_total``), also for families
    that have no sample yet."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.add(family.name)
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


# --------------------------------------------------------------------------- PromQL

_KEYWORDS = frozenset(
    "and or unless by without on ignoring group_left group_right offset bool inf nan".split()
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects.

    Strings, label matchers, grouping clauses, range and subquery brackets, Grafana
    variables and numbers are removed; what is left that is an identifier not
    followed by ``(`` (a function or aggregation) and not a keyword is a metric.
    """
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', " ", expr)
    text = re.sub(r"\$\{[^}]*\}|\$\w+", " ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    text = re.sub(r"(?<![\w.])\d[\w.]*", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        follows = text[match.end() :].lstrip()
        if follows.startswith("(") or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


def lab_controller(cluster: SimCluster, folder: Path, **settings: Any) -> RunningController:
    """The real controller on ``cluster``, with the lab's admin configuration as a file
    (``--admin-config``) in ``folder``."""
    config = folder / "admin-config.yaml"
    config.write_text(yaml.safe_dump(cluster.lab_admin().model_dump(mode="json")), "utf-8")
    return RunningController(cluster, admin_config=str(config), **settings)
