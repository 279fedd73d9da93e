"""The fake kube-apiserver, driven by the official ``kubernetes`` client over HTTP.

Each test pins one behaviour of a real API server that artifactcheck relies on
(or could trip over): CRUD and system metadata, error ``Status`` bodies, label
and field selectors, the three patch formats, status subresources and
``metadata.generation``, finalizers, leases, events, discovery.  Watches and
fault injection are in ``test_apiserver_watch.py``.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from artifactcheck_sim.apiserver import FakeApiServer

GROUP, VERSION, PLURAL = "artifactcheck.io", "v1alpha1", "artifactchecks"
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


# ----------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    before = set(threading.enumerate())
    srv = FakeApiServer().start()
    try:
        yield srv
    finally:
        srv.stop()
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[ApiClient]:
    with server.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def pod(
    name: str, labels: dict[str, str] | None = None, *, node: str | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
    if node:
        spec["nodeName"] = node
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }
    body.update(extra)
    return body


def check(name: str, spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ArtifactCheck",
        "metadata": {"name": name},
        "spec": spec if spec is not None else {"selector": {"app": "web"}, "interval": "30s"},
    }
    body.update(extra)
    return body


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def raw(
    server: FakeApiServer,
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str = "application/json",
) -> tuple[int, bytes]:
    """One plain HTTP request, for what the official client cannot send."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        headers = {"Content-Type": content_type} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------- CRUD & metadata


