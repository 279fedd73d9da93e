"""Pods as instances: discovery from the Kubernetes API, read-only.

:func:`discover_pods` turns the pods of a namespace and label selector into
:class:`~artifactcheck.model.values.Instance` values with one list call, on the
official synchronous client: the command line's one-shot discovery, not the
controller's path. The controller's list-then-watch, :func:`list_pods_async` and
:func:`watch_pods_async`, runs on the asynchronous client and streams the pods as JSON
(410 Gone is :class:`~artifactcheck.clients.kube.WatchExpired`: relist);
:func:`pod_to_instance` converts one pod, whether raw JSON, a ``V1Pod`` or a watch
event. :func:`list_pod_events` reads the Events about a pod for ``investigate``, one
synchronous request of the command line too.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from artifactcheck.clients import kube
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    ApiClient,
    ApiStatus,
    Timeout,
    call_json,
    model_as_json,
    parse_time,
    raw,
)
from artifactcheck.clients.kube_bodies import ContainerStatus, Event, JsonObj, ObjectMeta, Pod
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.clients.kube_routes import PODS
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import DEFAULT_CONDITION_TYPE
from artifactcheck.model.settings import KubernetesSource
from artifactcheck.model.values import Instance, VersionSignal

__all__ = [
    "SERVICE_ACCOUNT_NAMESPACE",
    "actionable_copy",
    "containers_ready",
    "default_namespace",
    "default_source",
    "discover_pods",
    "list_pod_events",
    "list_pods_as",
    "list_pods_async",
    "list_pods_raw",
    "pod_is_serving",
    "pod_to_instance",
    "watch_pods_async",
]

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _pod_dict(pod: object, api_client: ApiClient | None) -> Pod:
    """A pod as the API's JSON: from a raw dict, a watch event, or a ``V1Pod`` model."""
    if isinstance(pod, Mapping):
        if "metadata" not in pod and "object" in pod and "type" in pod:  # a watch event
            return _pod_dict(pod.get("raw_object", pod["object"]), api_client)
        return body.typed(dict(pod), Pod)
    data = model_as_json(pod, api_client)
    if not isinstance(data, dict):
        raise TypeError(f"not a pod: {type(pod).__name__}")
    return body.typed(data, Pod)


def _all_ready(statuses: object) -> bool:
    """Every ``containerStatuses`` entry says ready (False for none at all)."""
    if not isinstance(statuses, list) or not statuses:
        return False
    return all(isinstance(s, Mapping) and s.get("ready") is True for s in statuses)


def pod_is_serving(pod: object, *, api_client: ApiClient | None = None) -> bool:
    """True when the pod has an IP, is not terminating and all its containers are ready.

    This is the readiness of the *containers*, not the pod's Ready condition: a pod held
    back by artifactcheck's own readiness gate is serving-capable and must be checked.
    """
    data = _pod_dict(pod, api_client)
    status = body.pod_status(data)
    if not status.get("podIP") or body.meta(data).get("deletionTimestamp"):
        return False
    return _all_ready(status.get("containerStatuses"))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _base_url(scheme: str, ip: str, port: int) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"{scheme}://{host}:{port}/"


def _owner(meta: ObjectMeta) -> str | None:
    found = meta.get("ownerReferences")
    if not isinstance(found, list):
        return None
    refs = [r for r in found if isinstance(r, Mapping)]
    for ref in refs:
        if ref.get("kind") == "ReplicaSet" and ref.get("name"):
            return str(ref["name"])
    for ref in refs:
        if ref.get("controller") and ref.get("name"):
            return str(ref["name"])
    return None


def _serving_container(data: Pod) -> ContainerStatus | None:
    statuses = body.pod_status(data).get("containerStatuses")
    if not isinstance(statuses, list) or not statuses:
        return None
    containers = body.pod_spec(data).get("containers")
    if isinstance(containers, list) and containers and isinstance(containers[0], Mapping):
        first = containers[0].get("name")
        for s in statuses:
            if isinstance(s, Mapping) and s.get("name") == first:
                return s
    head = statuses[0]
    return head if isinstance(head, Mapping) else None


