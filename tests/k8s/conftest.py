"""A fake kube-apiserver per test, spoken to by the official client over HTTP.

Every test gets its own :class:`FakeApiServer` on a random loopback port and an
``ApiClient`` for it; both are closed at teardown, so no test leaves a server, a
thread or a socket behind. ``make_pod`` / ``make_node`` build objects the way a cluster
would have them: created through the API (which resets a pod's status, as a real server
does), then given a status through the status subresource, as kubelet does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
from kubernetes import client as k8s

from artifactcheck_sim.apiserver import FakeApiServer

GATE = "artifactcheck.io/content-verified"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "crd(kind): the ArtifactCheck CRD a TenantCluster serves (project, permissive)"
    )


@pytest.fixture(autouse=True)
def _no_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite may run inside a pod: never let it pick up the real cluster."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = FakeApiServer(host="127.0.0.1", port=0).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[k8s.ApiClient]:
    client = server.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def writes(server: FakeApiServer) -> Callable[[], list[tuple[str, str]]]:
    """The write requests (POST/PUT/PATCH/DELETE) the server has received so far."""

    def recorded() -> list[tuple[str, str]]:
        return [(m, p) for m, p in server.requests if m in WRITE_METHODS]

    return recorded


PodFactory = Callable[..., dict[str, Any]]


@pytest.fixture
def make_pod(server: FakeApiServer) -> PodFactory:
    """Create a pod as a cluster would show it; returns the pod as the server stores it."""

    def make(
        name: str,
        *,
        namespace: str = "default",
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        ip: str | None = "127.0.0.10",
        ready: bool = True,
        gate: bool = True,
        gate_status: str | None = None,
        node: str | None = "node-a",
        owner: tuple[str, str] | None = ("ReplicaSet", "web-5d8f7"),
        containers: Sequence[tuple[str, str, str]] = (
            ("nginx", "nginx:1.27", "docker-pullable://nginx@sha256:" + "a" * 64),
        ),
        start_time: str | None = "2024-05-01T10:00:00Z",
        pod_ready: bool | None = None,
        status_order: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        if server.get("v1", "Namespace", None, namespace) is None:
            server.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels if labels is not None else {"app": "web"}),
        }
        if annotations:
            meta["annotations"] = dict(annotations)
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner[0],
                    "name": owner[1],
                    "uid": f"uid-{owner[1]}",
                    "controller": True,
                }
            ]
        spec: dict[str, Any] = {
            "containers": [{"name": c, "image": image} for c, image, _ in containers],
        }
        if node:
            spec["nodeName"] = node
        if gate:
            spec["readinessGates"] = [{"conditionType": GATE}]
        server.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        if ip is None and not ready:
            return server.get("v1", "Pod", namespace, name) or {}
        statuses = [
            {
                "name": c,
                "image": image,
                "imageID": image_id,
                "ready": ready,
                "restartCount": 0,
                "started": ready,
                "state": {"running": {"startedAt": start_time}} if ready else {"waiting": {}},
            }
            for c, image, image_id in containers
        ]
        if status_order is not None:
            statuses = [statuses[i] for i in status_order]
        is_ready = (
            pod_ready if pod_ready is not None else ready and (not gate or gate_status == "True")
        )
        conditions: list[dict[str, Any]] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True" if ready else "False"},
            {"type": "Ready", "status": "True" if is_ready else "False"},
        ]
        if gate_status is not None:
            conditions.append(
                {"type": GATE, "status": gate_status, "reason": "Seeded", "message": "seeded"}
            )
        status: dict[str, Any] = {
            "phase": "Running" if ready else "Pending",
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        if ip:
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        if start_time:
            status["startTime"] = start_time
        return server.patch_status(
            "v1", "Pod", namespace, name, {"status": status}, patch_type="merge"
        )

    return make


@pytest.fixture
def make_node(server: FakeApiServer) -> Callable[..., dict[str, Any]]:
    """Create a node, optionally cordoned and annotated."""

    def make(
        name: str,
        *,
        unschedulable: bool = False,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/hostname": name}}
        if annotations:
            meta["annotations"] = dict(annotations)
        spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
        return server.create({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec})

    return make