def test_create_sets_system_metadata_defaults_and_resets_pod_status(core: client.CoreV1Api) -> None:
    sent = pod("web-1", {"app": "web"}, status={"phase": "Running"})
    created = core.create_namespaced_pod("default", sent)
    meta = created.metadata
    assert uuid.UUID(meta.uid).version == 4
    assert meta.resource_version.isdigit()
    assert RFC3339_Z.match(meta.creation_timestamp.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert meta.namespace == "default"
    assert meta.generation == 1
    # podStrategy.PrepareForCreate replaces the status; defaulting fills the spec.
    assert created.status.phase == "Pending"
    assert created.status.qos_class == "BestEffort"
    assert created.spec.restart_policy == "Always"
    assert created.spec.containers[0].image_pull_policy == "IfNotPresent"
    assert created.spec.service_account_name == "default"

    fetched = core.read_namespaced_pod("web-1", "default")
    assert fetched.metadata.uid == meta.uid
    assert fetched.metadata.resource_version == meta.resource_version


def test_creation_timestamp_is_rfc3339_utc_on_the_wire(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    status, body = raw(server, "GET", "/api/v1/namespaces/default/configmaps/cm")
    assert status == 200
    obj = json.loads(body)
    assert RFC3339_Z.match(obj["metadata"]["creationTimestamp"])
    assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"


def test_resource_versions_increase_globally(core: client.CoreV1Api) -> None:
    a = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    b = core.create_namespaced_pod("default", pod("b"))
    c = core.patch_namespaced_config_map("a", "default", {"data": {"k": "v"}})
    rvs = [int(x.metadata.resource_version) for x in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_generate_name_appends_five_random_characters(core: client.CoreV1Api) -> None:
    body = pod("")
    body["metadata"] = {"generateName": "worker-"}
    first = core.create_namespaced_pod("default", body)
    second = core.create_namespaced_pod("default", body)
    for created in (first, second):
        assert re.fullmatch(r"worker-[bcdfghjklmnpqrstvwxz2456789]{5}", created.metadata.name)
        assert created.metadata.generate_name == "worker-"
    assert first.metadata.name != second.metadata.name


def test_list_cluster_wide_and_per_namespace(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_pod("default", pod("a"))
    core.create_namespaced_pod("other", pod("b"))
    everywhere = core.list_pod_for_all_namespaces()
    assert [(p.metadata.namespace, p.metadata.name) for p in everywhere.items] == [
        ("default", "a"),
        ("other", "b"),
    ]
    assert everywhere.kind == "PodList" and everywhere.api_version == "v1"
    assert everywhere.metadata.resource_version == server.resource_version
    assert [p.metadata.name for p in core.list_namespaced_pod("other").items] == ["b"]


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map("default", limit=2, _continue=token)
        pages += 1
        names += [cm.metadata.name for cm in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 5 - len(names)
    assert names == [f"cm-{i}" for i in range(5)] and pages == 3


def test_namespaces_exist_from_the_start_and_are_labelled(core: client.CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    created = core.create_namespace({"metadata": {"name": "team-a"}})
    assert created.metadata.labels == {"kubernetes.io/metadata.name": "team-a"}
    assert created.status.phase == "Active"
    assert created.spec.finalizers == ["kubernetes"]


def test_deleting_a_namespace_deletes_its_objects(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_pod("doomed", pod("p"))
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "c"}})
    core.delete_namespace("doomed")
    assert core.list_namespaced_pod("doomed").items == []
    assert server.get("v1", "ConfigMap", "doomed", "c") is None
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("doomed", pod("again"))
    assert info.value.status == 404
    assert status_of(info.value)["message"] == 'namespaces "doomed" not found'


def test_nodes_are_cluster_scoped_with_a_status_subresource(core: client.CoreV1Api) -> None:
    node = core.create_node(
        {
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    assert node.metadata.namespace is None
    assert node.status.conditions[0].type == "Ready"  # nodes keep the status they are created with
    patched = core.patch_node_status(
        "n1", {"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}
    )
    assert [c.type for c in patched.status.conditions] == ["Ready", "MemoryPressure"]
    replaced = core.patch_node(
        "n1", {"metadata": {"labels": {"zone": "b"}}, "status": {"conditions": []}}
    )
    assert replaced.metadata.labels == {"zone": "b"}
    assert len(replaced.status.conditions) == 2  # the main resource ignores status
    assert [n.metadata.name for n in core.list_node(label_selector="zone=b").items] == ["n1"]


def test_dry_run_create_is_not_persisted(core: client.CoreV1Api) -> None:
    answer = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "dry"}}, dry_run="All"
    )
    assert answer.metadata.name == "dry"
    assert core.list_namespaced_config_map("default").items == []


# ------------------------------------------------------------------------------------------- errors


def test_get_missing_is_404_with_a_status_body(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.read_namespaced_pod("nope", "default")
    assert info.value.status == 404
    assert status_of(info.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }


def test_missing_custom_object_names_its_group(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as info:
        custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "nope")
    body = status_of(info.value)
    assert info.value.status == 404
    assert body["message"] == 'artifactchecks.artifactcheck.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": GROUP, "kind": PLURAL}


def test_duplicate_create_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("dup"))
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", pod("dup"))
    assert info.value.status == 409
    assert status_of(info.value)["reason"] == "AlreadyExists"
    assert status_of(info.value)["message"] == 'pods "dup" already exists'


def test_an_event_name_taken_is_409_already_exists_and_the_event_unchanged(
    core: client.CoreV1Api, server: FakeApiServer
) -> None:
    """As a real API server: Events are objects like any other, so a deterministic
    Event name posted twice is refused (the recorder's aggregation relies on it)."""
    event = {
        "metadata": {"name": "web-1.abc"},
        "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        "reason": "ContentMismatch",
        "message": "first",
        "type": "Warning",
        "count": 1,
    }
    core.create_namespaced_event("default", event)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_event("default", {**event, "message": "second", "count": 7})
    assert info.value.status == 409
    assert status_of(info.value)["reason"] == "AlreadyExists"
    assert status_of(info.value)["message"] == 'events "web-1.abc" already exists'
    stored = server.get("v1", "Event", "default", "web-1.abc") or {}
    assert (stored["message"], stored["count"]) == ("first", 1)


def test_missing_name_is_422_invalid_with_a_cause(core: client.CoreV1Api) -> None:
    body = pod("")
    body["metadata"] = {}
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", body)
    status = status_of(info.value)
    assert info.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


@pytest.mark.parametrize(
    "body, field",
    [
        (
            {
                "metadata": {"name": "Upper_Case"},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            "metadata.name",
        ),
        ({"metadata": {"name": "p"}, "spec": {"containers": []}}, "spec.containers"),
        (
            {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
            "spec.containers[0].image",
        ),
        (
            {
                "metadata": {"name": "p", "labels": {"bad key!": "v"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
            "metadata.labels",
        ),
    ],
)
def test_invalid_pods_are_422(core: client.CoreV1Api, body: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", body)
    assert info.value.status == 422
    assert field in [c["field"] for c in status_of(info.value)["details"]["causes"]]


def test_wrong_kind_and_malformed_json_are_400(server: FakeApiServer) -> None:
    status, body = raw(
        server,
        "POST",
        "/api/v1/namespaces/default/pods",
        json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).encode(),
    )
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"
    status, body = raw(server, "POST", "/api/v1/namespaces/default/configmaps", b"{not json")
    assert status == 400 and json.loads(body)["reason"] == "BadRequest"


def test_namespace_mismatch_is_400(core: client.CoreV1Api) -> None:
    body = pod("p")
    body["metadata"]["namespace"] = "kube-system"
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", body)
    assert info.value.status == 400
    assert "does not match the namespace" in status_of(info.value)["message"]


def test_resource_version_on_create_is_rejected(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "c", "resourceVersion": "5"}}
        )
    assert info.value.status == 500
    assert "resourceVersion should not be set" in status_of(info.value)["message"]


def test_unknown_paths_are_404_and_wrong_methods_405(server: FakeApiServer) -> None:
    assert raw(server, "GET", "/api/v1/widgets")[0] == 404
    assert raw(server, "GET", "/apis/nope.io/v1")[0] == 404
    assert raw(server, "GET", "/api/v1/pods/name-without-namespace")[0] == 404
    status, body = raw(server, "POST", "/api/v1/namespaces/default/configmaps/x", b"{}")
    assert status == 405 and json.loads(body)["reason"] == "MethodNotAllowed"
    assert raw(server, "POST", "/api/v1/pods", b"{}")[0] == 405


def test_yaml_bodies_are_415(server: FakeApiServer) -> None:
    status, body = raw(
        server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        b"metadata: {name: x}",
        content_type="application/yaml",
    )
    assert status == 415 and json.loads(body)["reason"] == "UnsupportedMediaType"


# --------------------------------------------------------------------------- optimistic concurrency


def test_replace_with_a_stale_resource_version_is_409_conflict(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cfg"}, "data": {"v": "1"}}
    )
    stale = cm.metadata.resource_version
    cm.data = {"v": "2"}
    updated = core.replace_namespaced_config_map("cfg", "default", cm)
    assert int(updated.metadata.resource_version) > int(stale)
    cm.data = {"v": "3"}
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_config_map("cfg", "default", cm)
    status = status_of(info.value)
    assert info.value.status == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "cfg": the object has been modified;'
        " please apply your changes to the latest version and try again"
    )
    assert core.read_namespaced_config_map("cfg", "default").data == {"v": "2"}


def test_replace_without_resource_version_is_unconditional_for_configmaps(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"v": "1"}})
    updated = core.replace_namespaced_config_map(
        "cfg", "default", {"metadata": {"name": "cfg"}, "data": {"v": "9"}}
    )
    assert updated.data == {"v": "9"}


def test_replace_of_a_missing_object_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_config_map("ghost", "default", {"metadata": {"name": "ghost"}})
    assert info.value.status == 404


def test_replace_with_a_different_name_is_400(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_config_map("a", "default", {"metadata": {"name": "b"}})
    assert info.value.status == 400
    assert (
        status_of(info.value)["message"]
        == "the name of the object (b) does not match the name on the URL (a)"
    )


def test_patch_carrying_a_stale_resource_version_is_409(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}})
    core.patch_namespaced_config_map("cfg", "default", {"data": {"a": "1"}})
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "cfg",
            "default",
            {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"a": "2"}},
        )
    assert info.value.status == 409


def test_a_no_op_write_keeps_the_resource_version(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    cm = core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cfg", "labels": {"a": "1"}}}
    )
    again = core.patch_namespaced_config_map("cfg", "default", {"metadata": {"labels": {"a": "1"}}})
    assert again.metadata.resource_version == cm.metadata.resource_version
    assert server.resource_version == cm.metadata.resource_version


def test_lease_optimistic_concurrency_for_leader_election(api: ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    body = {
        "metadata": {"name": "artifactcheck-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    # PUT may create a lease (AllowCreateOnUpdate), as client-go's leader election relies on.
    created = leases.replace_namespaced_lease("artifactcheck-leader", "kube-system", body)
    assert created.spec.holder_identity == "a"
    seen_by_a = leases.read_namespaced_lease("artifactcheck-leader", "kube-system")
    seen_by_b = leases.read_namespaced_lease("artifactcheck-leader", "kube-system")
    seen_by_b.spec.holder_identity = "b"
    leases.replace_namespaced_lease("artifactcheck-leader", "kube-system", seen_by_b)
    seen_by_a.spec.holder_identity = "a"
    with pytest.raises(ApiException) as info:
        leases.replace_namespaced_lease("artifactcheck-leader", "kube-system", seen_by_a)
    assert info.value.status == 409
    assert (
        leases.read_namespaced_lease("artifactcheck-leader", "kube-system").spec.holder_identity
        == "b"
    )
    # Leases, like custom resources, refuse an update that names no resourceVersion.
    seen_by_a.metadata.resource_version = None
    with pytest.raises(ApiException) as info:
        leases.replace_namespaced_lease("artifactcheck-leader", "kube-system", seen_by_a)
    assert info.value.status == 422


def test_the_clients_own_leader_election_runs_against_the_fake(
    server: FakeApiServer, api: ApiClient
) -> None:
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    lock = LeaseLock("artifactcheck", "kube-system", "candidate-a")
    lock.api_instance = client.CoordinationV1Api(api)
    started, stopped = threading.Event(), threading.Event()
    config = electionconfig.Config(
        lock,
        lease_duration=3,  # the client accepts nothing shorter than these
        renew_deadline=2,
        retry_period=1,
        onstarted_leading=started.set,
        onstopped_leading=stopped.set,
    )
    election = threading.Thread(target=leaderelection.LeaderElection(config).run)
    election.start()
    try:
        assert started.wait(5)
        lease = server.get("coordination.k8s.io/v1", "Lease", "kube-system", "artifactcheck")
        assert lease is not None and lease["spec"]["holderIdentity"] == "candidate-a"
        renewed_from = lease["metadata"]["resourceVersion"]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and server.verb_counts["update"] < 2:
            time.sleep(0.05)
        assert server.verb_counts["update"] >= 2  # renewals are PUTs with a resourceVersion
        renewed = server.get("coordination.k8s.io/v1", "Lease", "kube-system", "artifactcheck")
        assert renewed is not None and renewed["metadata"]["resourceVersion"] != renewed_from
        server.inject("PUT", r"/leases/artifactcheck$", 500, times=-1)  # renewals now fail
        assert stopped.wait(10)
    finally:
        server.clear_injections()
        election.join(10)
    assert not election.is_alive()


# ------------------------------------------------------------------------------ delete & finalizers


def test_delete_answers_pods_with_the_object_and_configmaps_with_a_status(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    created = core.create_namespaced_pod("default", pod("p"))
    deleted = core.delete_namespaced_pod("p", "default")
    assert deleted.metadata.uid == created.metadata.uid
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    status, body = raw(server, "DELETE", "/api/v1/namespaces/default/configmaps/c")
    answer = json.loads(body)
    assert status == 200 and answer["kind"] == "Status" and answer["status"] == "Success"
    assert answer["details"]["name"] == "c" and answer["details"]["kind"] == "configmaps"
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_config_map("c", "default")
    assert info.value.status == 404


def test_delete_preconditions(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as info:
        core.delete_namespaced_config_map(
            "c", "default", body={"preconditions": {"uid": "not-the-uid"}}
        )
    assert info.value.status == 409


def test_finalizers_hold_deletion_until_removed(custom: client.CustomObjectsApi) -> None:
    body = check("held")
    body["metadata"]["finalizers"] = ["artifactcheck.io/cleanup"]
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    answer = custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "held")
    assert answer["metadata"]["deletionTimestamp"]
    still = custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "held")
    assert still["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as info:  # no new finalizers once deletion started
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "held",
            {"metadata": {"finalizers": ["artifactcheck.io/cleanup", "other"]}},
        )
    assert info.value.status == 422
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "held", {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as info:
        custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "held")
    assert info.value.status == 404


def test_delete_collection_by_label(core: client.CoreV1Api) -> None:
    for name, app in (("a", "web"), ("b", "web"), ("c", "db")):
        core.create_namespaced_pod("default", pod(name, {"app": app}))
    core.delete_collection_namespaced_pod("default", label_selector="app=web")
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["c"]


# ---------------------------------------------------------------------------------- label selectors

LABELLED = {
    "web-prod": {"app": "web", "env": "prod", "tier": "frontend"},
    "web-dev": {"app": "web", "env": "dev"},
    "db-prod": {"app": "db", "env": "prod", "tier": "backend"},
    "cache": {"app": "cache"},
    "bare": {},
}


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("", ["bare", "cache", "db-prod", "web-dev", "web-prod"]),
        ("app=web", ["web-dev", "web-prod"]),
        ("app==web", ["web-dev", "web-prod"]),
        ("app!=web", ["bare", "cache", "db-prod"]),  # includes objects without the label
        ("env in (prod,dev)", ["db-prod", "web-dev", "web-prod"]),
        ("env notin (prod)", ["bare", "cache", "web-dev"]),
        ("tier", ["db-prod", "web-prod"]),
        ("!tier", ["bare", "cache", "web-dev"]),
        ("app=web,env=prod", ["web-prod"]),
        ("app in (web, db), !tier", ["web-dev"]),
        ("  app = cache  ", ["cache"]),
        ("app=nothing", []),
    ],
)
def test_label_selector_operators(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    for name, labels in LABELLED.items():
        core.create_namespaced_pod("default", pod(name, labels))
    found = core.list_namespaced_pod("default", label_selector=selector).items
    assert sorted(p.metadata.name for p in found) == expected


@pytest.mark.parametrize(
    "selector", ["app=", "app in ()", "app in (a", "=web", "app=web,", "app=(x)", "bad key=x"]
)
def test_invalid_label_selectors_are_400(core: client.CoreV1Api, selector: str) -> None:
    if selector == "app=":  # an empty value is valid: it matches app="" only
        assert core.list_namespaced_pod("default", label_selector=selector).items == []
        return
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", label_selector=selector)
    assert info.value.status == 400


# ---------------------------------------------------------------------------------- field selectors


def test_field_selectors_on_pods(server: FakeApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("on-n1", node="n1"))
    core.create_namespaced_pod("default", pod("on-n2", node="n2"))
    core.create_namespaced_pod("default", pod("pending"))
    core.patch_namespaced_pod_status("on-n1", "default", {"status": {"phase": "Running"}})

    def names(selector: str) -> list[str]:
        return sorted(
            p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector=selector).items
        )

    assert names("spec.nodeName=n1") == ["on-n1"]
    assert names("spec.nodeName==n2") == ["on-n2"]
    assert names("spec.nodeName=") == ["pending"]
    assert names("spec.nodeName!=n1") == ["on-n2", "pending"]
    assert names("status.phase=Running") == ["on-n1"]
    assert names("status.phase=Pending,spec.nodeName!=") == ["on-n2"]
    assert names("metadata.name=pending") == ["pending"]
    assert names("metadata.namespace=default") == ["on-n1", "on-n2", "pending"]
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", field_selector="spec.containers=x")
    assert info.value.status == 400
    assert status_of(info.value)["message"] == "field label not supported: spec.containers"
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("default", field_selector="no-operator")
    assert info.value.status == 400


def test_field_selectors_on_core_events(core: client.CoreV1Api) -> None:
    for i, (kind, name) in enumerate([("Pod", "web-1"), ("Pod", "web-2"), ("Node", "web-1")]):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": f"ev{i}"},
                "involvedObject": {"kind": kind, "name": name, "namespace": "default"},
                "reason": "Checked",
                "message": "ok",
                "type": "Normal",
            },
        )
    found = core.list_namespaced_event(
        "default", field_selector="involvedObject.name=web-1,involvedObject.kind=Pod"
    )
    assert [e.metadata.name for e in found.items] == ["ev0"]
    found = core.list_namespaced_event("default", field_selector="involvedObject.namespace=default")
    assert len(found.items) == 3


