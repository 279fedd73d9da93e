"""The adapter to the official ``kubernetes`` client: the only module that imports it.

The rest of artifactcheck never sees a library type or a library error. What is here
is plumbing, shared by discovery (:mod:`artifactcheck.discover.kube_pods`), the actions
(:mod:`artifactcheck.act.kube_actor`), the leader Lease (:mod:`artifactcheck.control.lease`),
the CRD status (:mod:`artifactcheck.control.status`) and the ConfigMap release source
(:mod:`artifactcheck.release.configmaps`):

* :func:`load_api_client` builds an ``ApiClient`` from the in-cluster service account
  or a kubeconfig; the API classes (:data:`CoreV1Api` ...) are re-exported so callers
  bind their receivers to one API group, which is what the RBAC scanner
  (tests/tools/rbac_scan.py) reads;
* :func:`call` runs one request and translates every library error, always
  ``raise ... from exc``: an unreachable, slow or failing API server (connection
  errors, timeouts, 429, 5xx) is a :class:`~artifactcheck.model.errors.DependencyError`,
  which the caller turns into ``inconclusive``; a request the server rejects because of
  how artifactcheck was configured (400/422 invalid selector or condition type, 401
  credentials, 403 RBAC, 404 API or CRD not installed) is a
  :class:`~artifactcheck.model.errors.ConfigError`; statuses a caller handles itself
  (404 gone, 409 conflict) are raised as :class:`ApiStatus`;
* :func:`raw` and :func:`call_json`: every request keeps the API's raw JSON;
* :func:`watch` streams watch events (410 Gone is :class:`WatchExpired`: relist) and
  :func:`abort_stream` ends one from another thread;
* :func:`mutate` is the read-modify-write with one retry on 409;
* time helpers in the formats the API server wants.

The client is synchronous; callers run these functions in threads
(``asyncio.to_thread``). Nothing here holds configuration in module globals: each call
takes its ``api_client`` explicitly.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict, TypeVar, cast

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from artifactcheck.clients.kube_bodies import (
    JsonObj,
    ObjectReference,
    StatusBody,
    WatchEvent,
    obj,
    typed,
)
from artifactcheck.model.errors import ArtifactCheckError, ConfigError, DependencyError

__all__ = [
    "Configuration",
    "configuration_for",
    "DEFAULT_TIMEOUT",
    "MERGE_PATCH",
    "NewEvent",
    "NewConfigMap",
    "NewLease",
    "STRATEGIC_MERGE_PATCH",
    "Send",
    "ApiClient",
    "ApiStatus",
    "CoordinationV1Api",
    "CoreV1Api",
    "CustomObjectsApi",
    "Logger",
    "Timeout",
    "WatchExpired",
    "abort_stream",
    "aware",
    "call",
    "call_json",
    "client_without_retries",
    "Throttled",
    "close_client",
    "event_model",
    "lease_model",
    "load_api_client",
    "micro_time",
    "mutate",
    "parse_time",
    "raw",
    "retry_after_seconds",
    "rfc3339",
    "to_json",
    "translate_status",
    "utcnow",
    "watch",
    "watch_timeout",
]

#: The library's classes, re-exported: the only names of it other modules use.
ApiClient = k8s.ApiClient
Configuration = k8s.Configuration
CoreV1Api = k8s.CoreV1Api
CoordinationV1Api = k8s.CoordinationV1Api
CustomObjectsApi = k8s.CustomObjectsApi
#: Bodies of the two creates, built by :func:`event_model` and :func:`lease_model`.
NewEvent = k8s.CoreV1Event
NewLease = k8s.V1Lease
NewConfigMap = k8s.V1ConfigMap

#: (connect, read) seconds for every API request: a hung API server must turn into a
#: DependencyError within a bounded time, never a controller thread stuck forever.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
Timeout = float | tuple[float, float]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]
T = TypeVar("T")


#: A request made with ``**raw(timeout)``: returns urllib3's response, typed by the
#: client as the model it would otherwise have built.
Send = Callable[[], object]


# --------------------------------------------------------------------------- errors


class ApiStatus(Exception):
    """An API status the caller handles itself (404 gone, 409 conflict); never escapes
    the module that asked for it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class WatchExpired(DependencyError):
    """The watch's resourceVersion is older than the server keeps (410 Gone): relist."""


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
        message = doc.get("message") if isinstance(doc, dict) else None
        if isinstance(message, str):
            return message
    return str(exc.reason or "no reason given")


class Throttled(DependencyError):
    """429 Too Many Requests (API Priority and Fairness): retry after ``retry_after``
    seconds (its ``Retry-After``, 1 when absent or unreadable, at most 60), not sooner."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(value: object) -> float:
    """A 429's ``Retry-After`` header in seconds: at most 60, 1 when absent or unreadable."""
    try:
        return min(60.0, max(0.0, float(str(value).strip())))
    except (TypeError, ValueError):
        return 1.0


