"""What the controller reads and reports through the API: ArtifactChecks and Events.

:func:`list_checks_raw` and :func:`watch_checks` are the list-then-watch of
``ArtifactCheck`` resources (a 404 means the CRD is not installed),
:func:`patch_check_status` writes their status subresource, :func:`record_check_event`
records an aggregated Event about one (e.g. why it was refused), and
:func:`list_pod_events` reads the Events about a pod for ``investigate``. Requests and
error translation are :mod:`artifactcheck.clients.kube`'s.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping

from artifactcheck.act.kube_events import EventRecorder
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    MERGE_PATCH,
    ApiClient,
    ApiStatus,
    CoreV1Api,
    CustomObjectsApi,
    Logger,
    Timeout,
    call_json,
    raw,
    utcnow,
    watch,
    watch_timeout,
)
from artifactcheck.clients.kube_bodies import Event, JsonObj
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import (
    ACCEPTANCE_PLURAL,
    COMPONENT,
    CRD_API_VERSION,
    CRD_GROUP,
    CRD_KIND,
    CRD_PLURAL,
    CRD_VERSION,
)

__all__ = [
    "list_acceptances",
    "list_acceptances_async",
    "list_checks",
    "list_checks_raw",
    "list_pod_events",
    "patch_check_annotations",
    "patch_acceptance_status",
    "patch_check_status",
    "record_check_event",
    "watch_acceptances",
    "watch_acceptances_async",
    "watch_checks",
]

_LOG = logging.getLogger(__name__)


def _where(namespace: str | None) -> str:
    return f"in {namespace}" if namespace else "in all namespaces"


def list_checks_raw(
    api_client: ApiClient,
    namespace: str | None = None,
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> tuple[list[JsonObj], str]:
    """ArtifactCheck resources as JSON, in one namespace or cluster-wide (None), with
    the list's resourceVersion for :func:`watch_checks`.

    A 404 means the CRD is not installed: a ConfigError saying so.
    """
    api = CustomObjectsApi(api_client)
    what = f"list {CRD_PLURAL}.{CRD_GROUP}/{CRD_VERSION} {_where(namespace)}"

    def send() -> object:
        if namespace:
            return api.list_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, namespace, CRD_PLURAL, **raw(request_timeout)
            )
        return api.list_cluster_custom_object(
            CRD_GROUP, CRD_VERSION, CRD_PLURAL, **raw(request_timeout)
        )

    try:
        doc = call_json(what, send, passthrough=(404,))
    except ApiStatus as st:
        raise ConfigError(
            f"{what}: the ArtifactCheck CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return body.items(doc, JsonObj)


def list_checks(
    api_client: ApiClient,
    namespace: str | None = None,
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> list[JsonObj]:
    """ArtifactCheck resources as JSON, in one namespace or cluster-wide (None)."""
    return list_checks_raw(api_client, namespace, request_timeout=request_timeout)[0]


def watch_checks(
    api_client: ApiClient,
    *,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout: int = 30,
    stop: threading.Event | None = None,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
    opened: Callable[[object, bool], None] | None = None,
) -> Iterator[tuple[str, JsonObj]]:
    """Watch ArtifactChecks from ``resource_version``, like
    :func:`artifactcheck.discover.kube_pods.watch_pods`."""
    api = CustomObjectsApi(api_client)
    seconds = max(1, math.ceil(timeout))
    since = resource_version or None
    read_timeout = watch_timeout(request_timeout, seconds)

    def send() -> object:
        if namespace:
            return api.list_namespaced_custom_object(
                CRD_GROUP,
                CRD_VERSION,
                namespace,
                CRD_PLURAL,
                watch=True,
                allow_watch_bookmarks=True,
                resource_version=since,
                timeout_seconds=seconds,
                **raw(read_timeout),
            )
        return api.list_cluster_custom_object(
            CRD_GROUP,
            CRD_VERSION,
            CRD_PLURAL,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=since,
            timeout_seconds=seconds,
            **raw(read_timeout),
        )

    return watch(f"watch {CRD_PLURAL}.{CRD_GROUP} {_where(namespace)}", send, stop, opened)


def _checks_path(namespace: str | None) -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{CRD_GROUP}/{CRD_VERSION}{scope}/{CRD_PLURAL}"


async def list_checks_async(
    kube: KubeHttp, namespace: str | None = None
) -> tuple[list[JsonObj], str]:
    """:func:`list_checks_raw` on the asynchronous client (404: the CRD is missing)."""
    what = f"list {CRD_PLURAL}.{CRD_GROUP}/{CRD_VERSION} {_where(namespace)}"
    try:
        doc = await kube.request(what, "GET", _checks_path(namespace), passthrough=(404,))
    except ApiStatus as st:
        raise ConfigError(
            f"{what}: the ArtifactCheck CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return body.items(doc, JsonObj)


def watch_checks_async(
    kube: KubeHttp,
    *,
    namespace: str | None = None,
    resource_version: str | None = None,
    timeout: int = 30,
) -> AsyncIterator[tuple[str, JsonObj]]:
    """:func:`watch_checks` on the asynchronous client (with bookmarks)."""
    return kube.watch(
        f"watch {CRD_PLURAL}.{CRD_GROUP} {_where(namespace)}",
        _checks_path(namespace),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        bookmarks=True,
    )


def list_acceptances(
    api_client: ApiClient, namespace: str, *, request_timeout: Timeout = DEFAULT_TIMEOUT
) -> tuple[list[JsonObj], str]:
    """The ReleaseAcceptances of one namespace, with the list's resourceVersion.

    A 404 means the ReleaseAcceptance CRD is not installed: a ConfigError saying so
    (no changed release can be accepted without it).
    """
    api = CustomObjectsApi(api_client)
    what = f"list {ACCEPTANCE_PLURAL}.{CRD_GROUP}/{CRD_VERSION} in {namespace}"
    try:
        doc = call_json(
            what,
            lambda: api.list_namespaced_custom_object(
                CRD_GROUP, CRD_VERSION, namespace, ACCEPTANCE_PLURAL, **raw(request_timeout)
            ),
            passthrough=(404,),
        )
    except ApiStatus as st:
        raise ConfigError(
            f"{what}: the ReleaseAcceptance CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return body.items(doc, JsonObj)


def watch_acceptances(
    api_client: ApiClient,
    namespace: str,
    *,
    resource_version: str | None,
    timeout: int,
    stop: threading.Event | None,
    opened: Callable[[object, bool], None] | None,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> Iterator[tuple[str, JsonObj]]:
    """Watch the ReleaseAcceptances of one namespace from ``resource_version``."""
    api = CustomObjectsApi(api_client)
    seconds = max(1, math.ceil(timeout))

    def send() -> object:
        return api.list_namespaced_custom_object(
            CRD_GROUP,
            CRD_VERSION,
            namespace,
            ACCEPTANCE_PLURAL,
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version or None,
            timeout_seconds=seconds,
            **raw(watch_timeout(request_timeout, seconds)),
        )

    return watch(f"watch {ACCEPTANCE_PLURAL}.{CRD_GROUP} in {namespace}", send, stop, opened)


def _acceptances_path(namespace: str) -> str:
    return f"/apis/{CRD_GROUP}/{CRD_VERSION}/namespaces/{namespace}/{ACCEPTANCE_PLURAL}"


async def list_acceptances_async(kube: KubeHttp, namespace: str) -> tuple[list[JsonObj], str]:
    """:func:`list_acceptances` on the asynchronous client (404: the CRD is missing)."""
    what = f"list {ACCEPTANCE_PLURAL}.{CRD_GROUP}/{CRD_VERSION} in {namespace}"
    try:
        doc = await kube.request(what, "GET", _acceptances_path(namespace), passthrough=(404,))
    except ApiStatus as st:
        raise ConfigError(
            f"{what}: the ReleaseAcceptance CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return body.items(doc, JsonObj)


def watch_acceptances_async(
    kube: KubeHttp, namespace: str, *, resource_version: str | None, timeout: int
) -> AsyncIterator[tuple[str, JsonObj]]:
    """:func:`watch_acceptances` on the asynchronous client (with bookmarks)."""
    return kube.watch(
        f"watch {ACCEPTANCE_PLURAL}.{CRD_GROUP} in {namespace}",
        _acceptances_path(namespace),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        bookmarks=True,
    )


def patch_acceptance_status(
    api_client: ApiClient,
    namespace: str,
    name: str,
    status: Mapping[str, object],
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> JsonObj | None:
    """Merge-patch a ReleaseAcceptance's status (what became of it); None when gone."""
    api = CustomObjectsApi(api_client)
    what = f"patch {ACCEPTANCE_PLURAL}/status {namespace}/{name}"
    try:
        written = call_json(
            what,
            lambda: api.patch_namespaced_custom_object_status(
                CRD_GROUP,
                CRD_VERSION,
                namespace,
                ACCEPTANCE_PLURAL,
                name,
                {"status": dict(status)},
                _content_type=MERGE_PATCH,
                **raw(request_timeout),
            ),
            passthrough=(404,),
        )
    except ApiStatus:
        _LOG.info("%s: the ReleaseAcceptance is gone", what)
        return None
    return body.obj(written)