def test_events_v1_and_core_v1_share_storage(
    server: FakeApiServer, api: ApiClient, core: client.CoreV1Api
) -> None:
    events = client.EventsV1Api(api)
    events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "verified"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "artifactcheck.io/controller",
            "reportingInstance": "artifactcheck-0",
            "action": "Verify",
            "reason": "Mismatch",
            "type": "Warning",
            "note": "pod web-1 serves 1.2.2, expected 1.2.3",
            "regarding": {"kind": "Pod", "name": "web-1", "namespace": "default"},
        },
    )
    as_core = core.read_namespaced_event("verified", "default")
    assert as_core.involved_object.name == "web-1"
    assert as_core.message == "pod web-1 serves 1.2.2, expected 1.2.3"
    assert as_core.reporting_component == "artifactcheck.io/controller"
    as_v1 = events.list_namespaced_event("default", field_selector="regarding.name=web-1").items
    assert [e.note for e in as_v1] == ["pod web-1 serves 1.2.2, expected 1.2.3"]
    # events.k8s.io/v1 requires eventTime & co (the client checks eventTime itself, hence raw HTTP)
    status, body = raw(
        server,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        json.dumps({"metadata": {"name": "bad"}, "reason": "X", "type": "Normal"}).encode(),
    )
    assert status == 422
    fields = {c["field"] for c in json.loads(body)["details"]["causes"]}
    assert {"eventTime", "reportingController", "reportingInstance", "action"} <= fields


