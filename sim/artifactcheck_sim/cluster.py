"""A simulated cluster: the fake API server, pods served on loopback, and a kubelet.

Pods are objects in :class:`~artifactcheck_sim.apiserver.FakeApiServer` whose
``status.podIP`` is a loopback address where a real :class:`~artifactcheck_sim.web.Site`
serves a real build, all on one shared port (each pod has its own 127.x address, as
each real pod has its own IP). A tiny "kubelet" thread does the one thing the
controller relies on that an API server does not: it recomputes each pod's ``Ready``
condition from its containers and its readiness gates, so a quarantined pod really
leaves the Service endpoints.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from artifactcheck.control.crd import (
    ACCEPTANCE_CRD_NAME,
    CRD_NAME,
    acceptance_crd_manifest,
    crd_manifest,
)
from artifactcheck.model.names import CRD_API_VERSION, CRD_KIND, DEFAULT_CONDITION_TYPE
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.fleet import RELEASES, Lifecycle, SimInstance, foreign_bytes, write_releases
from artifactcheck_sim.web import Site, WebFleet, loopback_hosts

GATE = DEFAULT_CONDITION_TYPE


def free_port(host: str) -> int:
    """A port free on ``host`` now (shared by every simulated pod)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(kw_only=True)
class SimPod(SimInstance):
    """One simulated pod: an instance that is also a Pod object on a node."""

    node: str
    image_id: str