def _retry_after(exc: ApiException) -> float:
    return retry_after_seconds((getattr(exc, "headers", None) or {}).get("Retry-After", ""))


def _translate(what: str, exc: ApiException) -> ArtifactCheckError:
    """Map the library's API error to the artifactcheck error a caller can act on."""
    return translate_status(what, int(exc.status or 0), _status_message(exc), _retry_after(exc))


def translate_status(
    what: str, status: int, message: str, retry_after: float
) -> ArtifactCheckError:
    """Map an API status to the artifactcheck error a caller can act on; shared by both
    clients (this one and :mod:`artifactcheck.clients.kube_http`), so they agree."""
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
    if status == 429:
        wait = retry_after
        return Throttled(
            f"{what}: the API server answered 429 (retry after {wait:g}s): {message}",
            retry_after=wait,
        )
    if status == 0:
        return DependencyError(f"{what}: the request could not be made: {message}")
    return DependencyError(f"{what}: the API server answered {status}: {message}")


def call(what: str, fn: Callable[[], T], *, passthrough: Collection[int] = ()) -> T:
    """Run one API request, translating every library error; ``passthrough`` statuses
    are raised as :class:`ApiStatus` for the caller to handle (404, 409)."""
    try:
        return fn()
    except ApiException as exc:
        status = int(exc.status or 0)
        if status in passthrough:
            raise ApiStatus(status, _status_message(exc)) from exc
        raise _translate(what, exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise DependencyError(
            f"{what}: API server unreachable, too slow or overloaded: {exc}"
        ) from exc
    except OSError as exc:
        raise DependencyError(f"{what}: API server unreachable: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DependencyError(f"{what}: the API server answered invalid JSON: {exc}") from exc


def mutate(what: str, attempt: Callable[[], T], *, logger: Logger) -> T:
    """Run a read-modify-write; on 409 Conflict re-read and retry once, then give up.

    ``attempt`` must re-read the object itself, so the retry computes its patch from
    the state that won the race rather than from the stale one.
    """
    try:
        return attempt()
    except ApiStatus as first:
        if first.status != 409:
            raise
        logger.info("%s: conflict (%s); re-reading and retrying once", what, first.message)
    try:
        return attempt()
    except ApiStatus as second:
        if second.status != 409:
            raise
        raise DependencyError(
            f"{what}: still conflicting after re-reading: {second.message}"
        ) from second


# --------------------------------------------------------------------------- raw JSON


class RawOptions(TypedDict):
    _preload_content: Literal[False]
    _request_timeout: Timeout


def raw(timeout: Timeout) -> RawOptions:
    """The options every request of artifactcheck passes (``**raw(timeout)``).

    ``_preload_content=False``: the client then returns urllib3's response instead of
    deserialising it into its models. The JSON is read as the API sent it (a model
    round trip drops fields the model does not know, such as a custom resource's, and
    re-formats times), it costs no model construction per pod, and a watch can be read
    as a stream. ``_request_timeout``: no request without a bound. Never ``watch``:
    whether a list call watches is spelt out at the call, where RBAC is read from.
    """
    return {"_preload_content": False, "_request_timeout": timeout}


def _response(value: object) -> urllib3.BaseHTTPResponse:
    """The urllib3 response a :func:`raw` request returns."""
    if isinstance(value, urllib3.BaseHTTPResponse):
        return value
    raise TypeError(f"not a raw response (request made without **raw()?): {type(value)}")


def read_json(response: object) -> object:
    """Decode the response of a :func:`raw` request, releasing its connection."""
    resp = _response(response)
    try:
        data = resp.data
    finally:
        resp.release_conn()
    parsed: object = json.loads(data)
    return parsed


def call_json(what: str, send: Send, *, passthrough: Collection[int] = ()) -> object:
    """:func:`call` a :func:`raw` request and return its decoded JSON body."""
    return call(what, lambda: read_json(send()), passthrough=passthrough)


def to_json(model: object, api_client: ApiClient | None) -> object:
    """A client model (e.g. a ``V1Pod``) as the API's JSON."""
    serializer = api_client if api_client is not None else k8s.ApiClient(k8s.Configuration())
    try:
        data: object = serializer.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    finally:
        if api_client is None:
            close_client(serializer)
    return data


# --------------------------------------------------------------------------- watch


def abort_stream(response: object) -> None:
    """Make a watch blocked in a read on another thread return now: shut its socket
    down (urllib3's ``HTTPResponse.shutdown``), which a read in progress notices at
    once, unlike ``close()``, which waits for the reader."""
    shutdown = getattr(response, "shutdown", None)
    if callable(shutdown):
        try:
            shutdown()
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


def watch_timeout(request_timeout: Timeout, seconds: int) -> tuple[float, float]:
    """Connect as usual; wait for data a little longer than the server keeps the watch
    open, so an idle watch ends by the server's timeout, not by a read timeout."""
    connect = request_timeout[0] if isinstance(request_timeout, tuple) else request_timeout
    return (connect, seconds + 10.0)


def _event_of(what: str, line: bytes) -> tuple[str, JsonObj]:
    """One watch line as ``(type, object)``; an ``ERROR`` event raises."""
    event = typed(json.loads(line), WatchEvent[object])
    kind, body = str(event.get("type")), obj(event.get("object"))
    if kind == "ERROR":
        status = typed(body, StatusBody)
        message = status.get("message") or status.get("reason") or "watch error"
        if status.get("code") == 410:
            raise WatchExpired(f"{what}: {message}")
        raise DependencyError(f"{what}: the watch failed ({status.get('code')}): {message}")
    return kind, body


def watch(
    what: str,
    send: Send,
    stop: threading.Event | None,
    opened: Callable[[object, bool], None] | None = None,
) -> Iterator[tuple[str, JsonObj]]:
    """Stream ``(type, object)`` watch events as JSON until the server ends the watch
    (its ``timeoutSeconds``) or ``stop`` is set; 410 Gone raises WatchExpired.

    ``opened(response, True)`` is called once the stream is open and
    ``opened(response, False)`` when it ends, so that a shutting-down caller can
    :func:`abort_stream` it from another thread; a stream aborted while ``stop`` is
    set ends quietly instead of as a broken connection.
    """
    try:
        response = _response(call(what, send, passthrough=(410,)))
    except ApiStatus as st:
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
                yield _event_of(what, line)
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


# --------------------------------------------------------------------------- time


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def rfc3339(moment: datetime) -> str:
    """``metav1.Time``: seconds precision, UTC, ``Z``."""
    return aware(moment).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: exactly six fractional digits, as the API server requires."""
    return aware(moment).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return aware(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return aware(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


# --------------------------------------------------------------------------- clients


def configuration_for(host: str) -> Configuration:
    """A client configuration for an API server at ``host``, without credentials: the
    simulated cluster's (the caller sets ``ssl_ca_cert`` when it serves TLS)."""
    return k8s.Configuration(host=host)


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """An ApiClient from the in-cluster service account, else from a kubeconfig.

    An explicit ``kubeconfig`` or ``context`` means the user chose a cluster, so the
    in-cluster configuration is then not tried. Failures are a ConfigError naming both
    attempts, because "no cluster configured" is a usage error, not an outage.
    """
    configuration = k8s.Configuration()
    tried: list[str] = []
    # The loaders are untyped in the client library.
    loaders = cast(Any, k8s_config)
    if kubeconfig is None and context is None:
        try:
            loaders.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            tried.append(f"in-cluster: {exc}")
        else:
            return k8s.ApiClient(configuration)
    path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        loaders.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        tried.append(f"kubeconfig {path}: {exc}")
        raise ConfigError("no usable Kubernetes configuration: " + "; ".join(tried)) from exc
    return k8s.ApiClient(configuration)


def close_client(api_client: ApiClient) -> None:
    """Close an ApiClient's connection pool."""
    api_client.close()  # type: ignore[no-untyped-call]


def client_without_retries(api_client: ApiClient) -> ApiClient:
    """A new ApiClient with ``api_client``'s configuration, its own connection pool,
    and no urllib3 retries (the caller closes it)."""
    config = copy.copy(api_client.configuration)
    config.retries = 0
    return k8s.ApiClient(config)


# --------------------------------------------------------------------------- bodies


def event_model(
    *,
    name: str,
    namespace: str,
    involved: ObjectReference,
    event_type: str,
    reason: str,
    message: str,
    now: datetime,
    component: str,
    instance: str,
) -> NewEvent:
    """A new core/v1 Event (``count`` 1) as the client's model, for ``create``."""
    return k8s.CoreV1Event(
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
        source=k8s.V1EventSource(component=component),
        reporting_component=component,
        reporting_instance=instance,
    )


def lease_model(name: str, namespace: str) -> NewLease:
    """A new Lease with no holder, as the client's model, for ``create``."""
    return k8s.V1Lease(
        api_version="coordination.k8s.io/v1",
        kind="Lease",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        spec=k8s.V1LeaseSpec(lease_transitions=0),
    )


def configmap_model(
    name: str,
    namespace: str,
    *,
    data: Mapping[str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    resource_version: str | None = None,
) -> NewConfigMap:
    """A ConfigMap as the client's model, for ``create`` (no resourceVersion) or
    ``replace`` (at the resourceVersion read)."""
    return k8s.V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=k8s.V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels=dict(labels),
            annotations=dict(annotations),
            resource_version=resource_version or None,
        ),
        data=dict(data),
    )