# ------------------------------------------------------------------------------------------ patches


def test_strategic_merge_patch_of_pod_status_merges_conditions_by_type(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_pod("default", pod("web"))
    core.patch_namespaced_pod_status(
        "web",
        "default",
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                ]
            }
        },
    )
    added = core.patch_namespaced_pod_status(
        "web",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Starting"}]}},
    )
    assert [(c.type, c.status) for c in added.status.conditions] == [
        ("PodScheduled", "True"),
        ("Initialized", "True"),
        ("Ready", "False"),
    ]
    changed = core.patch_namespaced_pod_status(
        "web",
        "default",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}},
    )
    ready = [c for c in changed.status.conditions if c.type == "Ready"]
    assert len(changed.status.conditions) == 3
    assert ready[0].status == "True" and ready[0].reason is None
    removed = core.patch_namespaced_pod_status(
        "web", "default", {"status": {"conditions": [{"type": "Initialized", "$patch": "delete"}]}}
    )
    assert [c.type for c in removed.status.conditions] == ["PodScheduled", "Ready"]
    assert removed.status.phase == "Pending"  # untouched fields stay


def test_strategic_merge_patch_replaces_container_statuses_whole(core: client.CoreV1Api) -> None:
    """``containerStatuses`` is ``listType=atomic`` with no merge key on real servers."""
    body = pod("two")
    body["spec"]["containers"].append({"name": "sidecar", "image": "registry.example/side:1"})
    core.create_namespaced_pod("default", body)
    statuses = [
        {"name": n, "ready": False, "restartCount": 0, "image": "i", "imageID": ""}
        for n in ("app", "sidecar")
    ]
    core.patch_namespaced_pod_status("two", "default", {"status": {"containerStatuses": statuses}})
    after = core.patch_namespaced_pod_status(
        "two",
        "default",
        {
            "status": {
                "containerStatuses": [
                    {"name": "app", "ready": True, "restartCount": 0, "image": "i", "imageID": ""}
                ]
            }
        },
    )
    assert [(s.name, s.ready) for s in after.status.container_statuses] == [("app", True)]


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api) -> None:
    body = pod("two")
    body["spec"]["containers"].append({"name": "sidecar", "image": "registry.example/side:1"})
    core.create_namespaced_pod("default", body)
    patched = core.patch_namespaced_pod(
        "two",
        "default",
        {"spec": {"containers": [{"name": "sidecar", "image": "registry.example/side:2"}]}},
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("app", "registry.example/app:1.0"),
        ("sidecar", "registry.example/side:2"),
    ]
    assert patched.metadata.generation == 2  # a spec change bumps a pod's generation
    with pytest.raises(ApiException) as info:  # pod specs are immutable but for images & co
        core.patch_namespaced_pod(
            "two", "default", {"spec": {"containers": [{"name": "app", "command": ["sh"]}]}}
        )
    assert info.value.status == 422


