"""Pod discovery, the ArtifactCheck resource and error translation, over real HTTP.

The official ``kubernetes`` client talks to the fake API server exactly as to a
cluster, so these tests pin what artifactcheck asks for (one list call, selectors) and
how it reads what comes back (every Instance field, V1Pod models and watch events).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from artifactcheck.clients.kube import WatchExpired, load_api_client
from artifactcheck.control.status import (
    list_checks,
    list_checks_raw,
    patch_check_status,
    watch_checks,
)
from artifactcheck.discover.kube_pods import (
    default_source,
    discover_pods,
    list_pods_raw,
    pod_is_serving,
    pod_to_instance,
    watch_pods,
)
from artifactcheck.model.errors import ConfigError, DependencyError
from artifactcheck.model.names import DEFAULT_CONDITION_TYPE
from artifactcheck.model.settings import KubernetesSource
from artifactcheck.model.values import VersionSignal
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.apiserver_resources import ARTIFACTCHECKS, BUILTIN_RESOURCES

SHA_A = "docker-pullable://nginx@sha256:" + "a" * 64
SHA_B = "docker-pullable://nginx@sha256:" + "b" * 64
FAST = (1.0, 2.0)  # request timeout for tests that expect failures
#: caplog levels are set on our own logger: another test (the CLI) may have raised the
#: level of the "artifactcheck" logger, and records must still reach caplog.
LOGGER = "artifactcheck.control.status"


def source(**kw: Any) -> KubernetesSource:
    return KubernetesSource(**kw)


# --------------------------------------------------------------------------- discovery


def test_one_list_call_with_the_label_selector(server, api, make_pod) -> None:
    make_pod("web-1", labels={"app": "web", "tier": "front"}, ip="127.0.0.11")
    make_pod("web-2", labels={"app": "web", "tier": "front"}, ip="127.0.0.12")
    make_pod("api-1", labels={"app": "api"}, ip="127.0.0.13")
    make_pod("other-ns", namespace="kube-system", labels={"app": "web"}, ip="127.0.0.14")
    server.reset_requests()

    found = discover_pods(source(selector="app=web,tier in (front)"), api_client=api)

    assert [i.name for i in found] == ["default/web-1", "default/web-2"]
    ((method, target),) = server.requests  # exactly one request: the list (one page)
    url = urlsplit(target)
    assert (method, url.path) == ("GET", "/api/v1/namespaces/default/pods")
    assert parse_qs(url.query) == {"labelSelector": ["app=web,tier in (front)"], "limit": ["500"]}


def test_empty_selector_lists_the_whole_namespace(server, api, make_pod) -> None:
    make_pod("a", labels={}, ip="127.0.0.11")
    make_pod("b", labels={"x": "y"}, ip="127.0.0.12")
    server.reset_requests()
    assert [i.name for i in discover_pods(source(), api_client=api)] == ["default/a", "default/b"]
    assert server.requests == [("GET", "/api/v1/namespaces/default/pods?limit=500")]


def test_only_serving_pods_by_default(server, api, make_pod) -> None:
    make_pod("ready", ip="127.0.0.11")
    make_pod("no-ip", ip=None, ready=False)
    make_pod("starting", ip="127.0.0.12", ready=False)
    make_pod(
        "half-ready",
        ip="127.0.0.13",
        containers=(("nginx", "nginx:1", SHA_A), ("sidecar", "envoy:1", SHA_B)),
    )
    # one of two containers not ready
    server.patch_status(
        "v1",
        "Pod",
        "default",
        "half-ready",
        {
            "status": {
                "containerStatuses": [
                    {
                        "name": "nginx",
                        "image": "nginx:1",
                        "imageID": SHA_A,
                        "ready": True,
                        "restartCount": 0,
                    },
                    {
                        "name": "sidecar",
                        "image": "envoy:1",
                        "imageID": SHA_B,
                        "ready": False,
                        "restartCount": 3,
                    },
                ]
            }
        },
        patch_type="merge",
    )
    # terminating: a finalizer keeps it visible with a deletionTimestamp
    make_pod("leaving", ip="127.0.0.14")
    server.patch("v1", "Pod", "default", "leaving", {"metadata": {"finalizers": ["test/hold"]}})
    server.delete("v1", "Pod", "default", "leaving")
    assert server.get("v1", "Pod", "default", "leaving")["metadata"]["deletionTimestamp"]

    assert [i.name for i in discover_pods(source(), api_client=api)] == ["default/ready"]

    every = discover_pods(source(ready_only=False), api_client=api)
    # without an IP there is nothing to fetch from: never an instance
    assert [i.name for i in every] == [
        "default/half-ready",
        "default/leaving",
        "default/ready",
        "default/starting",
    ]


def test_every_instance_field(server, api, make_pod) -> None:
    make_pod(
        "web-7f9c-abcde",
        namespace="shop",
        labels={"app": "web", "app.kubernetes.io/version": "1.4.2"},
        annotations={"release.example.com/version": "1.4.2-b7", "team": "storefront"},
        ip="127.0.0.21",
        node="node-b",
        owner=("ReplicaSet", "web-7f9c"),
        containers=(("nginx", "nginx:1.27", SHA_A), ("sidecar", "envoy:1.30", SHA_B)),
        status_order=(1, 0),  # kubelet does not promise the spec's order
        gate=True,
        gate_status="False",
        start_time="2024-05-01T10:00:00Z",
    )
    (inst,) = discover_pods(
        source(
            namespace="shop",
            selector="app=web",
            version_annotation="release.example.com/version",
            scheme="https",
            port=8443,
        ),
        api_client=api,
    )
    pod = server.get("v1", "Pod", "shop", "web-7f9c-abcde")
    assert inst.name == "shop/web-7f9c-abcde"
    assert inst.kind == "pod"
    assert inst.namespace == "shop"
    assert inst.base_url == "https://127.0.0.21:8443/"
    assert inst.signals == (
        VersionSignal("label:app.kubernetes.io/version", "1.4.2"),
        VersionSignal("annotation:release.example.com/version", "1.4.2-b7"),
    )
    assert inst.reported_version == "1.4.2"
    assert inst.image == "nginx:1.27"  # the first container of the spec, not of the status
    assert inst.image_id == SHA_A
    assert inst.node == "node-b"
    assert inst.owner == "web-7f9c"
    assert inst.started_at == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert inst.uid == pod["metadata"]["uid"]
    assert dict(inst.labels) == {"app": "web", "app.kubernetes.io/version": "1.4.2"}
    assert inst.annotations["team"] == "storefront"
    assert inst.has_readiness_gate is True
    assert inst.gate_status == "False"
    assert inst.ready is False  # the gate holds the pod back


def test_pod_without_the_gate(server, api, make_pod) -> None:
    make_pod("plain", gate=False, ip="127.0.0.22")
    (inst,) = discover_pods(source(), api_client=api)
    assert inst.has_readiness_gate is False
    assert inst.gate_status is None
    assert inst.ready is True


def test_gate_status_and_other_condition_type(server, api, make_pod) -> None:
    make_pod("open", gate=True, gate_status="True", ip="127.0.0.23")
    (inst,) = discover_pods(source(), api_client=api)
    assert (inst.has_readiness_gate, inst.gate_status, inst.ready) == (True, "True", True)
    (other,) = discover_pods(source(), api_client=api, condition_type="example.com/other")
    assert (other.has_readiness_gate, other.gate_status) == (False, None)


def test_owner_falls_back_to_any_controller_and_start_to_creation(server, api, make_pod) -> None:
    make_pod("db-0", owner=("StatefulSet", "db"), start_time=None, ip="127.0.0.24")
    make_pod("bare", owner=None, ip="127.0.0.25")
    found = {i.name: i for i in discover_pods(source(version_label=None), api_client=api)}
    db = found["default/db-0"]
    assert db.owner == "db"
    created = server.get("v1", "Pod", "default", "db-0")["metadata"]["creationTimestamp"]
    assert db.started_at == datetime.fromisoformat(created.replace("Z", "+00:00"))
    assert found["default/bare"].owner is None
    assert found["default/bare"].signals == ()  # no version label configured


def test_ipv6_pod_address_is_bracketed(server, api, make_pod) -> None:
    make_pod("v6", ip="fd00::7")
    (inst,) = discover_pods(source(port=8080), api_client=api)
    assert inst.base_url == "http://[fd00::7]:8080/"


def test_pod_to_instance_accepts_models_and_watch_events(server, api, make_pod) -> None:
    make_pod("web-1", labels={"app": "web", "app.kubernetes.io/version": "2.0"}, ip="127.0.0.31")
    (expected,) = discover_pods(source(selector="app=web"), api_client=api)

    model = k8s.CoreV1Api(api).read_namespaced_pod("web-1", "default")
    assert isinstance(model, k8s.V1Pod)
    assert pod_to_instance(model, api_client=api) == expected
    assert pod_to_instance(model) == expected  # no client given: a temporary one
    assert pod_is_serving(model, api_client=api)

    events = []
    w = k8s_watch.Watch()
    for event in w.stream(
        k8s.CoreV1Api(api).list_namespaced_pod,
        "default",
        label_selector="app=web",
        timeout_seconds=5,
    ):
        events.append(event)
        w.stop()
    (event,) = events
    assert event["type"] == "ADDED"
    assert isinstance(event["object"], k8s.V1Pod)
    assert pod_to_instance(event, api_client=api) == expected
    assert pod_to_instance(event["object"], api_client=api) == expected
    assert pod_to_instance(event["raw_object"]) == expected
    assert pod_is_serving(event)


def test_pod_to_instance_without_ip_is_none(server, make_pod) -> None:
    pod = make_pod("pending", ip=None, ready=False)
    assert pod_to_instance(pod) is None
    assert not pod_is_serving(pod)


def test_default_condition_type_is_the_documented_one() -> None:
    assert DEFAULT_CONDITION_TYPE == "artifactcheck.io/content-verified"


# --------------------------------------------------------------------------- failures


def test_invalid_selector_is_a_config_error(api) -> None:
    with pytest.raises(ConfigError, match=r"list pods in default.*rejected by the API server"):
        discover_pods(source(selector="app in (web"), api_client=api)


def test_paused_api_server_is_a_dependency_error_then_recovers(server, api, make_pod) -> None:
    make_pod("web-1", ip="127.0.0.11")
    server.pause()
    try:
        with pytest.raises(DependencyError, match="unreachable") as info:
            discover_pods(source(), api_client=api, request_timeout=FAST)
        assert info.value.__cause__ is not None  # raise ... from exc
    finally:
        server.resume()
    assert [i.name for i in discover_pods(source(), api_client=api)] == ["default/web-1"]


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        (500, DependencyError, "answered 500"),
        (503, DependencyError, "answered 503"),
        (403, ConfigError, "RBAC"),
        (401, ConfigError, "credentials"),
    ],
)
def test_error_statuses_are_translated(server, api, status, error, text) -> None:
    server.inject("GET", r"/pods", status)
    with pytest.raises(error, match=text) as info:
        discover_pods(source(), api_client=api)
    assert isinstance(info.value.__cause__, k8s.ApiException)


def test_throttling_honours_retry_after_then_gives_up(server, api, make_pod) -> None:
    make_pod("web-1", ip="127.0.0.11")
    server.inject("GET", r"/pods", 429)  # answered with Retry-After: 1
    assert len(discover_pods(source(), api_client=api)) == 1  # the client waited and retried
    server.inject("GET", r"/pods", 429, times=-1)
    try:
        with pytest.raises(DependencyError, match="429"):
            discover_pods(source(), api_client=api)
    finally:
        server.clear_injections()


def test_hung_api_server_times_out(server, api) -> None:
    server.inject("GET", r"/pods", 0, times=-1, delay=3.0)
    try:
        with pytest.raises(DependencyError, match="too slow"):
            discover_pods(source(), api_client=api, request_timeout=(1.0, 0.2))
    finally:
        server.clear_injections()


# --------------------------------------------------------------------------- client config


def _kubeconfig(tmp_path: Path, server: FakeApiServer) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "me", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                "current-context": "fake",
            }
        )
    )
    return path


def test_load_api_client_from_kubeconfig(server, make_pod, tmp_path) -> None:
    make_pod("web-1", ip="127.0.0.11")
    path = _kubeconfig(tmp_path, server)
    with load_api_client(str(path), context="fake") as client:
        assert [i.name for i in discover_pods(source(), api_client=client)] == ["default/web-1"]


def test_load_api_client_uses_kubeconfig_env_when_not_in_cluster(
    server, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path, server)))
    with load_api_client() as client:
        assert client.configuration.host == server.url


def test_load_api_client_errors_are_config_errors(server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="in-cluster.*kubeconfig"):
        load_api_client()
    with pytest.raises(ConfigError, match="no usable Kubernetes configuration"):
        load_api_client(str(_kubeconfig(tmp_path, server)), context="no-such-context")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [unterminated\n")
    with pytest.raises(ConfigError, match="broken"):
        load_api_client(str(broken))


# --------------------------------------------------------------------------- ArtifactCheck


def _check(server: FakeApiServer, name: str, namespace: str = "default") -> dict[str, Any]:
    return server.create(
        {
            "apiVersion": "artifactcheck.io/v1alpha1",
            "kind": "ArtifactCheck",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"kubernetes": {"selector": "app=web"}},
        }
    )


def test_list_checks_namespaced_and_cluster_wide(server, api) -> None:
    _check(server, "shop-web")
    _check(server, "sys", namespace="kube-system")
    assert [c["metadata"]["name"] for c in list_checks(api, "default")] == ["shop-web"]
    assert sorted(c["metadata"]["name"] for c in list_checks(api)) == ["shop-web", "sys"]
    assert list_checks(api, "kube-public") == []


def test_patch_check_status_is_a_merge_patch_of_the_status_subresource(server, api) -> None:
    _check(server, "shop-web")
    status = {
        "observedGeneration": 1,
        "counts": {"consistent": 9, "mismatch": 1},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    out = patch_check_status(api, "default", "shop-web", status)
    assert out is not None and out["status"] == status
    # null removes a key; lists are replaced whole (merge patch, not strategic)
    out = patch_check_status(
        api, "default", "shop-web", {"counts": {"mismatch": None}, "conditions": []}
    )
    assert out is not None
    assert out["status"]["counts"] == {"consistent": 9}
    assert out["status"]["conditions"] == []
    stored = server.get("artifactcheck.io/v1alpha1", "ArtifactCheck", "default", "shop-web")
    assert stored["spec"] == {"kubernetes": {"selector": "app=web"}}
    assert (
        "PATCH",
        "/apis/artifactcheck.io/v1alpha1/namespaces/default/artifactchecks/shop-web/status",
    ) in server.requests


def test_patch_check_status_of_a_deleted_check_is_none(api, caplog) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert patch_check_status(api, "default", "gone", {"counts": {}}) is None
    assert "is gone" in caplog.text


def test_missing_crd_is_a_config_error() -> None:
    without_crd = [r for r in BUILTIN_RESOURCES if r is not ARTIFACTCHECKS]
    with FakeApiServer(resources=without_crd) as srv, srv.api_client() as client:
        with pytest.raises(ConfigError, match="CRD is not installed"):
            list_checks(client, "default")


def test_check_status_api_down_is_a_dependency_error(server, api) -> None:
    _check(server, "shop-web")
    server.inject("PATCH", r"/artifactchecks/", 503)
    with pytest.raises(DependencyError, match="answered 503"):
        patch_check_status(api, "default", "shop-web", {"counts": {}})


# --------------------------------------------------------------------------- list + watch


def test_list_then_watch_pods(server, api, make_pod) -> None:
    make_pod("web-1", labels={"app": "web"}, ip="127.0.0.11")
    make_pod("api-1", labels={"app": "api"}, ip="127.0.0.12")
    items, rv = list_pods_raw(api, namespace="default", selector="app=web")
    assert [i["metadata"]["name"] for i in items] == ["web-1"]
    assert rv == server.resource_version

    make_pod("web-2", labels={"app": "web"}, ip="127.0.0.13")  # ADDED, then MODIFIED (status)
    make_pod("api-2", labels={"app": "api"}, ip="127.0.0.14")  # not selected
    server.delete("v1", "Pod", "default", "web-1")
    seen = [
        (kind, obj["metadata"]["name"])
        for kind, obj in watch_pods(
            api, namespace="default", selector="app=web", resource_version=rv, timeout=1
        )
        if kind != "BOOKMARK"
    ]
    assert seen == [("ADDED", "web-2"), ("MODIFIED", "web-2"), ("DELETED", "web-1")]


def test_watch_events_convert_to_instances(server, api, make_pod) -> None:
    _, rv = list_pods_raw(api, namespace="default")
    make_pod("web-1", labels={"app": "web", "app.kubernetes.io/version": "3.1"}, ip="127.0.0.11")
    stop = threading.Event()
    instances = []
    for kind, obj in watch_pods(
        api, namespace="default", resource_version=rv, timeout=5, stop=stop
    ):
        if kind == "MODIFIED" and pod_is_serving(obj):
            instances.append(pod_to_instance(obj))
            stop.set()  # ends the watch after this event, long before its timeout
    (inst,) = instances
    assert (inst.name, inst.reported_version, inst.base_url) == (
        "default/web-1",
        "3.1",
        "http://127.0.0.11:80/",
    )
    deadline = time.monotonic() + 5  # the server notices the closed stream on its next write
    while server.watch_count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.watch_count == 0


def test_watch_from_a_compacted_version_expires(server, api, make_pod) -> None:
    _, rv = list_pods_raw(api, namespace="default")
    make_pod("web-1", ip="127.0.0.11")
    server.compact()
    with pytest.raises(WatchExpired, match="watch pods in default"):
        list(watch_pods(api, namespace="default", resource_version=rv, timeout=2))
    assert issubclass(WatchExpired, DependencyError)


def test_watch_broken_by_an_api_server_restart(server, api, make_pod) -> None:
    _, rv = list_pods_raw(api, namespace="default")
    received: list[str] = []
    failure: list[BaseException] = []

    def consume() -> None:
        try:
            for kind, _obj in watch_pods(api, namespace="default", resource_version=rv, timeout=20):
                received.append(kind)
        except DependencyError as exc:
            failure.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    deadline = time.monotonic() + 10
    while server.watch_count == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    server.pause()
    thread.join(timeout=15)
    server.resume()
    assert not thread.is_alive()
    (exc,) = failure
    assert isinstance(exc, DependencyError) and not isinstance(exc, WatchExpired)
    assert "watch pods in default" in str(exc)


def test_watch_of_an_unreachable_server_is_a_dependency_error(server, api) -> None:
    server.pause()
    try:
        with pytest.raises(DependencyError, match="unreachable"):
            list(watch_pods(api, namespace="default", resource_version="1", timeout=1))
    finally:
        server.resume()


def test_list_then_watch_checks(server, api) -> None:
    _check(server, "shop-web")
    items, rv = list_checks_raw(api)
    assert [i["metadata"]["name"] for i in items] == ["shop-web"]
    _check(server, "sys", namespace="kube-system")
    server.patch_status(
        "artifactcheck.io/v1alpha1", "ArtifactCheck", "default", "shop-web", {"status": {"x": 1}}
    )
    everywhere = [
        (k, o["metadata"]["name"])
        for k, o in watch_checks(api, resource_version=rv, timeout=1)
        if k != "BOOKMARK"
    ]
    assert everywhere == [("ADDED", "sys"), ("MODIFIED", "shop-web")]
    one_namespace = [
        (k, o["metadata"]["name"])
        for k, o in watch_checks(api, namespace="kube-system", resource_version=rv, timeout=1)
        if k != "BOOKMARK"
    ]
    assert one_namespace == [("ADDED", "sys")]


def test_default_source_selects_the_whole_namespace() -> None:
    src = default_source("shop")
    assert (src.namespace, src.selector, src.version_label) == (
        "shop",
        "",
        "app.kubernetes.io/version",
    )


def test_pods_are_listed_in_pages_each_converted_as_it_arrives(server, api, make_pod) -> None:
    """client-go's pager: ``limit``/``continue`` pages (500 by default), one snapshot's
    resourceVersion, each pod handed to ``each`` as its page arrives."""
    from artifactcheck.discover.kube_pods import list_pods_as

    for n in range(7):
        make_pod(f"web-{n}", labels={"app": "web"}, ip=f"127.0.0.{20 + n}")
    make_pod("api-1", labels={"app": "api"}, ip="127.0.0.40")
    rv = server.resource_version
    server.reset_requests()
    seen: list[int] = []

    def each(pod: dict) -> str:
        seen.append(server.verb_counts["list"])  # how many pages were asked for so far
        return str(pod["metadata"]["name"])

    names, listed_rv = list_pods_as(api, each, namespace="default", selector="app=web", page=3)
    assert sorted(names) == [f"web-{n}" for n in range(7)]
    assert listed_rv == rv
    assert server.verb_counts["list"] == 3  # 3 + 3 + 1
    assert seen == [1, 1, 1, 2, 2, 2, 3]  # converted page by page
    limits = [p for m, p in server.requests if m == "GET" and "limit=3" in p]
    assert len(limits) == 3 and sum("continue=" in p for p in limits) == 2
    # the default: 500 a page, the same pods
    items, _ = list_pods_raw(api, namespace="default", selector="app=web")
    assert sorted(i["metadata"]["name"] for i in items) == sorted(names)


def test_an_expired_continue_token_restarts_the_list_in_one_request(server, api, make_pod) -> None:
    """A snapshot compacted between two pages answers 410 Expired: the list starts
    over, unpaged, and no pod of the abandoned pages is returned twice."""
    from artifactcheck.discover.kube_pods import list_pods_as

    for n in range(5):
        make_pod(f"web-{n}", labels={"app": "web"}, ip=f"127.0.0.{20 + n}")
    compacted = []

    def each(pod: dict) -> str:
        if not compacted:  # after the first page: a write, then an etcd compaction
            make_pod("web-9", labels={"app": "web"}, ip="127.0.0.29")
            server.compact()
            compacted.append(True)
        return str(pod["metadata"]["name"])

    server.reset_requests()
    names, rv = list_pods_as(api, each, namespace="default", selector="app=web", page=2)
    assert sorted(names) == sorted([f"web-{n}" for n in range(5)] + ["web-9"])
    assert len(names) == 6
    assert rv == server.resource_version
    lists = [p for m, p in server.requests if m == "GET" and "/pods" in p]
    assert "continue=" in lists[1] and "limit" not in lists[2]
