"""The API resources the controller reads and writes, and the paths of their requests.

Every request of :class:`~artifactcheck.clients.kube_http.KubeHttp` names its path
through one of these constants (``PODS.path(namespace, name, "status")``), never a
path spelt out by hand. Why: the path is what RBAC authorises (group, resource,
subresource, namespaced or cluster-wide), and the RBAC scanner
(tests/tools/rbac_scan.py) reads these constants and the ``.path``/``.cluster_path``
calls in each request to know which grants the code needs, as it reads the official
client's method names.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from artifactcheck.model.names import ACCEPTANCE_PLURAL, CRD_GROUP, CRD_PLURAL, CRD_VERSION

__all__ = [
    "ACCEPTANCES",
    "ARTIFACTCHECKS",
    "CONFIGMAPS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "Resource",
]


def _segment(value: str) -> str:
    """One path segment: names are DNS labels, but a stray ``/`` must never reach
    another resource."""
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: its group ("" is core), version and plural."""

    group: str
    version: str
    plural: str

    def _root(self) -> str:
        return f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"

    def path(self, namespace: str, name: str | None = None, sub: str | None = None) -> str:
        """The path of the resource in ``namespace`` (a collection), of one object
        (``name``) or of its subresource (``sub``: ``status``)."""
        where = f"{self._root()}/namespaces/{_segment(namespace)}/{self.plural}"
        return _named(where, name, sub)

    def cluster_path(self, name: str | None = None, sub: str | None = None) -> str:
        """The path of a cluster-scoped resource (Nodes), or of a namespaced one in
        all namespaces (a collection: list and watch only)."""
        return _named(f"{self._root()}/{self.plural}", name, sub)


def _named(collection: str, name: str | None, sub: str | None) -> str:
    if name is None:
        return collection
    path = f"{collection}/{_segment(name)}"
    return f"{path}/{sub}" if sub else path


PODS = Resource(group="", version="v1", plural="pods")
NODES = Resource(group="", version="v1", plural="nodes")
EVENTS = Resource(group="", version="v1", plural="events")
CONFIGMAPS = Resource(group="", version="v1", plural="configmaps")
LEASES = Resource(group="coordination.k8s.io", version="v1", plural="leases")
ARTIFACTCHECKS = Resource(group=CRD_GROUP, version=CRD_VERSION, plural=CRD_PLURAL)
ACCEPTANCES = Resource(group=CRD_GROUP, version=CRD_VERSION, plural=ACCEPTANCE_PLURAL)