def test_strategic_merge_patch_unions_finalizers_and_null_deletes(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(
        "default",
        {"metadata": {"name": "c", "finalizers": ["a/x"], "labels": {"keep": "1", "drop": "1"}}},
    )
    patched = core.patch_namespaced_config_map(
        "c", "default", {"metadata": {"finalizers": ["b/y"], "labels": {"drop": None}}}
    )
    assert patched.metadata.finalizers == ["a/x", "b/y"]
    assert patched.metadata.labels == {"keep": "1"}


def test_merge_patch_on_the_custom_resource(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        check("c", {"selector": {"app": "web", "tier": "fe"}, "interval": "30s"}),
    )
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "c",
        {"spec": {"selector": {"tier": None, "env": "prod"}, "paused": True}},
    )
    assert patched["spec"] == {
        "selector": {"app": "web", "env": "prod"},
        "interval": "30s",
        "paused": True,
    }


def test_strategic_merge_patch_on_the_custom_resource_is_415(
    custom: client.CustomObjectsApi,
) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, check("c"))
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "c",
            {"spec": {"paused": True}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert info.value.status == 415
    body = status_of(info.value)
    assert body["reason"] == "UnsupportedMediaType"
    assert "application/merge-patch+json" in body["message"]
    assert "strategic" not in body["message"]


def test_json_patch_with_a_failing_test_op_is_422_and_changes_nothing(
    core: client.CoreV1Api,
) -> None:
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"version": "1.2.3"}}
    )
    ok = core.patch_namespaced_config_map(
        "c",
        "default",
        [
            {"op": "test", "path": "/data/version", "value": "1.2.3"},
            {"op": "replace", "path": "/data/version", "value": "1.2.4"},
            {"op": "add", "path": "/metadata/labels", "value": {"a/b": "c"}},
        ],
    )
    assert ok.data == {"version": "1.2.4"} and ok.metadata.labels == {"a/b": "c"}
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "c",
            "default",
            [
                {"op": "replace", "path": "/data/version", "value": "9"},
                {"op": "test", "path": "/data/version", "value": "1.2.3"},
            ],
        )
    assert info.value.status == 422
    assert status_of(info.value)["reason"] == "Invalid"
    assert core.read_namespaced_config_map("c", "default").data == {"version": "1.2.4"}
    with pytest.raises(ApiException) as info:
        core.patch_namespaced_config_map(
            "c", "default", [{"op": "remove", "path": "/data/missing"}]
        )
    assert info.value.status == 422


