"""The RBAC scanner (tests/tools/rbac_scan.py) finds what it must, and only that.

tests/k8s/test_manifests.py runs the scanner on the shipped package and RBAC; here each
rule of the scanner meets a module and a role written for it: a call it must map, a verb
no rule grants, a grant no call needs, a Role asked for cluster-wide access.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.rbac_scan import (
    DISCOVERY,
    SERVICE_ACCOUNT,
    Need,
    check,
    client_methods,
    client_paths,
    endpoint_from_path,
    grants_in,
    missing,
    parse_method,
    scan_for_needs,
    unused,
)

SUBJECT = {"kind": "ServiceAccount", "namespace": SERVICE_ACCOUNT[0], "name": SERVICE_ACCOUNT[1]}


def scan(tmp_path: Path, source: str) -> tuple[list[Need], list[str]]:
    """The needs and problems of one module holding ``source``."""
    (tmp_path / "mod.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return scan_for_needs([tmp_path / "mod.py"], root=tmp_path)


def rule(resource: str, *verbs: str, group: str = "", **extra: Any) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": [resource], "verbs": list(verbs), **extra}


def rbac(
    path: Path,
    *rules: dict[str, Any],
    role: str = "ClusterRole",
    binding: str = "ClusterRoleBinding",
    subject: dict[str, str] = SUBJECT,
) -> Path:
    """An RBAC file: one role of ``rules`` bound to ``subject`` (our ServiceAccount)."""
    name = path.stem  # two files, two roles: a name is one object in a cluster
    meta = {"name": name} | ({"namespace": "shop"} if role == "Role" else {})
    bind_meta = {"name": name} | ({"namespace": "shop"} if binding == "RoleBinding" else {})
    api = "rbac.authorization.k8s.io/v1"
    docs = [
        {"apiVersion": api, "kind": role, "metadata": meta, "rules": list(rules)},
        {
            "apiVersion": api,
            "kind": binding,
            "metadata": bind_meta,
            "roleRef": {"apiGroup": api.split("/")[0], "kind": role, "name": name},
            "subjects": [subject],
        },
    ]
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


# ------------------------------------------------------------------ method names


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("list_namespaced_pod", ("list", "pods", True)),
        ("list_pod_for_all_namespaces", ("list", "pods", False)),
        ("read_namespaced_pod", ("get", "pods", True)),
        ("patch_namespaced_pod", ("patch", "pods", True)),
        ("patch_namespaced_pod_status", ("patch", "pods/status", True)),
        ("create_namespaced_event", ("create", "events", True)),
        ("patch_namespaced_event", ("patch", "events", True)),
        ("list_namespaced_event", ("list", "events", True)),
        ("read_node", ("get", "nodes", False)),
        ("list_node", ("list", "nodes", False)),
        ("patch_node", ("patch", "nodes", False)),
        ("read_namespaced_lease", ("get", "leases", True)),
        ("create_namespaced_lease", ("create", "leases", True)),
        ("replace_namespaced_lease", ("update", "leases", True)),
        ("read_namespaced_config_map", ("get", "configmaps", True)),
        ("list_namespaced_custom_object", ("list", "", True)),
        ("list_cluster_custom_object", ("list", "", False)),
        ("get_namespaced_custom_object", ("get", "", True)),
        ("patch_namespaced_custom_object_status", ("patch", "/status", True)),
        ("replace_namespaced_custom_object_status", ("update", "/status", True)),
        ("delete_collection_namespaced_pod", ("deletecollection", "pods", True)),
        ("create_namespaced_pod_eviction", ("create", "pods/eviction", True)),
        ("read_namespaced_pod_log", ("get", "pods/log", True)),
        ("list_namespaced_endpoints", ("list", "endpoints", True)),
        ("list_namespaced_network_policy", ("list", "networkpolicies", True)),
        ("list_ingress_class", ("list", "ingressclasses", False)),
        (
            "create_validating_admission_policy_binding",
            ("create", "validatingadmissionpolicybindings", False),
        ),  # noqa: E501
    ],
)
def test_method_name_parser(method: str, expected: tuple[str, str, bool]) -> None:
    endpoint = parse_method(method)
    assert endpoint is not None
    assert (endpoint.verb, endpoint.resource, endpoint.namespaced) == expected


@pytest.mark.parametrize(
    "cname", ["CoreV1Api", "CoordinationV1Api", "EventsV1Api", "AppsV1Api", "PolicyV1Api"]
)
def test_method_name_parser_agrees_with_the_client(cname: str) -> None:
    """For the APIs a controller like ours uses, the parser matches the client's paths."""
    checked, wrong = 0, []
    for method, classes in client_methods().items():
        if cname not in classes or DISCOVERY.match(method) or method.startswith("connect_"):
            continue
        found = client_paths(cname).get(method)
        if found is None:
            continue
        endpoint = parse_method(method)
        truth = endpoint_from_path(*found)
        checked += 1
        if endpoint is None or (endpoint.verb, endpoint.resource) != truth:
            wrong.append(f"{method}: parsed {endpoint}, client requests {found}")
    # a client whose paths cannot be read would check nothing: that fails, not skips
    assert checked, f"cannot read request paths from this kubernetes client's {cname}"
    assert wrong == []