class SimCluster(Lifecycle):
    """Fake API server + pods on loopback + kubelet; start()/stop() or a context manager."""

    def __init__(
        self,
        *,
        namespace: str = "shop",
        web: WebFleet | None = None,
        api: FakeApiServer | None = None,
        first_host: str = "127.78.0.1",
        cdn_host: str = "127.78.255.1",
        kubelet_period: float = 0.1,
    ) -> None:
        self.namespace = namespace
        self.first_host = first_host
        self._own_web = web is None
        self._own_api = api is None
        self.web = web or WebFleet(name="artifactcheck-simcluster")
        self.api = api or FakeApiServer(namespaces=("default", namespace, "artifactcheck-system"))
        self.port = 0
        self.pods: dict[str, SimPod] = {}
        self._hosts = iter(loopback_hosts(4000, first=first_host))
        self.cdn_host = cdn_host
        self.cdn_site = Site(root=RELEASES["1.4.2"], server_header="AmazonS3")
        self.cdn_url = ""
        self.kubelet_period = kubelet_period
        self._stop = threading.Event()
        self._kubelet: threading.Thread | None = None
        # The project's own CRD, so every ArtifactCheck a test creates is pruned, defaulted
        # and validated by its schema, as on a cluster where `kubectl apply -k k8s/` ran.
        if (
            self.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, CRD_NAME)
            is None
        ):
            self.api.create(crd_manifest())
        if (
            self.api.get(
                "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, ACCEPTANCE_CRD_NAME
            )
            is None
        ):
            self.api.create(acceptance_crd_manifest())
        self._tmp = tempfile.TemporaryDirectory(prefix="artifactcheck-cluster-")
        self.release_template = write_releases(RELEASES, Path(self._tmp.name))

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Start the API server, the web fleet, the CDN and the kubelet."""
        if self._own_api:
            self.api.start()
        self.web.start()
        self.port = free_port(self.first_host)
        self.cdn_url = self.web.add(self.cdn_site, self.cdn_host)
        self._kubelet = threading.Thread(target=self._kubelet_loop, name="sim-kubelet", daemon=True)
        self._kubelet.start()
        return self

    def stop(self) -> None:
        """Stop everything this cluster started."""
        self._stop.set()
        if self._kubelet is not None:
            self._kubelet.join(timeout=5)
        if self._own_web:
            self.web.stop()
        if self._own_api:
            self.api.stop()
        self._tmp.cleanup()

    # -- objects ---------------------------------------------------------------------

    def add_node(self, name: str) -> None:
        """Create a Node object (idempotent)."""
        if self.api.get("v1", "Node", None, name) is None:
            self.api.create(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}
            )

    def add_pod(
        self,
        *,
        version: str = "1.4.2",
        node: str = "node-a",
        replicaset: str = "web-7f9c",
        image_id: str | None = None,
        gated: bool = True,
        serves: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> SimPod:
        """Serve a real build on a new loopback address and create its Pod (Ready)."""
        self.add_node(node)
        host = next(self._hosts)
        site = Site(root=RELEASES[version], version=version)
        name = f"{replicaset}-{uuid.uuid4().hex[:5]}"
        image_id = image_id or f"docker.io/library/web@sha256:{version.replace('.', '') * 8}"
        pod = SimPod(name=name, host=host, site=site, version=version, node=node, image_id=image_id)
        if serves is not None and serves != version:
            pod.planted = sorted(foreign_bytes(RELEASES[version], RELEASES[serves]))
            site.overrides.update(foreign_bytes(RELEASES[version], RELEASES[serves]))
        pod.url = self.web.add(site, host, port=self.port)
        self.pods[name] = pod
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {"app": "web", "app.kubernetes.io/version": version, **(labels or {})},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": replicaset,
                        "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, replicaset)),
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "web", "image": f"web:{version}"}],
                **({"readinessGates": [{"conditionType": GATE}]} if gated else {}),
            },
        }
        self.api.create(obj)
        status = {
            "phase": "Running",
            "podIP": host,
            "hostIP": "127.0.0.1",
            "startTime": _now(),
            "conditions": [
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": _now()},
                {
                    "type": "Ready",
                    "status": "False" if gated else "True",
                    "lastTransitionTime": _now(),
                },
            ],
            "containerStatuses": [
                {
                    "name": "web",
                    "ready": True,
                    "image": f"web:{version}",
                    "imageID": image_id,
                    "restartCount": 0,
                    "started": True,
                }
            ],
        }
        self.api.patch_status("v1", "Pod", self.namespace, name, {"status": status})
        return pod

    def fix_pod(self, name: str) -> None:
        """Make a drifted pod serve its own release again (remove the planted bytes)."""
        pod = self.pods[name]
        pod.site.overrides.clear()
        pod.planted = []

    def delete_pod(self, name: str) -> None:
        """Delete a pod and stop its server."""
        pod = self.pods.pop(name)
        self.api.delete("v1", "Pod", self.namespace, name)
        self.web.remove(pod.url)

    def pod(self, name: str) -> dict[str, Any]:
        """The Pod object as the API server has it now."""
        obj = self.api.get("v1", "Pod", self.namespace, name)
        assert obj is not None, name
        return obj

    def condition(self, name: str, ctype: str = GATE) -> dict[str, Any] | None:
        """One condition of a pod, or None."""
        for c in self.pod(name).get("status", {}).get("conditions", []):
            if c.get("type") == ctype:
                return dict(c)
        return None

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """core/v1 Events in the namespace, optionally about one object."""
        out = self.api.list("v1", "Event", self.namespace)
        if name is not None:
            out = [e for e in out if e.get("involvedObject", {}).get("name") == name]
        return out

    def lab_admin(
        self, *, credentials: list[dict[str, Any]] | None = None, **limits: Any
    ) -> AdminConfig:
        """The admin configuration of this lab: the CDN allowed, loopback allowed (every
        simulated pod is on 127.x), the local release directory granted to the namespace,
        and short intervals. A real cluster's admin grants far less (docs/security.md)."""
        from pathlib import Path

        return AdminConfig.model_validate(
            {
                "egress": {"allow": [self.cdn_url], "allow_loopback": True},
                "credentials": credentials or [],
                "release_directories": [
                    {
                        "directory": str(Path(self.release_template).parent),
                        "namespaces": [self.namespace],
                    }
                ],
                "limits": {
                    "min_interval": 0.1,
                    "allow_cordon_namespaces": [self.namespace],
                    **limits,
                },
            }
        )

    def add_check(
        self, name: str = "web", *, pruned_ok: bool = False, **spec: Any
    ) -> dict[str, Any]:
        """Create an ArtifactCheck selecting this cluster's pods.

        ``spec`` is spelled as an ArtifactCheck is, in the CRD's camelCase
        (``release={"configMaps": {}}``, ``policy={"gateFailOpen": False}``), and sent as it
        is. The API server prunes what the CRD does not offer, a snake_case key too, as
        a real cluster does; so that a test cannot run a silently different check, a key
        the server pruned raises :class:`ValueError` unless ``pruned_ok``.
        """
        body = {
            "apiVersion": CRD_API_VERSION,
            "kind": "ArtifactCheck",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "kubernetes": {
                    "namespace": self.namespace,
                    "selector": "app=web",
                    "port": self.port,
                },
                "cdn": self.cdn_url,
                "release": {"manifests": [self.release_template]},
                "knownVersions": sorted(RELEASES),
                **spec,
            },
        }
        created = self.api.create(body)
        lost = _pruned(body["spec"], created.get("spec"), "spec")
        if lost and not pruned_ok:
            raise ValueError(
                f"the ArtifactCheck's CRD pruned {', '.join(lost)}: spell fields as the CRD "
                "does (camelCase, k8s/crd.yaml)"
            )
        return created

    def check_status(self, name: str = "web") -> dict[str, Any]:
        """The status of an ArtifactCheck."""
        obj = self.api.get(CRD_API_VERSION, CRD_KIND, self.namespace, name)
        return dict((obj or {}).get("status") or {})

    # -- kubelet ---------------------------------------------------------------------

    def _kubelet_loop(self) -> None:
        while not self._stop.wait(self.kubelet_period):
            try:
                self.kubelet_sync()
            except Exception:  # noqa: BLE001 - the API server may be paused on purpose
                continue

    def kubelet_sync(self) -> None:
        """Set each pod's Ready from ContainersReady and its readiness gates, as kubelet does."""
        if not self.api.running:
            return
        for pod in self.api.list("v1", "Pod", self.namespace):
            status = pod.get("status") or {}
            conds = {c.get("type"): c.get("status") for c in status.get("conditions", [])}
            gates = [g.get("conditionType") for g in pod.get("spec", {}).get("readinessGates", [])]
            ready = conds.get("ContainersReady") == "True" and all(
                conds.get(g) == "True" for g in gates
            )
            want = "True" if ready else "False"
            if conds.get("Ready") != want:
                self.api.patch_status(
                    "v1",
                    "Pod",
                    self.namespace,
                    pod["metadata"]["name"],
                    {
                        "status": {
                            "conditions": [
                                {"type": "Ready", "status": want, "lastTransitionTime": _now()}
                            ]
                        }
                    },
                    patch_type="strategic",
                )


def wait_for(predicate: Any, *, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; return its value or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        time.sleep(interval)


def _pruned(sent: Any, stored: Any, path: str) -> list[str]:
    """Keys of ``sent`` (mappings, recursively) missing from ``stored``."""
    if not isinstance(sent, dict) or not isinstance(stored, dict):
        return []
    lost: list[str] = []
    for key, value in sent.items():
        if key not in stored:
            lost.append(f"{path}.{key}")
        else:
            lost.extend(_pruned(value, stored[key], f"{path}.{key}"))
    return lost