def test_json_patch_on_the_custom_resource(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, check("c"))
    patched = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "c",
        [{"op": "replace", "path": "/spec/interval", "value": "1m"}],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["interval"] == "1m"


def test_malformed_patches_are_400_and_apply_patch_415(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    path = "/api/v1/namespaces/default/configmaps/c"
    assert raw(server, "PATCH", path, b"{oops", "application/merge-patch+json")[0] == 400
    assert raw(server, "PATCH", path, b'{"op": "add"}', "application/json-patch+json")[0] == 400
    assert raw(server, "PATCH", path, b"data: {}", "application/apply-patch+yaml")[0] == 415
    assert raw(server, "PATCH", path, b"{}", "text/plain")[0] == 415


# ------------------------------------------------------------------ status subresource & generation


def test_custom_resource_status_subresource_and_generation(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, check("c", status={"phase": "Forged"})
    )
    assert "status" not in created  # dropped on create
    assert created["metadata"]["generation"] == 1

    with_status = custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "c",
        {"status": {"phase": "Verified", "observedGeneration": 1}, "spec": {"interval": "5m"}},
    )
    assert with_status["status"] == {"phase": "Verified", "observedGeneration": 1}
    assert with_status["spec"]["interval"] == "30s"  # /status changes nothing but status
    assert with_status["metadata"]["generation"] == 1

    labelled = custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "c",
        {"metadata": {"labels": {"team": "a"}}, "status": {"phase": "X"}},
    )
    assert labelled["metadata"]["generation"] == 1  # metadata changes do not bump generation
    assert labelled["status"]["phase"] == "Verified"  # the main resource ignores status

    respecced = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "c", {"spec": {"interval": "1m"}}
    )
    assert respecced["metadata"]["generation"] == 2

    # PUT of the status subresource: only the status is taken
    respecced["status"] = {"phase": "Stale"}
    respecced["spec"]["interval"] = "ignored"
    replaced = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "c", respecced
    )
    assert replaced["status"] == {"phase": "Stale"} and replaced["spec"]["interval"] == "1m"


