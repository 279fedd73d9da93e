"""The NetworkPolicy k8s/ ships: who may reach each of the controller's ports.

The upstream schema check of every file in k8s/ (test_manifests.py,
``test_builtin_kinds_validate_strictly``) validates the policy itself; here it is read
the way a CNI reads it (label selectors, namespaces, named ports) and asked, for each
kind of client, which port it reaches. The health port is open to any source because
kubelet's probes come from the node; so it must serve nothing but the probes
(tests/gates/test_probe_port.py shows a real controller's probe-only server).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
POLICY = "networkpolicy.yaml"
NAMESPACE = "artifactcheck-system"


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _policy() -> dict[str, Any]:
    (doc,) = _load(K8S / POLICY)
    assert doc["kind"] == "NetworkPolicy"
    return doc


def _controller_template(path: Path) -> dict[str, Any]:
    (doc,) = [d for d in _load(path) if d["kind"] in ("Deployment", "StatefulSet")]
    return doc


def _matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector of matchLabels only (the policy uses no other form)."""
    assert selector is not None
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _port_name(container: dict[str, Any], number: int) -> str:
    (name,) = [p["name"] for p in container["ports"] if p["containerPort"] == number]
    return str(name)


def reaches(
    policy: dict[str, Any],
    *,
    port: str,
    pod: dict[str, str] | None,
    namespace: str | None,
    namespace_labels: dict[str, str] | None = None,
) -> bool:
    """Whether a client reaches the selected pods' ``port`` (a named port) under
    ``policy``, as NetworkPolicy semantics say; ``pod`` None: not a pod (kubelet on
    the node)."""
    ns_labels = namespace_labels or (
        {"kubernetes.io/metadata.name": namespace} if namespace else {}
    )
    for rule in policy["spec"].get("ingress") or []:
        if not any(p.get("port") == port for p in rule.get("ports") or [{"port": port}]):
            continue
        peers = rule.get("from")
        if peers is None:
            return True  # no "from": every source
        for peer in peers:
            if pod is None:
                continue  # the node is no pod: only an ipBlock could name it
            if "namespaceSelector" in peer:
                in_ns = _matches(peer["namespaceSelector"], ns_labels)
            else:
                in_ns = namespace == policy["metadata"]["namespace"]
            if in_ns and ("podSelector" not in peer or _matches(peer["podSelector"], pod)):
                return True
    return False


def test_the_installs_apply_the_policy() -> None:
    for kustomization in (K8S / "kustomization.yaml", K8S / "namespaced" / "kustomization.yaml"):
        (doc,) = _load(kustomization)
        assert any(Path(r).name == POLICY for r in doc["resources"]), kustomization


@pytest.mark.parametrize(
    "workload", [K8S / "deployment.yaml", K8S / "sharded" / "statefulset.yaml"], ids=str
)
def test_the_policy_covers_every_port_of_every_controller_pod(workload: Path) -> None:
    policy = _policy()
    template = _controller_template(workload)
    assert template["metadata"]["namespace"] == policy["metadata"]["namespace"] == NAMESPACE
    assert _matches(
        policy["spec"]["podSelector"], template["spec"]["template"]["metadata"]["labels"]
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (container,) = template["spec"]["template"]["spec"]["containers"]
    named = {p["name"] for p in container["ports"]}
    ruled = {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}
    assert ruled == named == {"health", "metrics"}


def test_the_probe_port_is_separate_from_metrics_and_the_api() -> None:
    """kubelet probes the health port; the controller is told to serve /metrics (and so
    the API) on another port, which the probes never use."""
    container = _controller_template(K8S / "deployment.yaml")["spec"]["template"]["spec"][
        "containers"
    ][0]
    args = container["command"]
    health = int(args[args.index("--health-port") + 1])
    metrics = int(args[args.index("--metrics-port") + 1])
    assert health != metrics and metrics != 0
    assert _port_name(container, health) == "health"
    assert _port_name(container, metrics) == "metrics"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "health"


CONTROLLER = {
    "app.kubernetes.io/name": "artifactcheck",
    "app.kubernetes.io/component": "controller",
}


@pytest.mark.parametrize(
    ("who", "pod", "namespace", "health", "metrics"),
    [
        ("kubelet (the node)", None, None, True, False),
        ("the standby replica", CONTROLLER, NAMESPACE, True, True),
        ("Prometheus", {"app.kubernetes.io/name": "prometheus"}, "monitoring", True, True),
        ("Argo Rollouts", {"app.kubernetes.io/name": "argo-rollouts"}, "argo-rollouts", True, True),
        ("Flagger", {"app.kubernetes.io/name": "flagger"}, "flagger-system", True, True),
        ("a tenant's pod", {"app": "web"}, "shop", True, False),
        (
            "a pod labelled as Prometheus elsewhere",
            {"app.kubernetes.io/name": "prometheus"},
            "shop",
            True,
            False,
        ),
        ("a pod labelled as the controller elsewhere", CONTROLLER, "shop", True, False),
        (
            "another pod in monitoring",
            {"app.kubernetes.io/name": "grafana"},
            "monitoring",
            True,
            False,
        ),
        ("another pod of the controller's namespace", {"app": "debug"}, NAMESPACE, True, False),
    ],
)
def test_who_reaches_which_port(
    who: str, pod: dict[str, str] | None, namespace: str | None, health: bool, metrics: bool
) -> None:
    policy = _policy()
    got = (
        reaches(policy, port="health", pod=pod, namespace=namespace),
        reaches(policy, port="metrics", pod=pod, namespace=namespace),
    )
    assert got == (health, metrics), who