def _signals(
    src: KubernetesSource, labels: Mapping[str, object], ann: dict[str, str]
) -> tuple[VersionSignal, ...]:
    """The version the pod declares, by the label and the annotation ``src`` names."""
    signals: list[VersionSignal] = []
    if src.version_label and labels.get(src.version_label):
        signals.append(VersionSignal(f"label:{src.version_label}", str(labels[src.version_label])))
    if src.version_annotation and ann.get(src.version_annotation):
        signals.append(
            VersionSignal(f"annotation:{src.version_annotation}", ann[src.version_annotation])
        )
    return tuple(signals)


def pod_to_instance(
    pod: object,
    *,
    source: KubernetesSource | None = None,
    condition_type: str = DEFAULT_CONDITION_TYPE,
    api_client: ApiClient | None = None,
) -> Instance | None:
    """One pod (raw dict, ``V1Pod`` or a watch event) as an Instance; None without an IP.

    A pod with no IP cannot be fetched from, so it is not an instance yet; the
    controller converts it again when a watch event brings its IP.
    """
    src = source or KubernetesSource.model_validate({})
    data = _pod_dict(pod, api_client)
    meta = body.meta(data)
    spec = body.pod_spec(data)
    status = body.pod_status(data)
    ip = status.get("podIP")
    if not ip or not _is_ip(str(ip)):
        return None  # a pod IP that is a name would be resolved: never where kubelet put it
    labels = body.obj(meta.get("labels"))
    annotations = body.annotations_of(data)
    container = _serving_container(data) or {}
    gate = body.condition(data, condition_type)
    ready = body.condition(data, "Ready")
    namespace = str(meta.get("namespace") or src.namespace)
    return Instance(
        name=f"{namespace}/{meta.get('name')}",
        base_url=_base_url(src.scheme, str(ip), src.port),
        kind="pod",
        signals=_signals(src, labels, annotations),
        namespace=namespace,
        node=spec.get("nodeName") or None,
        owner=_owner(meta),
        image=container.get("image") or None,
        image_id=container.get("imageID") or None,
        started_at=parse_time(status.get("startTime")) or parse_time(meta.get("creationTimestamp")),
        has_readiness_gate=body.has_gate(data, condition_type),
        uid=meta.get("uid") or None,
        labels={str(k): str(v) for k, v in labels.items()},
        annotations=annotations,
        gate_status=str(gate["status"]) if gate and gate.get("status") else None,
        ready=bool(ready and ready.get("status") == "True"),
    )


def actionable_copy(pod: Mapping[str, object], condition_type: str) -> Pod:
    """The part of a pod the actions read before they write (a watching controller
    keeps it per pod instead of GETting the pod first): its identity, resourceVersion
    and annotations, its readiness gates, and the gate's condition. A few hundred
    bytes instead of the whole pod."""
    data = body.typed(pod, Pod)
    meta = body.meta(data)
    kept = ObjectMeta()
    for key in ("name", "namespace", "uid", "resourceVersion"):
        if key in meta:
            kept[key] = meta[key]
    if "annotations" in meta:
        kept["annotations"] = meta["annotations"]
    copy: Pod = {"metadata": kept}
    gates = body.pod_spec(data).get("readinessGates")
    if isinstance(gates, list):
        copy["spec"] = {"readinessGates": gates}
    gate = body.condition(data, condition_type)
    copy["status"] = {"conditions": [gate]} if gate is not None else {}
    return copy