def test_custom_resource_replace_needs_a_resource_version(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, check("c"))
    created["spec"]["interval"] = "2m"
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as info:
        custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c", created)
    assert info.value.status == 422
    assert "must be specified for an update" in status_of(info.value)["message"]


def test_pod_writes_to_the_main_resource_ignore_status(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("p"))
    patched = core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}}
    )
    assert patched.status.phase == "Pending"
    assert patched.metadata.labels == {"a": "b"}
    assert patched.metadata.generation == 1


def test_pod_binding_sets_the_node_once(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    # A real server answers a binding with a Status, which this client cannot read as a
    # V1Binding, hence _preload_content=False.
    response = core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert response.status == 201
    response.release_conn()
    bound = core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert info.value.status == 409


# -------------------------------------------------------------------------- discovery & bookkeeping


def test_discovery_endpoints(api: ApiClient) -> None:
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {
        g.name: g.preferred_version.version for g in client.ApisApi(api).get_api_versions().groups
    }
    assert groups == {
        "events.k8s.io": "v1",
        "coordination.k8s.io": "v1",
        GROUP: VERSION,
        "apps": "v1",
        "policy": "v1",
        "networking.k8s.io": "v1",
        "rbac.authorization.k8s.io": "v1",
        "apiextensions.k8s.io": "v1",
    }
    core_resources = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert {
        "pods",
        "pods/status",
        "nodes",
        "nodes/status",
        "namespaces",
        "configmaps",
        "events",
    } <= set(core_resources)
    assert core_resources["pods"].namespaced and not core_resources["nodes"].namespaced
    assert "watch" in core_resources["pods"].verbs
    custom_resources = client.CustomObjectsApi(api).get_api_resources(GROUP, VERSION)
    assert {r.name: r.kind for r in custom_resources.resources} == {
        PLURAL: "ArtifactCheck",
        f"{PLURAL}/status": "ArtifactCheck",
    }
    assert client.VersionApi(api).get_code().major == "1"


def test_requests_are_recorded_and_counted(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.reset_requests()
    core.create_namespaced_pod("default", pod("p"))
    core.read_namespaced_pod("p", "default")
    core.list_namespaced_pod("default", label_selector="app=web")
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert server.requests == [
        ("POST", "/api/v1/namespaces/default/pods"),
        ("GET", "/api/v1/namespaces/default/pods/p"),
        ("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb"),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status"),
    ]
    assert server.request_counts == {"POST": 1, "GET": 2, "PATCH": 1}
    assert server.verb_counts == {"create": 1, "get": 1, "list": 1, "patch": 1}


def test_in_process_api_matches_http(server: FakeApiServer, core: client.CoreV1Api) -> None:
    created = server.create(
        pod("direct", {"app": "web"})
        | {"metadata": {"name": "direct", "namespace": "default", "labels": {"app": "web"}}}
    )
    assert core.read_namespaced_pod("direct", "default").metadata.uid == created["metadata"]["uid"]
    server.patch_status(
        "v1",
        "Pod",
        "default",
        "direct",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        patch_type="strategic",
    )
    assert core.read_namespaced_pod("direct", "default").status.conditions[0].type == "Ready"
    assert [p["metadata"]["name"] for p in server.list("v1", "Pod", label_selector="app=web")] == [
        "direct"
    ]
    got = server.get("v1", "Pod", "default", "direct")
    assert got is not None
    got["metadata"]["labels"]["app"] = "mutated"  # callers get copies
    assert server.get("v1", "Pod", "default", "direct")["metadata"]["labels"] == {"app": "web"}  # type: ignore[index]
    assert server.delete("v1", "Pod", "default", "direct") is not None
    assert server.get("v1", "Pod", "default", "direct") is None
    assert server.delete("v1", "Pod", "default", "direct") is None


def test_five_thousand_pods_stay_fast(server: FakeApiServer, core: client.CoreV1Api) -> None:
    started = time.perf_counter()
    for i in range(5000):
        server.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p-{i:04d}",
                    "namespace": "default",
                    "labels": {"shard": str(i % 10)},
                },
                "spec": {
                    "containers": [{"name": "app", "image": "registry.example/app:1"}],
                    "nodeName": f"n{i % 50}",
                },
            }
        )
    created = time.perf_counter()
    everything = core.list_pod_for_all_namespaces(_preload_content=False)
    items = json.loads(everything.data)["items"]
    one_shard = core.list_namespaced_pod(
        "default", label_selector="shard=3", field_selector="spec.nodeName=n3"
    )
    finished = time.perf_counter()
    assert len(items) == 5000
    assert len(one_shard.items) == 100
    assert created - started < 10 and finished - created < 10