# ------------------------------------------------------------------ scanning code


def test_raw_options_never_watch() -> None:
    """The scanner reads ``**raw(...)`` as adding no ``watch``: raw() must keep to that."""
    from artifactcheck.clients.kube import raw

    assert set(raw(1.0)) == {"_preload_content", "_request_timeout"}
    assert raw((1.0, 2.0))["_preload_content"] is False


def test_reads_raw_options(tmp_path: Path) -> None:
    """``**raw(t)`` leaves a list call a list; any other ``**`` splat may also watch."""
    needs, problems = scan(
        tmp_path,
        """
        from kubernetes import client
        from artifactcheck.clients.kube import raw

        def run(v1: client.CoreV1Api, extra: dict):
            v1.list_node(**raw(5.0))
            v1.list_namespaced_pod('shop', watch=True, **raw(5.0))
            v1.list_namespaced_event('shop', **extra)
        """,
    )
    assert {(n.method, n.verb) for n in needs} == {
        ("list_node", "list"),
        ("list_namespaced_pod", "watch"),
        ("list_namespaced_event", "list"),
        ("list_namespaced_event", "watch"),
    }
    assert problems == []


CONTROLLER_LIKE = """
from kubernetes import client, watch
from kubernetes.leaderelection.resourcelock.configmaplock import ConfigMapLock

GROUP = "artifactcheck.io"

def run(v1: client.CoreV1Api, co: client.CustomObjectsApi, ev: client.EventsV1Api):
    v1.list_namespaced_pod("shop", label_selector="app=web")
    for _ in watch.Watch().stream(v1.list_namespaced_pod, "shop"):
        pass
    v1.patch_namespaced_pod_status("p", "shop", {})
    ev.create_namespaced_event("shop", {})
    make_api().patch_namespaced_event("e", "shop", {})  # which API? both groups needed
    co.list_cluster_custom_object(GROUP, "v1alpha1", "artifactchecks")
    co.patch_namespaced_custom_object_status(
        group="artifactcheck.io", version="v1alpha1", namespace="shop",
        plural="artifactchecks", name="web", body={})
    v1.patch_node("n1", {})
    v1.delete_namespaced_pod("p", "shop")
    v1.read_namespaced_secret("s", "shop")
    api = client.ApiClient()
    api.call_api("/api/v1/pods", "GET")
    # asyncio.create_task and friends are not Kubernetes calls:
    v1.close()
"""


def test_maps_calls_the_ways_a_controller_writes_them(tmp_path: Path) -> None:
    needs, problems = scan(tmp_path, CONTROLLER_LIKE)
    got = {(n.method, n.groups, n.resource, n.verb, n.namespaced) for n in needs}
    assert {
        ("list_namespaced_pod", ("",), "pods", "list", True),
        ("list_namespaced_pod", ("",), "pods", "watch", True),
        ("patch_namespaced_pod_status", ("",), "pods/status", "patch", True),
        ("create_namespaced_event", ("events.k8s.io",), "events", "create", True),
        ("patch_namespaced_event", ("", "events.k8s.io"), "events", "patch", True),
        ("list_cluster_custom_object", ("artifactcheck.io",), "artifactchecks", "list", False),
        (
            "patch_namespaced_custom_object_status",
            ("artifactcheck.io",),
            "artifactchecks/status",
            "patch",
            True,
        ),
        ("patch_node", ("",), "nodes", "patch", False),
        # followed into the kubernetes helper: a ConfigMap lock reads and replaces ConfigMaps
        ("replace_namespaced_config_map", ("",), "configmaps", "update", True),
    } <= got
    assert not any(n.method == "close" for n in needs)
    assert any("call_api" in p for p in problems)


ASYNC_CONTROLLER_LIKE = """
from artifactcheck.clients import kube_routes as routes
from artifactcheck.clients.kube_routes import EVENTS, LEASES, NODES, PODS


async def act(kube, ns, name, patch, path_of):
    await kube.get("get pod", PODS.path(ns, name), passthrough=(404,))
    await kube.patch("patch status", PODS.path(ns, name, "status"), patch)
    await kube.patch("patch node", NODES.cluster_path(name), patch)
    await kube.create("create event", EVENTS.path(ns), patch)
    await kube.replace("renew", routes.LEASES.path(ns, name), patch)
    await kube.list("pods everywhere", PODS.cluster_path())
    async for _ in kube.watch("watch", PODS.path(ns) if ns else PODS.cluster_path()):
        pass
    where = LEASES.path(ns, name)  # built apart from its request: which verb?
    await kube.patch("patch", PODS.path(ns, name, sub=path_of()), patch)  # which subresource?
"""


