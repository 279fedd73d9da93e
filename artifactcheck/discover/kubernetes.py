"""Pods as instances, and every write artifactcheck makes to a Kubernetes cluster.

This is the only module that imports the ``kubernetes`` client library (and ``urllib3``
under it), so that the rest of artifactcheck never sees a library type or a library
error. It does four things:

* **discover**: :func:`discover_pods` turns the pods of a namespace and label selector
  into :class:`~artifactcheck.model.values.Instance` values with one list call; for the
  controller's list-then-watch, :func:`list_pods_raw` and :func:`watch_pods` stream the
  pods as JSON (410 Gone is :class:`WatchExpired`: relist) and :func:`pod_to_instance`
  converts one pod, whether raw JSON, a ``V1Pod`` or a ``Watch().stream`` event;
* **act**: :class:`KubeActor` quarantines (readiness-gate condition ``False``),
  releases, flags (annotations + one deduplicated Warning Event), cordons nodes, and
  dispatches the :class:`~artifactcheck.model.values.Action` values decided by
  :mod:`artifactcheck.judge.decide`. Every action reads the object first and writes only what
  differs, so repeating it (a retry, a restarted controller) writes nothing;
* **lead**: :class:`LeaseLock` is client-go's ``LeaseLock`` + ``tryAcquireOrRenew`` on a
  ``coordination.k8s.io/v1`` Lease, so two controller replicas never both act;
* **report**: :func:`list_checks` (and :func:`list_checks_raw` / :func:`watch_checks`)
  read ``ArtifactCheck`` resources, :func:`patch_check_status` writes their status
  subresource.

Errors are translated here, always ``raise ... from exc``: an unreachable, slow or
failing API server (connection errors, timeouts, 429, 5xx, a conflict that persists)
is a :class:`~artifactcheck.model.errors.DependencyError`, which the caller turns into
``inconclusive``; a request the server rejects because of how artifactcheck was
configured (400/422 invalid selector or condition type, 401 credentials, 403 RBAC,
404 API or CRD not installed) is a :class:`~artifactcheck.model.errors.ConfigError`. A pod or
node that vanished between discovery and action is neither: the action logs it and
returns ``False``.

The client is synchronous; the caller runs these functions in threads
(``asyncio.to_thread``). Nothing here holds configuration in module globals: each call
takes its ``api_client`` explicitly, and :func:`load_api_client` builds one.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import json
import logging
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from artifactcheck.model.errors import ArtifactCheckError, ConfigError, DependencyError
from artifactcheck.model.settings import KubernetesSource, PolicySettings
from artifactcheck.model.values import Action, ActionKind, Instance, InstanceResult, VersionSignal

__all__ = [
    "ANN_CHECKED_AT",
    "ANN_CORDONED",
    "ANN_CORDON_REASON",
    "ANN_FLAGGED_AT",
    "ANN_QUARANTINED",
    "ANN_REASON",
    "ANN_STREAK",
    "ANN_VERDICT",
    "CRD_GROUP",
    "CRD_PLURAL",
    "CRD_VERSION",
    "DEFAULT_CONDITION_TYPE",
    "DEFAULT_TIMEOUT",
    "LEASE_NAME",
    "KubeActor",
    "LeaseLock",
    "LeaseNamespaceMissing",
    "NotLeader",
    "WatchExpired",
    "abort_stream",
    "containers_ready",
    "cordoned_by_us",
    "default_namespace",
    "default_source",
    "discover_pods",
    "event_reason_for",
    "list_checks",
    "list_checks_raw",
    "list_pods_raw",
    "load_api_client",
    "patch_check_status",
    "record_check_event",
    "pod_is_serving",
    "pod_to_instance",
    "watch_checks",
    "watch_pods",
]

DEFAULT_CONDITION_TYPE = "artifactcheck.io/content-verified"
ANN_QUARANTINED = "artifactcheck.io/quarantined"
ANN_VERDICT = "artifactcheck.io/verdict"
ANN_REASON = "artifactcheck.io/reason"
ANN_STREAK = "artifactcheck.io/streak"
ANN_CHECKED_AT = "artifactcheck.io/checked-at"
ANN_FLAGGED_AT = "artifactcheck.io/flagged-at"
ANN_CORDONED = "artifactcheck.io/cordoned"
ANN_CORDON_REASON = "artifactcheck.io/cordon-reason"
_FLAG_ANNOTATIONS = (ANN_VERDICT, ANN_REASON, ANN_STREAK, ANN_FLAGGED_AT)

CRD_GROUP = "artifactcheck.io"
CRD_VERSION = "v1alpha1"
CRD_PLURAL = "artifactchecks"
LEASE_NAME = "artifactcheck-leader"

#: (connect, read) seconds for every API request: a hung API server must turn into a
#: DependencyError within a bounded time, never a controller thread stuck forever.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
Timeout = float | tuple[float, float]

_MAX_TEXT = 1024  # annotation reason, condition and event messages, characters
_MAX_FILES_NAMED = 10
_EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS = "default"  # where kubectl records Node events
_MERGE_PATCH = "application/merge-patch+json"
_STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

#: Event reason per verdict (CamelCase, as Kubernetes reasons are).
_EVENT_REASONS: Mapping[str, str] = {
    "mismatch": "ContentMismatch",
    "drift": "ContentDrift",
    "cdn-missing": "CdnMissing",
    "cdn-mismatch": "CdnMismatch",
    "signal-conflict": "SignalConflict",
}
_UNKNOWN_VERDICTS = frozenset({"inconclusive", "unreachable"})

JsonObj = dict[str, Any]
Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]
T = TypeVar("T")
_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- errors


class _Status(Exception):
    """An API status the caller handles itself (404 gone, 409 conflict); never escapes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def _status_message(exc: ApiException) -> str:
    """The ``message`` of the Status body a Kubernetes API server sends, else the reason."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            doc = json.loads(body)
        except ValueError:
            return body[:300]
        if isinstance(doc, dict) and isinstance(doc.get("message"), str):
            return cast(str, doc["message"])
    return str(exc.reason or "no reason given")


def _translate(what: str, exc: ApiException) -> ArtifactCheckError:
    """Map an API status to the artifactcheck error a caller can act on."""
    status = int(exc.status or 0)
    message = _status_message(exc)
    if status in (400, 422):
        return ConfigError(f"{what}: rejected by the API server ({status}): {message}")
    if status == 401:
        return ConfigError(
            f"{what}: unauthorized (401): the credentials in the kubeconfig or service "
            f"account are missing or expired: {message}"
        )
    if status == 403:
        return ConfigError(
            f"{what}: forbidden (403): the RBAC role of artifactcheck does not allow this "
            f"(see k8s/rbac.yaml): {message}"
        )
    if status == 404:
        return ConfigError(
            f"{what}: not found (404): the API, namespace or CRD is not installed: {message}"
        )
    if status == 0:
        return DependencyError(f"{what}: the request could not be made: {message}")
    return DependencyError(f"{what}: the API server answered {status}: {message}")


def _call(what: str, fn: Callable[[], T], *, passthrough: Collection[int] = ()) -> T:
    """Run one API request, translating every library error; ``passthrough`` statuses
    are raised as :class:`_Status` for the caller to handle (404, 409)."""
    try:
        return fn()
    except ApiException as exc:
        status = int(exc.status or 0)
        if status in passthrough:
            raise _Status(status, _status_message(exc)) from exc
        raise _translate(what, exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise DependencyError(
            f"{what}: API server unreachable, too slow or overloaded: {exc}"
        ) from exc
    except OSError as exc:
        raise DependencyError(f"{what}: API server unreachable: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DependencyError(f"{what}: the API server answered invalid JSON: {exc}") from exc


def _read_json(response: Any) -> Any:
    """Decode a ``_preload_content=False`` response: raw JSON, no model round trip."""
    try:
        data = response.data
    finally:
        release = getattr(response, "release_conn", None)
        if callable(release):
            release()
    return json.loads(data)


def _mutate(what: str, attempt: Callable[[], T], *, logger: Logger) -> T:
    """Run a read-modify-write; on 409 Conflict re-read and retry once, then give up.

    ``attempt`` must re-read the object itself, so the retry computes its patch from
    the state that won the race rather than from the stale one.
    """
    try:
        return attempt()
    except _Status as first:
        if first.status != 409:
            raise
        logger.info("%s: conflict (%s); re-reading and retrying once", what, first.message)
    try:
        return attempt()
    except _Status as second:
        if second.status != 409:
            raise
        raise DependencyError(
            f"{what}: still conflicting after re-reading: {second.message}"
        ) from second


# --------------------------------------------------------------------------- helpers


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _rfc3339(moment: datetime) -> str:
    """``metav1.Time``: seconds precision, UTC, ``Z``."""
    return _aware(moment).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: exactly six fractional digits, as the API server requires."""
    return _aware(moment).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return _aware(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return _aware(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def _truncate(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _with_files(message: str, files: Sequence[str]) -> str:
    """The message followed by the files it is about, a bounded number of them named."""
    if not files or all(f in message for f in files):
        return _truncate(message)  # the message names them already
    named = ", ".join(files[:_MAX_FILES_NAMED])
    more = len(files) - _MAX_FILES_NAMED
    suffix = f"files: {named}" + (f" (+{more} more)" if more > 0 else "")
    return _truncate(f"{message}; {suffix}" if message else suffix)


def _obj(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one: API data is read defensively."""
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _obj(obj.get("metadata"))


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    ann = _meta(obj).get("annotations")
    return dict(ann) if isinstance(ann, Mapping) else {}


def _conditions(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status")
    conds = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def _condition(pod: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in _conditions(pod):
        if cond.get("type") == ctype:
            return cond
    return None


def _has_gate(pod: Mapping[str, Any], ctype: str) -> bool:
    spec = pod.get("spec")
    gates = spec.get("readinessGates") if isinstance(spec, Mapping) else None
    if not isinstance(gates, list):
        return False
    return any(isinstance(g, Mapping) and g.get("conditionType") == ctype for g in gates)


def event_reason_for(verdict: str | None) -> str:
    """The CamelCase Event/condition reason for a verdict, e.g. ``ContentMismatch``."""
    if verdict is None:
        return "ContentInconsistent"
    if verdict in _EVENT_REASONS:
        return _EVENT_REASONS[verdict]
    return "Content" + "".join(part.capitalize() for part in verdict.split("-"))


# --------------------------------------------------------------------------- client


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s.ApiClient:
    """An ApiClient from the in-cluster service account, else from a kubeconfig.

    An explicit ``kubeconfig`` or ``context`` means the user chose a cluster, so the
    in-cluster configuration is then not tried. Failures are a ConfigError naming both
    attempts, because "no cluster configured" is a usage error, not an outage.
    """
    configuration = k8s.Configuration()
    tried: list[str] = []
    if kubeconfig is None and context is None:
        try:
            cast(Any, k8s_config).load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            tried.append(f"in-cluster: {exc}")
        else:
            return k8s.ApiClient(configuration)
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        cast(Any, k8s_config).load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        tried.append(f"kubeconfig {path}: {exc}")
        raise ConfigError("no usable Kubernetes configuration: " + "; ".join(tried)) from exc
    return k8s.ApiClient(configuration)


# --------------------------------------------------------------------------- discover


def _pod_dict(pod: Any, api_client: k8s.ApiClient | None) -> JsonObj:
    """A pod as the API's JSON: from a raw dict, a watch event, or a ``V1Pod`` model."""
    if isinstance(pod, Mapping):
        if "metadata" not in pod and "object" in pod and "type" in pod:  # a watch event
            return _pod_dict(pod.get("raw_object", pod["object"]), api_client)
        return dict(pod)
    serializer = api_client if api_client is not None else k8s.ApiClient(k8s.Configuration())
    try:
        data = cast(Any, serializer).sanitize_for_serialization(pod)
    finally:
        if api_client is None:
            cast(Any, serializer).close()
    if not isinstance(data, dict):
        raise TypeError(f"not a pod: {type(pod).__name__}")
    return data


def pod_is_serving(pod: Any, *, api_client: k8s.ApiClient | None = None) -> bool:
    """True when the pod has an IP, is not terminating and all its containers are ready.

    This is the readiness of the *containers*, not the pod's Ready condition: a pod held
    back by artifactcheck's own readiness gate is serving-capable and must be checked.
    """
    data = _pod_dict(pod, api_client)
    status = _obj(data.get("status"))
    if not status.get("podIP") or _meta(data).get("deletionTimestamp"):
        return False
    statuses = status.get("containerStatuses")
    if not isinstance(statuses, list) or not statuses:
        return False
    return all(isinstance(s, Mapping) and s.get("ready") is True for s in statuses)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _base_url(scheme: str, ip: str, port: int) -> str:
    host = f"[{ip}]" if ":" in ip else ip
    return f"{scheme}://{host}:{port}/"


def _owner(meta: Mapping[str, Any]) -> str | None:
    refs = meta.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    refs = [r for r in refs if isinstance(r, Mapping)]
    for ref in refs:
        if ref.get("kind") == "ReplicaSet" and ref.get("name"):
            return str(ref["name"])
    for ref in refs:
        if ref.get("controller") and ref.get("name"):
            return str(ref["name"])
    return None


def _serving_container(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    status = data.get("status")
    statuses = status.get("containerStatuses") if isinstance(status, Mapping) else None
    if not isinstance(statuses, list) or not statuses:
        return None
    spec = data.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if isinstance(containers, list) and containers and isinstance(containers[0], Mapping):
        first = containers[0].get("name")
        for s in statuses:
            if isinstance(s, Mapping) and s.get("name") == first:
                return s
    head = statuses[0]
    return head if isinstance(head, Mapping) else None


def pod_to_instance(
    pod: Any,
    *,
    source: KubernetesSource | None = None,
    condition_type: str = DEFAULT_CONDITION_TYPE,
    api_client: k8s.ApiClient | None = None,
) -> Instance | None:
    """One pod (raw dict, ``V1Pod`` or a watch event) as an Instance; None without an IP.

    A pod with no IP cannot be fetched from, so it is not an instance yet; the
    controller converts it again when a watch event brings its IP.
    """
    src = source or KubernetesSource.model_validate({})
    data = _pod_dict(pod, api_client)
    meta = _meta(data)
    spec = _obj(data.get("spec"))
    status = _obj(data.get("status"))
    ip = status.get("podIP")
    if not ip or not _is_ip(str(ip)):
        return None  # a pod IP that is a name would be resolved: never where kubelet put it
    labels = _obj(meta.get("labels"))
    annotations = _annotations(data)
    signals: list[VersionSignal] = []
    if src.version_label and labels.get(src.version_label):
        signals.append(VersionSignal(f"label:{src.version_label}", str(labels[src.version_label])))
    if src.version_annotation and annotations.get(src.version_annotation):
        signals.append(
            VersionSignal(
                f"annotation:{src.version_annotation}", annotations[src.version_annotation]
            )
        )
    container = _serving_container(data) or {}
    gate = _condition(data, condition_type)
    ready = _condition(data, "Ready")
    namespace = str(meta.get("namespace") or src.namespace)
    return Instance(
        name=f"{namespace}/{meta.get('name')}",
        base_url=_base_url(src.scheme, str(ip), src.port),
        kind="pod",
        signals=tuple(signals),
        namespace=namespace,
        node=spec.get("nodeName") or None,
        owner=_owner(meta),
        image=container.get("image") or None,
        image_id=container.get("imageID") or None,
        started_at=_parse_time(status.get("startTime"))
        or _parse_time(meta.get("creationTimestamp")),
        has_readiness_gate=_has_gate(data, condition_type),
        uid=meta.get("uid") or None,
        labels={str(k): str(v) for k, v in labels.items()},
        annotations=annotations,
        gate_status=str(gate["status"]) if gate and gate.get("status") else None,
        ready=bool(ready and ready.get("status") == "True"),
    )


def containers_ready(pod: Mapping[str, Any]) -> tuple[bool, datetime | None]:
    """Whether a pod's containers are ready, and since when (the ``ContainersReady``
    condition's ``lastTransitionTime``, when it says so).

    Kubelet gives a pod its IP before its containers are ready; until then the pod
    refuses connections, so checking it would only say ``unreachable``. Without the
    condition, every ``containerStatuses`` entry must be ready; a pod that reports
    neither (not written by a kubelet) counts as ready, as before.
    """
    cond = _condition(pod, "ContainersReady")
    if cond is not None and cond.get("status") is not None:
        ready = cond.get("status") == "True"
        return ready, (_parse_time(cond.get("lastTransitionTime")) if ready else None)
    statuses = _obj(pod.get("status")).get("containerStatuses")
    if isinstance(statuses, list) and statuses:
        return all(isinstance(s, Mapping) and s.get("ready") is True for s in statuses), None
    return True, None


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


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


def _items(doc: Any) -> tuple[list[JsonObj], str]:
    """A list response's items and its resourceVersion (where a watch resumes)."""
    body = _obj(doc)
    items = body.get("items")
    listed = [dict(i) for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []
    return listed, str(_meta(body).get("resourceVersion") or "")


def list_pods_raw(
    api_client: k8s.ApiClient,
    *,
    namespace: str,
    selector: str = "",
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> tuple[list[JsonObj], str]:
    """The pods of a namespace matching a label selector, as JSON, with the list's
    resourceVersion: the "list" half of list-then-watch. One request."""
    core = k8s.CoreV1Api(api_client)
    what = f"list pods in {namespace}" + (f" matching {selector!r}" if selector else "")
    doc = _call(
        what,
        lambda: _read_json(
            core.list_namespaced_pod(
                namespace,
                label_selector=selector or None,
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        ),
    )
    return _items(doc)


def discover_pods(
    source: KubernetesSource,
    *,
    api_client: k8s.ApiClient,
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


# --------------------------------------------------------------------------- watch


class WatchExpired(DependencyError):
    """The watch's resourceVersion is older than the server keeps (410 Gone): relist."""


class NotLeader(DependencyError):
    """A write refused locally: this replica may no longer act (its lease lapsed)."""


class LeaseNamespaceMissing(ConfigError):
    """The Lease's namespace does not exist: a configuration error, not an outage."""


def abort_stream(response: Any) -> None:
    """Make a watch blocked in a read on another thread return now: shut its socket
    down (urllib3's ``HTTPResponse.shutdown``), which a read in progress notices at
    once, unlike ``close()``, which waits for the reader."""
    try:
        response.shutdown()
        return
    except (ValueError, AttributeError, OSError):  # no socket handle kept for it
        pass
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is None:
        fp = getattr(getattr(response, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _watch_timeout(request_timeout: Timeout, seconds: int) -> tuple[float, float]:
    """Connect as usual; wait for data a little longer than the server keeps the watch
    open, so an idle watch ends by the server's timeout, not by a read timeout."""
    connect = request_timeout[0] if isinstance(request_timeout, tuple) else request_timeout
    return (connect, seconds + 10.0)


def _watch(
    what: str,
    send: Callable[[], Any],
    stop: threading.Event | None,
    opened: Callable[[Any, bool], None] | None = None,
) -> Iterator[tuple[str, JsonObj]]:
    """Stream ``(type, object)`` watch events as JSON until the server ends the watch
    (its ``timeoutSeconds``) or ``stop`` is set; 410 Gone raises WatchExpired.

    ``opened(response, True)`` is called once the stream is open and
    ``opened(response, False)`` when it ends, so that a shutting-down caller can
    :func:`abort_stream` it from another thread; a stream aborted while ``stop`` is
    set ends quietly instead of as a broken connection.
    """
    try:
        response = _call(what, send, passthrough=(410,))
    except _Status as st:
        raise WatchExpired(f"{what}: {st.message}") from st
    if opened is not None:
        opened(response, True)
    pending = b""
    try:
        if stop is not None and stop.is_set():
            return
        for chunk in response.stream(65536, decode_content=True):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = _obj(json.loads(line))
                kind, obj = str(event.get("type")), dict(_obj(event.get("object")))
                if kind == "ERROR":
                    message = obj.get("message") or obj.get("reason") or "watch error"
                    if obj.get("code") == 410:
                        raise WatchExpired(f"{what}: {message}")
                    raise DependencyError(
                        f"{what}: the watch failed ({obj.get('code')}): {message}"
                    )
                yield kind, obj
                if stop is not None and stop.is_set():
                    return
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        if stop is not None and stop.is_set():
            return  # aborted on purpose, at shutdown
        if isinstance(exc, json.JSONDecodeError):
            raise DependencyError(f"{what}: the API server sent an invalid event: {exc}") from exc
        raise DependencyError(f"{what}: the watch connection broke: {exc}") from exc
    finally:
        if opened is not None:
            opened(response, False)
        response.close()
        response.release_conn()


def watch_pods(
    api_client: k8s.ApiClient,
    *,
    namespace: str,
    selector: str = "",
    resource_version: str | None = None,
    timeout: int = 30,
    stop: threading.Event | None = None,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
    opened: Callable[[Any, bool], None] | None = None,
) -> Iterator[tuple[str, JsonObj]]:
    """Watch pods from ``resource_version`` (from :func:`list_pods_raw`): yields
    ``(ADDED|MODIFIED|DELETED|BOOKMARK, pod JSON)``, feed them to :func:`pod_to_instance`.

    Ends when the server closes the watch after ``timeout`` seconds (resume from the
    last resourceVersion seen) or when ``stop`` is set; raises WatchExpired on 410
    (relist) and DependencyError when the connection breaks (reconnect with backoff).
    """
    core = k8s.CoreV1Api(api_client)
    seconds = max(1, math.ceil(timeout))
    return _watch(
        f"watch pods in {namespace}" + (f" matching {selector!r}" if selector else ""),
        lambda: core.list_namespaced_pod(
            namespace,
            label_selector=selector or None,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version or None,
            timeout_seconds=seconds,
            _preload_content=False,
            _request_timeout=_watch_timeout(request_timeout, seconds),
        ),
        stop,
        opened,
    )


# --------------------------------------------------------------------------- act


class KubeActor:
    """Performs the actions policy decided, idempotently and within what policy allows.

    Each method reads the object, computes the smallest change, and writes only when
    something differs, so repeating an action (a retry, a restarted controller, two
    cycles deciding the same thing) writes nothing. Read-modify-writes carry the
    ``resourceVersion`` they read as a precondition; a 409 re-reads and retries once.
    Methods return True when they changed the cluster. Under ``policy.dry_run`` (or for
    an Action with ``dry_run``) nothing at all is sent to the API server.
    """

    def __init__(
        self,
        *,
        api_client: k8s.ApiClient,
        policy: PolicySettings,
        component: str = "artifactcheck",
        controller_name: str | None = None,
        logger: Logger | None = None,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        clock: Callable[[], datetime] = _utcnow,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        self.api_client = api_client
        self.policy = policy
        #: Asked right before every write: a leader whose lease could not be renewed
        #: in time must not write, even in the middle of an action it began.
        self.may_write = may_write
        self.component = component
        self.controller_name = controller_name or component
        self.log: Logger = logger or _LOG
        self.timeout = request_timeout
        self.clock = clock
        self._core = k8s.CoreV1Api(api_client)

    # ---- plumbing

    def _guard(self, what: str) -> None:
        if self.may_write is not None and not self.may_write():
            raise NotLeader(f"{what}: not sent, this replica is no longer the leader")

    def _dry(self, what: str) -> bool:
        if self.policy.dry_run:
            self.log.info("dry-run: would %s", what)
            return True
        return False

    def _get_pod(self, ns: str, name: str) -> JsonObj:
        return cast(
            JsonObj,
            _call(
                f"get pod {ns}/{name}",
                lambda: _read_json(
                    self._core.read_namespaced_pod(
                        name, ns, _preload_content=False, _request_timeout=self.timeout
                    )
                ),
                passthrough=(404,),
            ),
        )

    def _patch_pod(self, ns: str, name: str, body: JsonObj, *, status: bool) -> JsonObj:
        self._guard(f"patch pod {ns}/{name}")
        if status:
            what = f"patch pods/status {ns}/{name}"

            def send() -> Any:
                return self._core.patch_namespaced_pod_status(
                    name,
                    ns,
                    body,
                    _content_type=_STRATEGIC_MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=self.timeout,
                )
        else:
            what = f"patch pod {ns}/{name}"

            def send() -> Any:
                return self._core.patch_namespaced_pod(
                    name,
                    ns,
                    body,
                    _content_type=_MERGE_PATCH,
                    _preload_content=False,
                    _request_timeout=self.timeout,
                )

        return cast(JsonObj, _call(what, lambda: _read_json(send()), passthrough=(404, 409)))

    def _on_pod(self, what: str, ns: str, name: str, step: Callable[[JsonObj], bool]) -> bool:
        """Read the pod and run ``step`` on it, with one retry on conflict; a pod that
        is gone is logged and reported as "nothing changed", not as an error."""
        try:
            return _mutate(what, lambda: step(self._get_pod(ns, name)), logger=self.log)
        except _Status as st:
            if st.status == 404:
                self.log.warning("%s: pod %s/%s is gone; nothing to do", what, ns, name)
                return False
            raise DependencyError(f"{what}: unexpected status {st.status}: {st.message}") from st

    def _set_condition(
        self, pod: JsonObj, ns: str, name: str, *, status: str, reason: str, message: str
    ) -> JsonObj | None:
        """Strategic-merge the gate condition (merged by ``type``, others untouched)."""
        ctype = self.policy.condition_type
        current = _condition(pod, ctype)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == (
            status,
            reason,
            message,
        ):
            return None
        transition = (
            current.get("lastTransitionTime")
            if current and current.get("status") == status and current.get("lastTransitionTime")
            else _rfc3339(self.clock())
        )
        cond = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        }
        body = {
            "metadata": {"resourceVersion": _meta(pod).get("resourceVersion")},
            "status": {"conditions": [cond]},
        }
        return self._patch_pod(ns, name, body, status=True)

    def _set_annotations(
        self, pod: JsonObj, ns: str, name: str, changes: Mapping[str, str | None]
    ) -> JsonObj | None:
        """Merge-patch only the annotations that differ (None removes one)."""
        current = _annotations(pod)
        diff = {k: v for k, v in changes.items() if current.get(k) != v}
        if not diff:
            return None
        body = {
            "metadata": {
                "resourceVersion": _meta(pod).get("resourceVersion"),
                "annotations": diff,
            }
        }
        return self._patch_pod(ns, name, body, status=False)

    def _event(
        self,
        *,
        involved: Mapping[str, Any],
        event_type: str,
        reason: str,
        message: str,
    ) -> None:
        """Record one Event per (object, reason), aggregated like client-go's correlator.

        The Event's name is derived from the object's uid, the reason and our component,
        so a repeat (a new episode, another replica, a restarted controller) finds the
        existing Event through 409 AlreadyExists and PATCHes its ``count`` and
        ``lastTimestamp`` instead of creating another one: no event storm.
        """
        namespace = involved.get("namespace") or _EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS
        key = "/".join(str(involved.get(k) or "") for k in ("kind", "namespace", "name", "uid"))
        digest = hashlib.sha256(f"{key}/{reason}/{self.component}".encode()).hexdigest()[:16]
        where = "/".join(str(p) for p in (involved.get("namespace"), involved.get("name")) if p)
        target = f"{involved.get('kind')} {where}"
        name = f"{str(involved['name'])[:200].rstrip('-.')}.{digest}"
        now = self.clock().replace(microsecond=0)
        message = _truncate(message)
        body = k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
            involved_object=k8s.V1ObjectReference(
                api_version=involved.get("apiVersion") or "v1",
                kind=involved.get("kind"),
                name=involved.get("name"),
                namespace=involved.get("namespace") or None,
                uid=involved.get("uid") or None,
            ),
            reason=reason,
            message=message,
            type=event_type,
            count=1,
            first_timestamp=now,
            last_timestamp=now,
            source=k8s.V1EventSource(component=self.component),
            reporting_component=self.component,
            reporting_instance=self.controller_name,
        )

        def create() -> bool:
            """POST the Event; False when it already exists (AlreadyExists)."""
            self._guard(f"create event {namespace}/{name}")
            try:
                _call(
                    f"create event {namespace}/{name}",
                    lambda: _read_json(
                        self._core.create_namespaced_event(
                            namespace, body, _preload_content=False, _request_timeout=self.timeout
                        )
                    ),
                    passthrough=(409,),
                )
            except _Status:
                return False
            self.log.info("event %s %s on %s: %s", event_type, reason, target, message)
            return True

        def bump() -> bool:
            """Aggregate into the existing Event; False when it expired meanwhile."""
            existing = cast(
                JsonObj,
                _call(
                    f"get event {namespace}/{name}",
                    lambda: _read_json(
                        self._core.read_namespaced_event(
                            name, namespace, _preload_content=False, _request_timeout=self.timeout
                        )
                    ),
                    passthrough=(404,),
                ),
            )
            seen = existing.get("count")
            count = seen if isinstance(seen, int) else 1
            patch = {
                "metadata": {"resourceVersion": _meta(existing).get("resourceVersion")},
                "count": count + 1,
                "lastTimestamp": _rfc3339(now),
                "message": message,
            }
            self._guard(f"patch event {namespace}/{name}")
            _call(
                f"patch event {namespace}/{name}",
                lambda: _read_json(
                    self._core.patch_namespaced_event(
                        name,
                        namespace,
                        patch,
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=self.timeout,
                    )
                ),
                passthrough=(404, 409),
            )
            self.log.info(
                "event %s %s on %s repeated (count %d)", event_type, reason, target, count + 1
            )
            return True

        if create():
            return
        try:
            _mutate(f"patch event {namespace}/{name}", bump, logger=self.log)
        except _Status as st:
            if st.status != 404:
                raise DependencyError(f"event {namespace}/{name}: {st.message}") from st
            create()  # expired (event TTL) between our POST and GET: record it anew

    @staticmethod
    def _pod_ref(pod: Mapping[str, Any]) -> JsonObj:
        meta = _meta(pod)
        return {
            "kind": "Pod",
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        }

    # ---- pod actions

    def quarantine(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        reason: str = "ContentMismatch",
        message: str,
        files: Sequence[str] = (),
        verdict: str = "mismatch",
    ) -> bool:
        """Take a pod out of its Services' endpoints without killing it.

        Sets the readiness-gate condition to False (through ``pods/status``, merged by
        type so kubelet's conditions are kept), then marks the pod with
        ``artifactcheck.io/quarantined`` so a restarted controller knows it did this. A
        pod whose spec lacks the gate is refused (logged, False): the condition would
        not remove it from traffic, so only a flag can be applied.
        """
        what = f"quarantine pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        text = _with_files(message, files)

        def step(pod: JsonObj) -> bool:
            if not _has_gate(pod, self.policy.condition_type):
                self.log.warning(
                    "%s refused: the pod has no readiness gate %s; it can only be flagged",
                    what,
                    self.policy.condition_type,
                )
                return False
            after = self._set_condition(
                pod, pod_ns, pod_name, status="False", reason=reason, message=text
            )
            latest = after if after is not None else pod
            wanted: dict[str, str | None] = {
                ANN_QUARANTINED: "true",
                ANN_VERDICT: verdict,
                ANN_REASON: text,
            }
            current = _annotations(latest)
            if any(current.get(k) != v for k, v in wanted.items()):
                wanted[ANN_CHECKED_AT] = _rfc3339(self.clock())
                self._set_annotations(latest, pod_ns, pod_name, wanted)
                changed = True
            else:
                changed = after is not None
            if changed:
                self.log.warning("quarantined pod %s/%s: %s: %s", pod_ns, pod_name, reason, text)
            return changed

        return self._on_pod(what, pod_ns, pod_name, step)

    def release(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        reason: str = "ContentVerified",
        message: str = "content matches the expected release",
    ) -> bool:
        """Open the readiness gate (condition True) and drop the quarantine mark.

        Used to undo a quarantine, to let a newly verified pod become Ready in gate mode,
        and to fail open (``reason="VerificationUnavailable"``) when a dependency needed
        to verify is down.
        """
        what = f"release pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        text = _truncate(message)

        def step(pod: JsonObj) -> bool:
            after = None
            if _has_gate(pod, self.policy.condition_type) or _condition(
                pod, self.policy.condition_type
            ):
                after = self._set_condition(
                    pod, pod_ns, pod_name, status="True", reason=reason, message=text
                )
            latest = after if after is not None else pod
            marked = ANN_QUARANTINED in _annotations(latest)
            if marked:
                self._set_annotations(
                    latest,
                    pod_ns,
                    pod_name,
                    {ANN_QUARANTINED: None, ANN_CHECKED_AT: _rfc3339(self.clock())},
                )
            if after is not None or marked:
                self.log.info("released pod %s/%s: %s: %s", pod_ns, pod_name, reason, text)
                return True
            return False

        return self._on_pod(what, pod_ns, pod_name, step)

    def flag(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        verdict: str | None,
        message: str,
        reason: str | None = None,
        files: Sequence[str] = (),
        streak: int | None = None,
    ) -> bool:
        """Mark a pod with ``artifactcheck.io/*`` annotations and one Warning Event.

        The Event is emitted once per episode: a pod already flagged with this verdict
        gets its reason/streak annotations refreshed, if they changed, and no new Event.
        After :meth:`unflag`, a new episode aggregates into the same Event (count + 1).
        """
        what = f"flag pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        verdict_value = verdict or "inconsistent"
        event_reason = reason or event_reason_for(verdict)
        text = _with_files(message, files)
        evented = False

        def step(pod: JsonObj) -> bool:
            nonlocal evented
            current = _annotations(pod)
            same_episode = current.get(ANN_VERDICT) == verdict_value and ANN_FLAGGED_AT in current
            wanted: dict[str, str | None] = {ANN_VERDICT: verdict_value, ANN_REASON: text}
            if streak is not None:
                wanted[ANN_STREAK] = str(streak)
            if same_episode:
                return self._set_annotations(pod, pod_ns, pod_name, wanted) is not None
            if not evented:
                self._event(
                    involved=self._pod_ref(pod),
                    event_type="Warning",
                    reason=event_reason,
                    message=text,
                )
                evented = True
            wanted[ANN_FLAGGED_AT] = _rfc3339(self.clock())
            self._set_annotations(pod, pod_ns, pod_name, wanted)
            self.log.warning("flagged pod %s/%s: %s: %s", pod_ns, pod_name, event_reason, text)
            return True

        return self._on_pod(what, pod_ns, pod_name, step)

    def unflag(self, pod_ns: str, pod_name: str) -> bool:
        """Remove the flag annotations of a pod that is consistent again (no Event)."""
        what = f"unflag pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False

        def step(pod: JsonObj) -> bool:
            changed = self._set_annotations(pod, pod_ns, pod_name, dict.fromkeys(_FLAG_ANNOTATIONS))
            if changed is not None:
                self.log.info("unflagged pod %s/%s", pod_ns, pod_name)
            return changed is not None

        return self._on_pod(what, pod_ns, pod_name, step)

    def record_streak(self, instance: Instance, streak: int) -> bool:
        """Persist a pod's confirmation streak, so a restarted controller recovers it.

        Writes only when the value differs from the pod's annotations as last seen
        (``instance.annotations``, from discovery or a watch event): an unchanged
        streak costs no request at all. The value is capped at ``policy.confirmations``:
        a longer streak changes no decision, and writing it every cycle would patch a
        persistently bad pod forever. A streak of 0 removes the annotation.
        """
        kept = min(streak, self.policy.confirmations)
        wanted = str(kept) if kept > 0 else None
        if instance.annotations.get(ANN_STREAK) == wanted:
            return False
        ns, name = _pod_target(instance.name, instance)
        what = f"record streak {streak} on pod {ns}/{name}"
        if self._dry(what):
            return False
        return self._on_pod(
            what,
            ns,
            name,
            lambda pod: self._set_annotations(pod, ns, name, {ANN_STREAK: wanted}) is not None,
        )

    # ---- nodes

    def cordoned_by_us(self) -> set[str]:
        """Names of the nodes carrying artifactcheck's cordon annotation."""
        return cordoned_by_us(self.api_client, request_timeout=self.timeout)

    def _get_node(self, node: str) -> JsonObj:
        return cast(
            JsonObj,
            _call(
                f"get node {node}",
                lambda: _read_json(
                    self._core.read_node(
                        node, _preload_content=False, _request_timeout=self.timeout
                    )
                ),
                passthrough=(404,),
            ),
        )

    def _patch_node(self, node: str, body: JsonObj) -> JsonObj:
        self._guard(f"patch node {node}")
        return cast(
            JsonObj,
            _call(
                f"patch node {node}",
                lambda: _read_json(
                    self._core.patch_node(
                        node,
                        body,
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=self.timeout,
                    )
                ),
                passthrough=(404, 409),
            ),
        )

    def _on_node(self, what: str, node: str, step: Callable[[JsonObj], bool]) -> bool:
        try:
            return _mutate(what, lambda: step(self._get_node(node)), logger=self.log)
        except _Status as st:
            if st.status == 404:
                self.log.warning("%s: node %s is gone; nothing to do", what, node)
                return False
            raise DependencyError(f"{what}: unexpected status {st.status}: {st.message}") from st

    @staticmethod
    def _node_ref(obj: Mapping[str, Any]) -> JsonObj:
        meta = _meta(obj)
        return {"kind": "Node", "name": meta.get("name"), "namespace": None, "uid": meta.get("uid")}

    def cordon(self, node: str, *, reason: str) -> bool:
        """Mark a node unschedulable so no new pod lands on its stale image cache.

        Refused (logged, False) when node cordon is off in the policy, when the cap of
        nodes cordoned by artifactcheck is reached, or when someone else already
        cordoned the node: claiming a foreign cordon would let artifactcheck later
        uncordon what it did not cordon.
        """
        what = f"cordon node {node}"
        if self._dry(what):
            return False
        if not self.policy.cordon_nodes:
            self.log.warning("%s refused: node cordon is off (policy.cordon_nodes)", what)
            return False
        ours = self.cordoned_by_us()
        if node not in ours and len(ours) >= self.policy.max_cordoned_nodes:
            self.log.warning(
                "%s refused: %d node(s) already cordoned by artifactcheck (cap %d): %s",
                what,
                len(ours),
                self.policy.max_cordoned_nodes,
                ", ".join(sorted(ours)),
            )
            return False
        text = _truncate(reason)
        evented = False

        def step(obj: JsonObj) -> bool:
            nonlocal evented
            spec = _obj(obj.get("spec"))
            mine = _annotations(obj).get(ANN_CORDONED) == "true"
            if spec.get("unschedulable") and not mine:
                self.log.warning(
                    "%s refused: already cordoned, not by artifactcheck; leaving it alone", what
                )
                return False
            if spec.get("unschedulable") and mine:
                return False
            self._patch_node(
                node,
                {
                    "metadata": {
                        "resourceVersion": _meta(obj).get("resourceVersion"),
                        "annotations": {ANN_CORDONED: "true", ANN_CORDON_REASON: text},
                    },
                    "spec": {"unschedulable": True},
                },
            )
            if not evented:
                self._event(
                    involved=self._node_ref(obj),
                    event_type="Warning",
                    reason="NodeCordoned",
                    message=f"cordoned by {self.component}: {text}",
                )
                evented = True
            self.log.warning("cordoned node %s: %s", node, text)
            return True

        return self._on_node(what, node, step)

    def uncordon(self, node: str) -> bool:
        """Make a node schedulable again, only if artifactcheck cordoned it.

        A node without the ``artifactcheck.io/cordoned`` annotation is refused (logged,
        False): artifactcheck never uncordons what it did not cordon.
        """
        what = f"uncordon node {node}"
        if self._dry(what):
            return False

        def step(obj: JsonObj) -> bool:
            if _annotations(obj).get(ANN_CORDONED) != "true":
                self.log.warning(
                    "%s refused: artifactcheck did not cordon it (no %s annotation)",
                    what,
                    ANN_CORDONED,
                )
                return False
            self._patch_node(
                node,
                {
                    "metadata": {
                        "resourceVersion": _meta(obj).get("resourceVersion"),
                        "annotations": {ANN_CORDONED: None, ANN_CORDON_REASON: None},
                    },
                    "spec": {"unschedulable": False},
                },
            )
            self._event(
                involved=self._node_ref(obj),
                event_type="Normal",
                reason="NodeUncordoned",
                message=f"uncordoned by {self.component}: its pods are consistent again",
            )
            self.log.info("uncordoned node %s", node)
            return True

        return self._on_node(what, node, step)

    # ---- dispatch

    def apply(
        self,
        action: Action,
        instance: Instance | None = None,
        result: InstanceResult | None = None,
        *,
        verdict: str | None = None,
        streak: int | None = None,
    ) -> bool:
        """Perform one decided Action; dry-run actions are logged and never sent.

        ``Action`` carries no verdict: pass the ``result`` it was decided from (or
        ``verdict``) so the Event reason and the verdict annotation name it; without
        either, flags say ``inconsistent`` and quarantines ``mismatch`` (the only
        verdict policy quarantines). Returns True when the cluster was changed.
        """
        if verdict is None and result is not None:
            verdict = result.verdict.value
        if instance is None and result is not None:
            instance = result.instance
        if action.kind is ActionKind.NONE:
            return False
        if action.dry_run or self.policy.dry_run:
            self.log.info(
                "dry-run: would %s %s: %s", action.kind.value, action.target, action.reason
            )
            return False
        if action.kind is ActionKind.CORDON:
            return self.cordon(action.target, reason=action.reason)
        if action.kind is ActionKind.UNCORDON:
            return self.uncordon(action.target)
        ns, name = _pod_target(action.target, instance)
        if action.kind is ActionKind.QUARANTINE:
            v = verdict or "mismatch"
            return self.quarantine(
                ns,
                name,
                reason=event_reason_for(v),
                message=action.reason,
                files=action.files,
                verdict=v,
            )
        if action.kind is ActionKind.RELEASE:
            failing_open = verdict in _UNKNOWN_VERDICTS or "failing open" in action.reason
            return self.release(
                ns,
                name,
                reason="VerificationUnavailable" if failing_open else "ContentVerified",
                message=action.reason,
            )
        if action.kind is ActionKind.FLAG:
            return self.flag(
                ns,
                name,
                verdict=verdict,
                message=action.reason,
                files=action.files,
                streak=streak,
            )
        if action.kind is ActionKind.UNFLAG:
            return self.unflag(ns, name)
        raise ConfigError(f"unknown action kind {action.kind!r}")


def _pod_target(target: str, instance: Instance | None) -> tuple[str, str]:
    """(namespace, pod name) of a pod action, from the Instance or ``ns/name``."""
    if instance is not None and instance.namespace:
        name = instance.name.split("/", 1)[-1]
        return instance.namespace, name
    ns, slash, name = target.partition("/")
    if not slash or not ns or not name:
        raise ConfigError(f"pod action target must be 'namespace/name', got {target!r}")
    return ns, name


def cordoned_by_us(
    api_client: k8s.ApiClient, *, request_timeout: Timeout = DEFAULT_TIMEOUT
) -> set[str]:
    """Nodes carrying ``artifactcheck.io/cordoned: "true"``, to recover after a restart."""
    core = k8s.CoreV1Api(api_client)
    doc = _call(
        "list nodes",
        lambda: _read_json(
            core.list_node(_preload_content=False, _request_timeout=request_timeout)
        ),
    )
    items = doc.get("items") if isinstance(doc, Mapping) else None
    return {
        str(_meta(n).get("name"))
        for n in (items if isinstance(items, list) else [])
        if isinstance(n, Mapping) and _annotations(n).get(ANN_CORDONED) == "true"
    }


# --------------------------------------------------------------------------- leader election


class LeaseLock:
    """Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

    :meth:`try_acquire_or_renew` is client-go's ``tryAcquireOrRenew``: read the Lease;
    if another identity holds it and ``renewTime + leaseDurationSeconds`` is still in
    the future, fail; otherwise write ourselves as holder with the ``resourceVersion``
    we read as a precondition, so of two replicas racing, the API server lets exactly
    one win (the other gets 409 and returns False). Time is passed in (``now``) so the
    expiry rule can be tested without sleeping; unlike client-go, expiry is judged from
    ``renewTime`` rather than from the local time the record was last observed, so
    replicas need roughly synchronised clocks (within the lease duration).

    Two deliberate differences in the wire format, both because of how the Python
    client serialises ``datetime`` (``isoformat()`` drops the fraction when the
    microseconds are 0, and a real API server then rejects the ``MicroTime`` with 400):
    the record is written with a JSON merge patch carrying ``metadata.resourceVersion``
    (the same optimistic concurrency as client-go's PUT) whose times are formatted here
    with exactly six fractional digits, and an absent Lease is first created empty.
    """

    def __init__(
        self,
        *,
        api_client: k8s.ApiClient,
        namespace: str,
        name: str = LEASE_NAME,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        logger: Logger | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.timeout = request_timeout
        self.log: Logger = logger or _LOG
        # Its own connection pool without urllib3's retries: a retried read timeout
        # would spend the renew deadline several times over. Closed with the lock.
        config = copy.copy(api_client.configuration)
        config.retries = 0
        client = k8s.ApiClient(config)
        self._closer = weakref.finalize(self, client.close)
        self._api = k8s.CoordinationV1Api(client)
        self._deadline: float | None = None

    def close(self) -> None:
        """Close the lock's own connections (also done when it is collected)."""
        self._closer()

    def _timeout(self) -> Timeout:
        """The request timeout, cut to what is left before the current deadline (a
        renewal that cannot finish before the renew deadline is worthless)."""
        if self._deadline is None:
            return self.timeout
        left = self._deadline - time.monotonic()
        if left <= 0.01:
            raise DependencyError(f"lease {self.namespace}/{self.name}: the renew deadline passed")
        connect, read = self.timeout if isinstance(self.timeout, tuple) else (self.timeout,) * 2
        return (min(connect, left), min(read, left))

    def get(self) -> JsonObj | None:
        """The Lease as JSON, or None when it does not exist yet."""
        try:
            return cast(
                JsonObj,
                _call(
                    f"get lease {self.namespace}/{self.name}",
                    lambda: _read_json(
                        self._api.read_namespaced_lease(
                            self.name,
                            self.namespace,
                            _preload_content=False,
                            _request_timeout=self._timeout(),
                        )
                    ),
                    passthrough=(404,),
                ),
            )
        except _Status:
            return None

    def holder(self) -> str | None:
        """The identity currently written in the Lease, if any (expired or not)."""
        lease = self.get()
        spec = lease.get("spec") if lease else None
        return (spec.get("holderIdentity") or None) if isinstance(spec, Mapping) else None

    def _create_empty(self) -> JsonObj | None:
        """Create the Lease with no holder; None when another candidate created it first."""
        body = k8s.V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=k8s.V1LeaseSpec(lease_transitions=0),
        )
        try:
            return cast(
                JsonObj,
                _call(
                    f"create lease {self.namespace}/{self.name}",
                    lambda: _read_json(
                        self._api.create_namespaced_lease(
                            self.namespace,
                            body,
                            _preload_content=False,
                            _request_timeout=self._timeout(),
                        )
                    ),
                    passthrough=(404, 409),
                ),
            )
        except _Status as st:
            if st.status == 404:
                raise LeaseNamespaceMissing(
                    f"cannot create the leader Lease {self.namespace}/{self.name}: "
                    f"namespace {self.namespace!r} does not exist (give --lease-namespace "
                    f"the namespace the controller runs in): {st.message}"
                ) from st
            return None

    def _write(self, lease: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
        """Merge-patch the record, conditional on the resourceVersion read; False on 409."""
        body = {"metadata": {"resourceVersion": _meta(lease).get("resourceVersion")}, "spec": spec}
        try:
            _call(
                f"patch lease {self.namespace}/{self.name}",
                lambda: _read_json(
                    self._api.patch_namespaced_lease(
                        self.name,
                        self.namespace,
                        body,
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=self._timeout(),
                    )
                ),
                passthrough=(404, 409),
            )
        except _Status as st:
            self.log.debug("lease %s: lost the race (%d %s)", self.name, st.status, st.message)
            return False
        return True

    def try_acquire_or_renew(
        self,
        identity: str,
        lease_duration: float,
        now: datetime,
        *,
        deadline: float | None = None,
    ) -> bool:
        """Become or stay the leader; False when another identity holds a valid lease.

        ``deadline`` (``time.monotonic()``) bounds every request's timeouts: client-go's
        renew deadline. Raises DependencyError when the API server cannot be reached in
        time: the caller must then stop acting by its deadline.
        """
        self._deadline = deadline
        try:
            return self._try_acquire_or_renew(identity, lease_duration, now)
        finally:
            self._deadline = None

    def _try_acquire_or_renew(self, identity: str, lease_duration: float, now: datetime) -> bool:
        now = _aware(now)
        duration = max(1, math.ceil(lease_duration))
        lease = self.get()
        created = lease is None
        if lease is None:
            lease = self._create_empty()
            if lease is None:
                self.log.debug("lease %s: created by another candidate first", self.name)
                return False
        spec = _obj(lease.get("spec"))
        holder = str(spec.get("holderIdentity") or "")
        renewed = _parse_time(spec.get("renewTime"))
        held_for = spec.get("leaseDurationSeconds")
        held_for = held_for if isinstance(held_for, int) else 0
        if holder and holder != identity and renewed is not None:
            if renewed.timestamp() + held_for > now.timestamp():
                return False
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        record: JsonObj = {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration,
            "renewTime": _micro_time(now),
        }
        if holder == identity and spec.get("acquireTime"):
            record["acquireTime"] = spec["acquireTime"]
        else:
            record["acquireTime"] = _micro_time(now)
        if holder != identity:
            # client-go: a new Lease starts at 0, every change of holder counts one.
            record["leaseTransitions"] = 0 if created else transitions + 1
        if not self._write(lease, record):
            return False
        if holder != identity:
            self.log.info(
                "lease %s/%s acquired by %s (was %s)",
                self.namespace,
                self.name,
                identity,
                holder or "free",
            )
        return True

    def release(
        self, identity: str, now: datetime | None = None, *, deadline: float | None = None
    ) -> bool:
        """Give the lease up at shutdown, so a standby takes over at once (client-go's
        ``ReleaseOnCancel``); does nothing unless ``identity`` holds it."""
        self._deadline = deadline
        try:
            return self._release(identity, now)
        finally:
            self._deadline = None

    def _release(self, identity: str, now: datetime | None) -> bool:
        moment = _micro_time(_aware(now) if now is not None else _utcnow())
        lease = self.get()
        if lease is None:
            return False
        spec = _obj(lease.get("spec"))
        if spec.get("holderIdentity") != identity:
            return False
        released = self._write(
            lease,
            {
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "acquireTime": moment,
                "renewTime": moment,
            },
        )
        if released:
            self.log.info("lease %s/%s released by %s", self.namespace, self.name, identity)
        return released


# --------------------------------------------------------------------------- ArtifactCheck


def list_checks_raw(
    api_client: k8s.ApiClient,
    namespace: str | None = None,
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> tuple[list[JsonObj], str]:
    """ArtifactCheck resources as JSON, in one namespace or cluster-wide (None), with
    the list's resourceVersion for :func:`watch_checks`.

    A 404 means the CRD is not installed: a ConfigError saying so.
    """
    api = k8s.CustomObjectsApi(api_client)
    where = f"in {namespace}" if namespace else "in all namespaces"
    what = f"list {CRD_PLURAL}.{CRD_GROUP}/{CRD_VERSION} {where}"

    def send() -> Any:
        if namespace:
            return api.list_namespaced_custom_object(
                CRD_GROUP,
                CRD_VERSION,
                namespace,
                CRD_PLURAL,
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        return api.list_cluster_custom_object(
            CRD_GROUP,
            CRD_VERSION,
            CRD_PLURAL,
            _preload_content=False,
            _request_timeout=request_timeout,
        )

    try:
        doc = _call(what, lambda: _read_json(send()), passthrough=(404,))
    except _Status as st:
        raise ConfigError(
            f"{what}: the ArtifactCheck CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return _items(doc)


def list_checks(
    api_client: k8s.ApiClient,
    namespace: str | None = None,
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> list[JsonObj]:
    """ArtifactCheck resources as JSON, in one namespace or cluster-wide (None)."""
    return list_checks_raw(api_client, namespace, request_timeout=request_timeout)[0]


def watch_checks(
    api_client: k8s.ApiClient,
    *,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout: int = 30,
    stop: threading.Event | None = None,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
    opened: Callable[[Any, bool], None] | None = None,
) -> Iterator[tuple[str, JsonObj]]:
    """Watch ArtifactChecks from ``resource_version``, like :func:`watch_pods`."""
    api = k8s.CustomObjectsApi(api_client)
    seconds = max(1, math.ceil(timeout))
    where = f"in {namespace}" if namespace else "in all namespaces"

    def send() -> Any:
        options: dict[str, Any] = {
            "watch": True,
            "allow_watch_bookmarks": True,
            "resource_version": resource_version or None,
            "timeout_seconds": seconds,
            "_preload_content": False,
            "_request_timeout": _watch_timeout(request_timeout, seconds),
        }
        if namespace:
            return api.list_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, **options
            )
        return api.list_cluster_custom_object(CRD_GROUP, CRD_VERSION, CRD_PLURAL, **options)

    return _watch(f"watch {CRD_PLURAL}.{CRD_GROUP} {where}", send, stop, opened)


def patch_check_status(
    api_client: k8s.ApiClient,
    namespace: str,
    name: str,
    status: Mapping[str, Any],
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> JsonObj | None:
    """Merge-patch an ArtifactCheck's status subresource; None when it was deleted.

    A merge patch (not the client's default strategic merge, which custom resources do
    not support): keys set to None are removed, lists are replaced whole.
    """
    api = k8s.CustomObjectsApi(api_client)
    what = f"patch {CRD_PLURAL}/status {namespace}/{name}"
    try:
        return cast(
            JsonObj,
            _call(
                what,
                lambda: _read_json(
                    api.patch_namespaced_custom_object_status(
                        CRD_GROUP,
                        CRD_VERSION,
                        namespace,
                        CRD_PLURAL,
                        name,
                        {"status": dict(status)},
                        _content_type=_MERGE_PATCH,
                        _preload_content=False,
                        _request_timeout=request_timeout,
                    )
                ),
                passthrough=(404,),
            ),
        )
    except _Status:
        _LOG.info("%s: the ArtifactCheck is gone; status not written", what)
        return None


def record_check_event(
    api_client: k8s.ApiClient,
    check: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    event_type: str = "Warning",
    logger: Logger | None = None,
) -> None:
    """One Event about an ArtifactCheck (e.g. why it was refused), aggregated per reason
    like the Events about pods, so a refusal seen again bumps a count."""
    meta = _meta(check)
    actor = KubeActor(api_client=api_client, policy=PolicySettings(), logger=logger)
    actor._event(
        involved={
            "apiVersion": f"{CRD_GROUP}/{CRD_VERSION}",
            "kind": "ArtifactCheck",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        },
        event_type=event_type,
        reason=reason,
        message=message,
    )


def list_pod_events(
    api_client: k8s.ApiClient,
    *,
    namespace: str,
    name: str,
    limit: int = 20,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> list[JsonObj]:
    """The core/v1 Events about one pod, newest first (one list call with a field
    selector), for ``investigate``: what ``kubectl describe pod`` shows at the end."""
    core = k8s.CoreV1Api(api_client)
    what = f"list events of pod {namespace}/{name}"
    doc = _call(
        what,
        lambda: _read_json(
            core.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}",
                _preload_content=False,
                _request_timeout=request_timeout,
            )
        ),
    )
    items, _ = _items(doc)

    def stamp(event: Mapping[str, Any]) -> str:
        return str(
            event.get("lastTimestamp")
            or event.get("eventTime")
            or _meta(event).get("creationTimestamp")
            or ""
        )

    return sorted(items, key=stamp, reverse=True)[:limit]