def patch_check_status(
    api_client: ApiClient,
    namespace: str,
    name: str,
    status: Mapping[str, object],
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> JsonObj | None:
    """Merge-patch an ArtifactCheck's status subresource; None when it was deleted.

    A merge patch (not the client's default strategic merge, which custom resources do
    not support): keys set to None are removed, lists are replaced whole.
    """
    api = CustomObjectsApi(api_client)
    return _merge_patch(
        api.patch_namespaced_custom_object_status,
        f"patch {CRD_PLURAL}/status {namespace}/{name}",
        namespace,
        name,
        {"status": dict(status)},
        gone="the ArtifactCheck is gone; status not written",
        request_timeout=request_timeout,
    )


def patch_check_annotations(
    api_client: ApiClient,
    namespace: str,
    name: str,
    annotations: Mapping[str, str | None],
    *,
    request_timeout: Timeout = DEFAULT_TIMEOUT,
) -> JsonObj | None:
    """Merge-patch an ArtifactCheck's annotations (None removes one, e.g. an accepted
    ``artifactcheck.io/accept-release``); None when the check was deleted."""
    api = CustomObjectsApi(api_client)
    return _merge_patch(
        api.patch_namespaced_custom_object,
        f"patch {CRD_PLURAL} {namespace}/{name} annotations",
        namespace,
        name,
        {"metadata": {"annotations": dict(annotations)}},
        gone="the ArtifactCheck is gone",
        request_timeout=request_timeout,
    )


def _merge_patch(
    send: Callable[..., object],
    what: str,
    namespace: str,
    name: str,
    patch: JsonObj,
    *,
    gone: str,
    request_timeout: Timeout,
) -> JsonObj | None:
    """One merge patch of an ArtifactCheck (object or subresource); a 404 is logged with
    ``gone`` and answered None: the check was deleted between reading and writing."""
    try:
        written = call_json(
            what,
            lambda: send(
                CRD_GROUP,
                CRD_VERSION,
                namespace,
                CRD_PLURAL,
                name,
                patch,
                _content_type=MERGE_PATCH,
                **raw(request_timeout),
            ),
            passthrough=(404,),
        )
    except ApiStatus:
        _LOG.info("%s: %s", what, gone)
        return None
    return body.obj(written)


def record_check_event(
    api_client: ApiClient,
    check: Mapping[str, object],
    *,
    reason: str,
    message: str,
    event_type: str = "Warning",
    logger: Logger | None = None,
) -> None:
    """One Event about an ArtifactCheck (e.g. why it was refused), aggregated per reason
    like the Events about pods, so a refusal seen again bumps a count."""
    meta = body.meta(check)
    recorder = EventRecorder(
        core=CoreV1Api(api_client),
        component=COMPONENT,
        instance=COMPONENT,
        timeout=DEFAULT_TIMEOUT,
        clock=utcnow,
        log=logger or _LOG,
    )
    recorder.record(
        involved={
            "apiVersion": CRD_API_VERSION,
            "kind": CRD_KIND,
            "namespace": meta.get("namespace"),
            "name": meta.get("name", ""),
            "uid": meta.get("uid"),
        },
        event_type=event_type,
        reason=reason,
        message=message,
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
    core = CoreV1Api(api_client)
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