def test_maps_the_asynchronous_client_s_requests_by_their_routes(tmp_path: Path) -> None:
    """A request of the asynchronous client needs the verb of its method on the
    resource its route names, in that resource's group and scope; a route built apart
    from a request, or with a subresource not spelt out, is a problem, never a guess."""
    needs, problems = scan(tmp_path, ASYNC_CONTROLLER_LIKE)
    got = {(n.groups, n.resource, n.verb, n.namespaced) for n in needs}
    assert got == {
        (("",), "pods", "get", True),
        (("",), "pods/status", "patch", True),
        (("",), "nodes", "patch", False),
        (("",), "events", "create", True),
        (("coordination.k8s.io",), "leases", "update", True),
        (("",), "pods", "list", False),
        (("",), "pods", "watch", True),
        (("",), "pods", "watch", False),
    }
    assert len(problems) == 2, problems
    lines = ASYNC_CONTROLLER_LIKE.splitlines()
    apart = next(i for i, line in enumerate(lines, 1) if "where = LEASES" in line)
    unspelt = next(i for i, line in enumerate(lines, 1) if "sub=path_of()" in line)
    assert any(f"mod.py:{apart}: leases path() is not an argument" in p for p in problems)
    assert any(f"mod.py:{unspelt}: pods path() is not an argument" in p for p in problems)


def test_a_module_that_does_not_parse_is_a_problem(tmp_path: Path) -> None:
    needs, problems = scan(tmp_path, "def run(:\n")
    assert needs == []
    assert len(problems) == 1 and "mod.py: cannot be parsed" in problems[0]


# ------------------------------------------------------------------ needs against grants


def test_reports_what_no_rule_grants(tmp_path: Path) -> None:
    """Each call no rule allows is named with its line; allowed calls are not reported."""
    needs, _ = scan(tmp_path, CONTROLLER_LIKE)
    main = rbac(
        tmp_path / "rbac.yaml",
        rule("pods", "list", "watch"),
        rule("pods/status", "patch"),
        rule("events", "create", "patch", group="events.k8s.io"),
    )
    cordon = rbac(tmp_path / "cordon.yaml", rule("nodes", "patch"))
    failures = "\n".join(missing(needs, grants_in([main, cordon])))
    assert "delete_namespaced_pod() deletes" in failures
    assert "read_namespaced_secret() needs 'get' on 'secrets'" in failures
    assert "replace_namespaced_config_map() needs 'update' on 'configmaps'" in failures
    assert "mod.py:" in failures
    # an unknown receiver needs each group its method exists in, and says so
    assert "patch_namespaced_event() needs 'patch' on 'events' in API group '' (core)" in failures
    assert "the receiver's client class is unknown" in failures
    for allowed in ("patch_namespaced_pod_status", "list_namespaced_pod", "patch_node"):
        assert allowed not in failures
    without_cordon = "\n".join(missing(needs, grants_in([main])))
    assert "patch_node() needs 'patch' on 'nodes' in API group '' (core)" in without_cordon
    assert "node rights belong in k8s/rbac-node-cordon.yaml only" in without_cordon


def test_a_missing_verb_is_named_with_the_rule_to_add(tmp_path: Path) -> None:
    """Granting list does not grant watch: the message gives the rule that would."""
    needs, _ = scan(
        tmp_path,
        """
        from kubernetes import client
        def run(v1: client.CoreV1Api):
            v1.list_namespaced_pod("shop", watch=True)
        """,
    )
    (failure,) = missing(needs, grants_in([rbac(tmp_path / "r.yaml", rule("pods", "list"))]))
    assert "mod.py:4: list_namespaced_pod() needs 'watch' on 'pods'" in failure
    assert failure.endswith('- apiGroups: [""]\n  resources: ["pods"]\n  verbs: ["watch"]')
    ok = grants_in([rbac(tmp_path / "r.yaml", rule("pods", "watch"))])
    assert missing(needs, ok) == []


