"""The fake API server's RBAC: requests naming a user are authorised as a real server
authorises them (sim/artifactcheck_sim/apiserver_rbac.py), so tests of who may do what
meet a 403 where a cluster would answer one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from artifactcheck_sim.apiserver import FakeApiServer

RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop", "home")).start()
    srv.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": "cm-reader"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        }
    )
    srv.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "one-cm", "namespace": "home"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "verbs": ["update"],
                    "resourceNames": ["mine"],
                }
            ],
        }
    )
    for ns, kind, role, subject in (
        ("shop", "ClusterRole", "cm-reader", {"kind": "User", "name": "alice"}),
        ("home", "Role", "one-cm", {"kind": "ServiceAccount", "name": "ctl"}),
    ):
        srv.create(
            {
                "apiVersion": RBAC,
                "kind": "RoleBinding",
                "metadata": {"name": f"b-{role}", "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                "subjects": [subject],
            }
        )
    for ns in ("shop", "home"):
        for name in ("mine", "other"):
            srv.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns},
                }
            )
    srv.rbac = True
    try:
        yield srv
    finally:
        srv.stop()


_open: list[Any] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


def core_as(server: FakeApiServer, user: str | None) -> Any:
    api = server.api_client()
    _open.append(api)
    if user is not None:
        api.set_default_header("Impersonate-User", user)
    return client.CoreV1Api(api)


def status_of(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_a_cluster_role_bound_in_a_namespace_grants_there_only(server: FakeApiServer) -> None:
    alice = core_as(server, "alice")
    assert status_of(lambda: alice.read_namespaced_config_map("mine", "shop")) == 200
    assert status_of(lambda: alice.list_namespaced_config_map("shop")) == 200
    assert status_of(lambda: alice.read_namespaced_config_map("mine", "home")) == 403
    assert status_of(lambda: alice.list_config_map_for_all_namespaces()) == 403
    assert status_of(lambda: alice.delete_namespaced_config_map("mine", "shop")) == 403
    assert status_of(lambda: core_as(server, "bob").list_namespaced_config_map("shop")) == 403


def test_resource_names_and_service_accounts(server: FakeApiServer) -> None:
    ctl = core_as(server, "system:serviceaccount:home:ctl")
    mine = ctl.read_namespaced_config_map  # not granted: update only

    assert status_of(lambda: mine("mine", "home")) == 403
    body = {"metadata": {"name": "mine", "namespace": "home"}, "data": {"k": "v"}}
    assert status_of(lambda: ctl.replace_namespaced_config_map("mine", "home", body)) == 200
    other = {"metadata": {"name": "other", "namespace": "home"}, "data": {"k": "v"}}
    assert status_of(lambda: ctl.replace_namespaced_config_map("other", "home", other)) == 403
    assert status_of(lambda: ctl.replace_namespaced_config_map("mine", "shop", body)) == 403


def test_the_forbidden_answer_is_a_real_server_s(server: FakeApiServer) -> None:
    with pytest.raises(ApiException) as caught:
        core_as(server, "alice").delete_namespaced_config_map("mine", "shop")
    assert caught.value.status == 403
    assert (
        'configmaps \\"mine\\" is forbidden: User \\"alice\\" cannot delete resource '
        '\\"configmaps\\" in API group \\"\\" in the namespace \\"shop\\"'
    ) in caught.value.body


def test_no_user_named_is_the_administrator_and_rbac_off_allows_all(
    server: FakeApiServer,
) -> None:
    assert (
        status_of(lambda: core_as(server, None).delete_namespaced_config_map("other", "shop"))
        == 200
    )
    server.rbac = False
    assert (
        status_of(lambda: core_as(server, "bob").delete_namespaced_config_map("mine", "shop"))
        == 200
    )
