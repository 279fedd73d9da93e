"""The adapter to the official ``kubernetes`` client: the only module that imports it.

The rest of artifactcheck never sees a library type or a library error. What is here
is plumbing, shared by the command line's discovery
(:mod:`artifactcheck.discover.kube_pods`) and :mod:`artifactcheck.clients.kube_http`:

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
* :func:`translate_status`, the errors both clients raise (:class:`WatchExpired` for
  410 Gone: relist; :class:`Throttled` for 429);
* time helpers in the formats the API server wants.

The client is synchronous: it serves the command line's one-shot requests (pod
discovery, ``investigate``'s Events) and gives its configuration to the asynchronous
client (:mod:`artifactcheck.clients.kube_http`), on which the controller makes every
request. Nothing here holds configuration in module globals: each call takes its
``api_client`` explicitly.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from artifactcheck.model.errors import ArtifactCheckError, ConfigError, DependencyError

if TYPE_CHECKING:  # at run time by __getattr__ below, on first use
    from kubernetes.client import CoordinationV1Api, CoreV1Api, CustomObjectsApi

__all__ = [
    "Configuration",
    "configuration_for",
    "refresh_may_block",
    "status_message",
    "DEFAULT_TIMEOUT",
    "MERGE_PATCH",
    "NewConfigMap",
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
    "aware",
    "call",
    "call_json",
    "Throttled",
    "close_client",
    "load_api_client",
    "micro_time",
    "parse_time",
    "raw",
    "retry_after_seconds",
    "rfc3339",
    "model_as_json",
    "translate_status",
    "utcnow",
]

#: The library's classes, re-exported: the only names of it other modules use.
ApiClient = k8s.ApiClient
Configuration = k8s.Configuration
#: The body of the pins ConfigMap's writes, built by :func:`configmap_model`.
NewConfigMap = k8s.V1ConfigMap

#: The API classes, re-exported too, but each imported when a caller first asks for it
#: (``clients.kube.CoreV1Api``, module ``__getattr__``): the module of the core API
#: alone, with the models it names, is most of the client's import, and the controller,
#: which makes every request on :mod:`artifactcheck.clients.kube_http`, never uses it.
_API_CLASSES = frozenset({"CoreV1Api", "CoordinationV1Api", "CustomObjectsApi"})


def __getattr__(name: str) -> Any:
    if name in _API_CLASSES:
        return getattr(k8s, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def status_message(text: str, reason: str | None) -> str:
    """The ``message`` of the Status body a Kubernetes API server sends with an error,
    else the body's start, else the reason phrase: one reading for both clients."""
    if text:
        try:
            doc = json.loads(text)
        except ValueError:
            return text[:300]
        message = doc.get("message") if isinstance(doc, dict) else None
        if isinstance(message, str):
            return message
    return reason or "no reason given"


def _status_message(exc: ApiException) -> str:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    return status_message(body if isinstance(body, str) else "", str(exc.reason or "") or None)


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


def model_as_json(model: object, api_client: ApiClient | None) -> object:
    """A client model (e.g. a ``V1Pod``) as the API's JSON."""
    serializer = api_client if api_client is not None else k8s.ApiClient(k8s.Configuration())
    try:
        data: object = serializer.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    finally:
        if api_client is None:
            close_client(serializer)
    return data


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


def refresh_may_block(configuration: Configuration) -> bool:
    """Whether the token refresh hook of ``configuration`` may block its caller, so that
    an asynchronous client runs it on a thread: an exec credential plugin's runs a
    command. The in-cluster loader's hook re-reads the service-account token file at
    most once a minute and otherwise only copies the token it holds, so it runs where
    the request is made: a thread for each request would cost more than the hook."""
    hook = configuration.refresh_api_key_hook
    if hook is None:
        return False
    return getattr(hook, "__module__", None) != k8s_config.incluster_config.__name__


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


# --------------------------------------------------------------------------- bodies


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