@pytest.mark.parametrize(
    ("role", "binding", "cluster_call_allowed"),
    [
        ("ClusterRole", "ClusterRoleBinding", True),
        ("ClusterRole", "RoleBinding", False),  # a ClusterRole bound in one namespace
        ("Role", "RoleBinding", False),
    ],
)
def test_only_a_cluster_role_binding_grants_cluster_wide(
    tmp_path: Path, role: str, binding: str, cluster_call_allowed: bool
) -> None:
    needs, _ = scan(
        tmp_path,
        """
        from kubernetes import client
        def run(v1: client.CoreV1Api):
            v1.list_namespaced_pod("shop")
            v1.list_pod_for_all_namespaces()
        """,
    )
    grants = grants_in(
        [rbac(tmp_path / "r.yaml", rule("pods", "list"), role=role, binding=binding)]
    )
    failures = missing(needs, grants)
    assert [f for f in failures if "list_namespaced_pod()" in f] == []
    assert (failures == []) is cluster_call_allowed
    if not cluster_call_allowed:
        assert "list_pod_for_all_namespaces() needs 'list' on 'pods'" in failures[0]
        assert "cluster-wide (a ClusterRole bound by a ClusterRoleBinding)" in failures[0]


def test_resource_names_allow_only_calls_by_name(tmp_path: Path) -> None:
    """A rule limited to named objects grants get and patch, never a list."""
    needs, _ = scan(
        tmp_path,
        """
        from kubernetes import client
        def run(v1: client.CoreV1Api):
            v1.read_namespaced_config_map("c", "shop")
            v1.list_namespaced_config_map("shop")
        """,
    )
    named = rule("configmaps", "get", "list", resourceNames=["c"])
    (failure,) = missing(needs, grants_in([rbac(tmp_path / "r.yaml", named)]))
    assert "list_namespaced_config_map() needs 'list' on 'configmaps'" in failure


def test_grants_count_only_when_bound_to_our_service_account(tmp_path: Path) -> None:
    other = {"kind": "ServiceAccount", "namespace": "shop", "name": "someone-else"}
    assert grants_in([rbac(tmp_path / "other.yaml", rule("pods", "list"), subject=other)]) == []
    (grant,) = grants_in([rbac(tmp_path / "ours.yaml", rule("pods", "list"))])
    assert grant.cluster_wide and grant.source == "ours.yaml#0 ClusterRole/ours"
    dangling = tmp_path / "dangling.yaml"
    dangling.write_text(
        "\n---\n".join((tmp_path / "ours.yaml").read_text().split("---\n")[1:]), encoding="utf-8"
    )
    assert grants_in([dangling]) == [], "a binding to a role that does not exist grants nothing"


def test_reports_unused_grants(tmp_path: Path) -> None:
    """A rule granting what no call needs is reported, naming the role, verb and resource."""
    needs, problems = scan(
        tmp_path,
        """
        from kubernetes import client

        def run(v1: client.CoreV1Api):
            v1.list_namespaced_config_map('shop', label_selector='a=b')
            v1.patch_namespaced_pod('p', 'shop', {})
        """,
    )
    assert problems == []
    grants = grants_in(
        [
            rbac(
                tmp_path / "rbac.yaml",
                rule("configmaps", "get", "list"),
                rule("pods", "patch"),
                rule("secrets", "list"),
                role="Role",
                binding="RoleBinding",
            )
        ]
    )
    assert missing(needs, grants) == []
    found = unused(needs, grants)
    assert len(found) == 2, found
    assert "rbac.yaml#0 Role/rbac grants 'get' on 'configmaps' in API group '' (core)" in found[0]
    assert "grants 'list' on 'secrets'" in found[1]
    # a watch is not a list: each verb stands alone
    watch_only = [n for n in needs if n.verb != "list"]
    assert any("'list' on 'configmaps'" in u for u in unused(watch_only, grants))


def test_a_namespaced_grant_is_not_used_by_a_cluster_wide_call(tmp_path: Path) -> None:
    """A Role's rule serves namespaced calls only: a cluster-wide call leaves it unused."""
    needs, _ = scan(
        tmp_path,
        """
        from kubernetes import client
        def run(v1: client.CoreV1Api):
            v1.list_pod_for_all_namespaces()
        """,
    )
    grants = grants_in(
        [rbac(tmp_path / "r.yaml", rule("pods", "list"), role="Role", binding="RoleBinding")]
    )
    (found,) = unused(needs, grants)
    assert "grants 'list' on 'pods'" in found


def test_check_reports_problems_missing_and_unused_together(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(
        "from kubernetes import client\n"
        "def run(v1: client.CoreV1Api, api: client.ApiClient):\n"
        "    v1.list_namespaced_pod('shop')\n"
        "    api.call_api('/api/v1/pods', 'GET')\n",
        encoding="utf-8",
    )
    path = rbac(tmp_path / "r.yaml", rule("pods", "watch"))
    failures = check([tmp_path / "mod.py"], [path], root=tmp_path)
    assert len(failures) == 3, failures
    assert "call_api reaches the API in a way RBAC cannot be checked" in failures[0]
    assert "needs 'list' on 'pods'" in failures[1]
    assert "grants 'watch' on 'pods'" in failures[2]
