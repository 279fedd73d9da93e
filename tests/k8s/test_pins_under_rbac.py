"""The pins and acceptances attacked by two users of different RBAC, over HTTP.

The fake API server authorises every request that names a user (``Impersonate-User``)
by the RBAC objects stored in it (sim/artifactcheck_sim/apiserver_rbac.py). Stored here:
the install's own (k8s/rbac.yaml, k8s/rbac-roles.yaml) and the bindings an admin
writes: ``alice`` edits ArtifactChecks in ``shop`` (``artifactcheck-editor``), ``rita``
approves releases there (``artifactcheck-release-approver``). The controller runs as its
ServiceAccount, with nothing but the shipped rights.

Alice, after ``ReleaseChanged=True``, tries to erase the pins (delete or rewrite the
ConfigMap in the controller's namespace, write the check's status), to accept the
rebuild herself, and deletes and re-creates the check: the pins and the held gates
stay. Rita accepts it with a ReleaseAcceptance, and can do nothing else.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from test_release_pins_controller import (
    HOME,
    STORE,
    acceptance_status,
    add_check,
    check_events,
    condition,
    cycles_pass,
    gate,
    manifest,
    pins,
    publish,
    sha,
    stored_pins,
)

from artifactcheck.model.names import ACCEPTANCE_PLURAL, CRD_GROUP, CRD_PLURAL, CRD_VERSION
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.running import RunningController

K8S = Path(__file__).resolve().parents[2] / "k8s"
SERVICE_ACCOUNT = f"system:serviceaccount:{HOME}:artifactcheck"
_net = itertools.count(1)


def _bind(user: str, role: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{role}", "namespace": "shop"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role,
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    n = next(_net)
    with SimCluster(first_host=f"127.84.{n}.1", cdn_host=f"127.84.{200 + n}.1") as c:
        for name in ("rbac.yaml", "rbac-roles.yaml"):
            for doc in yaml.safe_load_all((K8S / name).read_text()):
                c.api.create(doc)
        c.api.create(_bind("alice", "artifactcheck-editor"))
        c.api.create(_bind("rita", "artifactcheck-release-approver"))
        c.api.rbac = True
        yield c


def as_user(cluster: SimCluster, user: str) -> Any:
    client = cluster.api.api_client()
    client.set_default_header("Impersonate-User", user)
    return client


def forbidden(call: Callable[[], object]) -> str:
    """The 403 a request gets (fails the test when it is allowed)."""
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value
    return str(caught.value.body)


def acceptance(name: str, digest: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
        "kind": "ReleaseAcceptance",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"check": "web", "version": "1.4.2", "sha256": digest},
    }


def test_the_author_cannot_erase_pins_nor_accept_and_the_approver_can(
    cluster: SimCluster,
) -> None:
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    first = cluster.add_pod()
    alice, rita = as_user(cluster, "alice"), as_user(cluster, "rita")
    a_core, a_crd = CoreV1Api(alice), CustomObjectsApi(alice)
    r_core, r_crd = CoreV1Api(rita), CustomObjectsApi(rita)
    ctl = RunningController(cluster, admin=cluster.lab_admin(), lease_namespace=HOME)
    ctl.api_client.set_default_header("Impersonate-User", SERVICE_ACCOUNT)
    try:
        # alice writes her check (her right), the controller pins under the shipped RBAC
        a_crd.create_namespaced_custom_object(
            CRD_GROUP,
            CRD_VERSION,
            "shop",
            CRD_PLURAL,
            {
                "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
                "kind": "ArtifactCheck",
                "metadata": {"name": "probe", "namespace": "shop"},
                "spec": {"kubernetes": {"selector": "app=none"}},
            },
        )
        a_crd.delete_namespaced_custom_object(CRD_GROUP, CRD_VERSION, "shop", CRD_PLURAL, "probe")
        add_check(cluster)
        ctl.start()
        wait_for(lambda: gate(cluster, first.name) == "True", timeout=20)
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        publish(cluster, rebuilt)
        late = cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)

        # alice: the pins' store is out of her reach, in either namespace
        message = forbidden(lambda: a_core.delete_namespaced_config_map(STORE, HOME))
        assert 'User \\"alice\\" cannot delete resource \\"configmaps\\"' in message
        forbidden(
            lambda: a_core.patch_namespaced_config_map(STORE, HOME, {"data": {"pins.json": "{}"}})
        )
        forbidden(lambda: a_core.list_namespaced_config_map(HOME))
        # ... as is the status that mirrors them, and accepting
        forbidden(
            lambda: a_crd.patch_namespaced_custom_object_status(
                CRD_GROUP, CRD_VERSION, "shop", CRD_PLURAL, "web", {"status": {"releasePins": []}}
            )
        )
        forbidden(
            lambda: a_crd.create_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, "shop", ACCEPTANCE_PLURAL, acceptance("mine", sha(rebuilt))
            )
        )
        # what she can do: delete the check and create it again
        a_crd.delete_namespaced_custom_object(CRD_GROUP, CRD_VERSION, "shop", CRD_PLURAL, "web")
        wait_for(lambda: "shop/web" not in ctl.controller.checks)
        add_check(cluster)
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        cycles_pass(ctl, 4)
        assert gate(cluster, late.name) is None, "the gate holds"

        # rita: only acceptances
        forbidden(
            lambda: r_crd.patch_namespaced_custom_object(
                CRD_GROUP,
                CRD_VERSION,
                "shop",
                CRD_PLURAL,
                "web",
                {"metadata": {"labels": {"a": "b"}}},
            )
        )
        forbidden(lambda: r_core.delete_namespaced_config_map(STORE, HOME))
        r_crd.create_namespaced_custom_object(
            CRD_GROUP, CRD_VERSION, "shop", ACCEPTANCE_PLURAL, acceptance("rebuild", sha(rebuilt))
        )
        forbidden(
            lambda: r_crd.patch_namespaced_custom_object_status(
                CRD_GROUP,
                CRD_VERSION,
                "shop",
                ACCEPTANCE_PLURAL,
                "rebuild",
                {"status": {"phase": "Accepted"}},
            )
        )
        wait_for(
            lambda: acceptance_status(cluster, "rebuild").get("phase") == "Accepted", timeout=20
        )
        wait_for(lambda: gate(cluster, late.name) == "True", timeout=20)
        assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(rebuilt)
        (accepted,) = cluster.check_status()["acceptedReleases"]
        assert accepted["by"] == "ReleaseAcceptance shop/rebuild"
        (normal,) = check_events(cluster, "ReleaseAccepted")
        assert normal["type"] == "Normal" and sha(rebuilt) in normal["message"]
    finally:
        if ctl._thread.is_alive():
            ctl.stop()
        else:
            ctl.api_client.close()
        alice.close()
        rita.close()
