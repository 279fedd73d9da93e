"""The shapes of the Kubernetes objects artifactcheck reads, as TypedDicts.

Requests are made with the raw JSON kept (see :func:`artifactcheck.clients.kube.raw`),
so what comes back is the API's JSON, not the client's models; these TypedDicts say
which fields of it artifactcheck reads. ``total=False`` throughout: the API server
omits empty fields (a pending pod has no ``podIP``, a new Lease no holder), and a
reader must not assume any field is there. Only the fields read are declared.

The readers below are defensive as well: a field of the wrong JSON type reads as
absent, because API data is read, never trusted to be well-formed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypedDict, TypeVar, cast

T = TypeVar("T")

#: A JSON object as the API sends it, before it is read as one of the types below.
JsonObj = dict[str, object]


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creationTimestamp: str
    deletionTimestamp: str
    ownerReferences: list[OwnerReference]


class ListMeta(TypedDict, total=False):
    resourceVersion: str


class ObjectList(TypedDict, Generic[T], total=False):
    """A list response: ``items`` and the resourceVersion a watch resumes from."""

    metadata: ListMeta
    items: list[T]


class StatusBody(TypedDict, total=False):
    """A ``Status`` object: an error body, or the object of a watch ``ERROR`` event."""

    code: int
    reason: str
    message: str


class WatchEvent(TypedDict, Generic[T], total=False):
    """One line of a watch stream: ``ADDED|MODIFIED|DELETED|BOOKMARK|ERROR``."""

    type: str
    object: T


# --------------------------------------------------------------------------- pods


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    protocol: str


class Container(TypedDict, total=False):
    name: str
    image: str
    ports: list[ContainerPort]


class ReadinessGate(TypedDict, total=False):
    conditionType: str


class PodSpec(TypedDict, total=False):
    nodeName: str
    containers: list[Container]
    readinessGates: list[ReadinessGate]


class Condition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


class ContainerStatus(TypedDict, total=False):
    name: str
    ready: bool
    image: str
    imageID: str


class PodStatus(TypedDict, total=False):
    podIP: str
    startTime: str
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]


class Pod(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


# --------------------------------------------------------------------------- others


class NodeSpec(TypedDict, total=False):
    unschedulable: bool


class Node(TypedDict, total=False):
    metadata: ObjectMeta
    spec: NodeSpec


class LeaseSpec(TypedDict, total=False):
    holderIdentity: str | None
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(TypedDict, total=False):
    metadata: ObjectMeta
    spec: LeaseSpec


class ArtifactCheck(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JsonObj
    status: JsonObj


class ObjectReference(TypedDict, total=False):
    """What an Event is about (``involvedObject``)."""

    apiVersion: str
    kind: str
    name: str
    namespace: str | None
    uid: str | None


class Event(TypedDict, total=False):
    """A core/v1 Event, as read back to aggregate into it or to show it."""

    metadata: ObjectMeta
    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    count: int
    firstTimestamp: str
    lastTimestamp: str
    eventTime: str


# --------------------------------------------------------------------------- readers

B = TypeVar("B", bound=Mapping[str, object])


def typed(doc: object, kind: type[B]) -> B:
    """``doc`` read as a ``kind`` (one of the TypedDicts above), or an empty one when it
    is not a JSON object at all.

    The one unchecked step from JSON to a declared shape: a TypedDict cannot be
    checked at run time, so the readers below still test each field's JSON type.
    """
    del kind  # the type is for the checker; at run time a TypedDict is a dict
    return cast(B, doc if isinstance(doc, Mapping) else {})


def obj(value: object) -> JsonObj:
    """``value`` if it is a JSON object, else an empty one."""
    return dict(value) if isinstance(value, Mapping) else {}


def meta(body: Mapping[str, object]) -> ObjectMeta:
    """The ``metadata`` of any object (empty when missing or malformed)."""
    return typed(body.get("metadata"), ObjectMeta)


def annotations_of(body: Mapping[str, object]) -> dict[str, str]:
    found = meta(body).get("annotations")
    return dict(found) if isinstance(found, Mapping) else {}


def pod_spec(pod: Pod) -> PodSpec:
    return typed(pod.get("spec"), PodSpec)


def pod_status(pod: Pod) -> PodStatus:
    return typed(pod.get("status"), PodStatus)


def pod_conditions(pod: Pod) -> list[Condition]:
    found = pod_status(pod).get("conditions")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def condition(pod: Pod, ctype: str) -> Condition | None:
    """The pod's condition of type ``ctype``, if it has one."""
    for cond in pod_conditions(pod):
        if cond.get("type") == ctype:
            return cond
    return None


def has_gate(pod: Pod, ctype: str) -> bool:
    """Whether the pod's spec lists the readiness gate ``ctype``."""
    gates = pod_spec(pod).get("readinessGates")
    if not isinstance(gates, list):
        return False
    return any(isinstance(g, Mapping) and g.get("conditionType") == ctype for g in gates)


def continue_token(doc: object) -> str:
    """A list page's ``metadata.continue``: where the next page starts ("" = last page)."""
    found = meta(typed(doc, ObjectList[object]))
    token = cast(Mapping[str, object], found).get("continue")
    return token if isinstance(token, str) else ""


def items(doc: object, kind: type[B]) -> tuple[list[B], str]:
    """A list response's items (as ``kind``) and its resourceVersion (where a watch
    resumes)."""
    envelope = typed(doc, ObjectList[object])
    found = envelope.get("items")
    listed = (
        [typed(dict(i), kind) for i in found if isinstance(i, Mapping)]
        if isinstance(found, list)
        else []
    )
    return listed, str(meta(envelope).get("resourceVersion") or "")