def containers_ready(pod: Mapping[str, object]) -> tuple[bool, datetime | None]:
    """Whether a pod's containers are ready, and since when (the ``ContainersReady``
    condition's ``lastTransitionTime``, when it says so).

    Kubelet gives a pod its IP before its containers are ready; until then the pod
    refuses connections, so checking it would only say ``unreachable``. Without the
    condition, every ``containerStatuses`` entry must be ready; a pod that reports
    neither (not written by a kubelet) counts as ready, as before.
    """
    data = body.typed(pod, Pod)
    cond = body.condition(data, "ContainersReady")
    if cond is not None and cond.get("status") is not None:
        ready = cond.get("status") == "True"
        return ready, (parse_time(cond.get("lastTransitionTime")) if ready else None)
    statuses = body.pod_status(data).get("containerStatuses")
    if isinstance(statuses, list) and statuses:
        return _all_ready(statuses), None
    return True, None


def default_namespace(
    environ: Mapping[str, str] | None = None, sa_file: str = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    """The namespace the controller runs in: ``POD_NAMESPACE`` (the downward API), else
    the service account's namespace file; a ConfigError when neither says."""
    env = os.environ if environ is None else environ
    if env.get("POD_NAMESPACE", "").strip():
        return env["POD_NAMESPACE"].strip()
    try:
        with open(sa_file, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        text = ""
    if text:
        return text
    raise ConfigError(
        "no namespace for the leader Lease: give --lease-namespace, or set POD_NAMESPACE "
        f"(the downward API), or run with a service account ({sa_file} is missing)"
    )


def default_source(namespace: str) -> KubernetesSource:
    """Every pod of a namespace, version from the default label: what an ArtifactCheck
    without a ``kubernetes`` section selects."""
    return KubernetesSource.model_validate({"namespace": namespace})


def _pods_in(namespace: str, selector: str) -> str:
    return f"pods in {namespace}" + (f" matching {selector!r}" if selector else "")


T = TypeVar("T")

#: Pods per list request: client-go's pager reads lists 500 objects at a time.
LIST_PAGE = 500


def list_pods_raw(
    api_client: ApiClient,
    *,
    namespace: str,
    selector: str = "",
    request_timeout: Timeout = DEFAULT_TIMEOUT,
    page: int | None = LIST_PAGE,
) -> tuple[list[JsonObj], str]:
    """The pods of a namespace matching a label selector, as JSON, with the list's
    resourceVersion (:func:`list_pods_as`, each pod as it is)."""
    return list_pods_as(
        api_client,
        _as_is,
        namespace=namespace,
        selector=selector,
        request_timeout=request_timeout,
        page=page,
    )


def _as_is(pod: JsonObj) -> JsonObj:
    return pod


def list_pods_as(
    api_client: ApiClient,
    each: Callable[[JsonObj], T],
    *,
    namespace: str,
    selector: str = "",
    request_timeout: Timeout = DEFAULT_TIMEOUT,
    page: int | None = LIST_PAGE,
) -> tuple[list[T], str]:
    """The pods of a namespace matching a label selector, with the list's
    resourceVersion: the "list" half of list-then-watch.

    Read ``page`` pods at a time (``limit``/``continue``, as client-go's pager does;
    None: one request), each pod passed through ``each`` as its page arrives: a
    caller that keeps a summary of each pod (the controller) never holds the JSON of
    every pod at once, which would set the controller's peak memory in a large namespace. A
    continue token the API server no longer honours (410: the snapshot was
    compacted) restarts the list in one request, as client-go's pager falls back.
    """
    core = kube.CoreV1Api(api_client)
    what = f"list {_pods_in(namespace, selector)}"
    out: list[T] = []
    token: str | None = None
    first: str | None = None  # every page is of the first one's snapshot
    while True:
        paging: dict[str, Any] = {"limit": page} if page else {}
        if token:
            paging["_continue"] = token
        try:
            doc = call_json(
                what,
                functools.partial(
                    core.list_namespaced_pod,
                    namespace,
                    label_selector=selector or None,
                    **paging,
                    **raw(request_timeout),
                ),
                passthrough=(410,) if token else (),
            )
        except ApiStatus:  # the continue token expired: the whole list, at once
            return list_pods_as(
                api_client,
                each,
                namespace=namespace,
                selector=selector,
                request_timeout=request_timeout,
                page=None,
            )
        pods, version = body.items(doc, JsonObj)
        first = version if first is None else first
        token = body.continue_token(doc) if page else ""
        del doc
        out += [each(pod) for pod in pods]
        del pods
        if not token:
            return out, first


def discover_pods(
    source: KubernetesSource,
    *,
    api_client: ApiClient,
    condition_type: str = DEFAULT_CONDITION_TYPE,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> list[Instance]:
    """The pods of ``source`` as Instances, with one list call, sorted by name.

    With ``source.ready_only`` (the default) only pods that can serve are returned
    (:func:`pod_is_serving`); pods without an IP are never returned.
    """
    items, _ = list_pods_raw(
        api_client,
        namespace=source.namespace,
        selector=source.selector,
        request_timeout=request_timeout,
    )
    out: list[Instance] = []
    for item in items:
        if source.ready_only and not pod_is_serving(item):
            continue
        inst = pod_to_instance(item, source=source, condition_type=condition_type)
        if inst is not None:
            out.append(inst)
    return sorted(out, key=lambda i: i.name)


# --------------------------------------------------------------------------- async


async def list_pods_async(
    kube: KubeHttp,
    each: Callable[[JsonObj], T],
    *,
    namespace: str,
    selector: str = "",
    page: int | None = LIST_PAGE,
) -> tuple[list[T], str]:
    """:func:`list_pods_as` on the asynchronous client: paged, each pod passed through
    ``each`` as its page arrives, an expired continue token restarting in one request."""
    what = f"list {_pods_in(namespace, selector)}"
    out: list[T] = []
    token = ""
    first: str | None = None  # every page is of the first one's snapshot
    while True:
        params: dict[str, str | int | bool] = {"limit": page} if page else {}
        if selector:
            params["labelSelector"] = selector
        if token:
            params["continue"] = token
        try:
            doc = await kube.list(
                what,
                PODS.path(namespace),
                params=params,
                passthrough=(410,) if token else (),
            )
        except ApiStatus:  # the continue token expired: the whole list, at once
            return await list_pods_async(
                kube, each, namespace=namespace, selector=selector, page=None
            )
        pods, version = body.items(doc, JsonObj)
        first = version if first is None else first
        token = body.continue_token(doc) if page else ""
        del doc
        out += [each(pod) for pod in pods]
        del pods
        if not token:
            return out, first


def watch_pods_async(
    kube: KubeHttp,
    *,
    namespace: str,
    selector: str = "",
    resource_version: str | None = None,
    timeout: int = 30,
) -> AsyncIterator[tuple[str, JsonObj]]:
    """Watch pods from ``resource_version`` (with bookmarks): ``(ADDED|MODIFIED|
    DELETED|BOOKMARK, pod JSON)``, 410 Gone raises WatchExpired; close the
    iterator, or cancel its task, to end it."""
    return kube.watch(
        f"watch {_pods_in(namespace, selector)}",
        PODS.path(namespace),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        params={"labelSelector": selector} if selector else None,
        bookmarks=True,
    )


def list_pod_events(
    api_client: ApiClient,
    *,
    namespace: str,
    name: str,
    limit: int = 20,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> list[Event]:
    """The core/v1 Events about one pod, newest first (one list call with a field
    selector), for ``investigate``: what ``kubectl describe pod`` shows at the end."""
    core = kube.CoreV1Api(api_client)
    doc = call_json(
        f"list events of pod {namespace}/{name}",
        lambda: core.list_namespaced_event(
            namespace,
            field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}",
            **raw(request_timeout),
        ),
    )
    items, _ = body.items(doc, Event)

    def stamp(event: Event) -> str:
        return str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or body.meta(event).get("creationTimestamp")
            or ""
        )

    return sorted(items, key=stamp, reverse=True)[:limit]
