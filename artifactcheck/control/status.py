"""What the controller reads and reports through the API: ArtifactChecks and Events.

:func:`list_checks_async` and :func:`watch_checks_async` are the list-then-watch of
``ArtifactCheck`` resources (a 404 means the CRD is not installed),
:func:`patch_check_status` writes their status subresource, :func:`record_check_event`
records an aggregated Event about one (e.g. why it was refused): the controller's, on
the asynchronous client (:mod:`artifactcheck.clients.kube_http`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping

from artifactcheck.act.kube_events import EventRecorder
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    ApiStatus,
    Logger,
    utcnow,
)
from artifactcheck.clients.kube_bodies import JsonObj
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.clients.kube_routes import ACCEPTANCES, ARTIFACTCHECKS
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
    "list_acceptances_async",
    "list_checks_async",
    "patch_check_annotations",
    "patch_acceptance_status",
    "patch_check_status",
    "record_check_event",
    "watch_acceptances_async",
    "watch_checks_async",
]

_LOG = logging.getLogger(__name__)


def _where(namespace: str | None) -> str:
    return f"in {namespace}" if namespace else "in all namespaces"


async def list_checks_async(
    kube: KubeHttp, namespace: str | None = None
) -> tuple[list[JsonObj], str]:
    """ArtifactCheck resources as JSON, in one namespace or cluster-wide (None), with
    the list's resourceVersion for :func:`watch_checks_async`.

    A 404 means the CRD is not installed: a ConfigError saying so.
    """
    what = f"list {CRD_PLURAL}.{CRD_GROUP}/{CRD_VERSION} {_where(namespace)}"
    try:
        doc = await kube.list(
            what,
            ARTIFACTCHECKS.path(namespace) if namespace else ARTIFACTCHECKS.cluster_path(),
            passthrough=(404,),
        )
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
    """Watch ArtifactChecks from ``resource_version`` (with bookmarks), like
    :func:`artifactcheck.discover.kube_pods.watch_pods_async`."""
    return kube.watch(
        f"watch {CRD_PLURAL}.{CRD_GROUP} {_where(namespace)}",
        ARTIFACTCHECKS.path(namespace) if namespace else ARTIFACTCHECKS.cluster_path(),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        bookmarks=True,
    )


async def list_acceptances_async(kube: KubeHttp, namespace: str) -> tuple[list[JsonObj], str]:
    """The ReleaseAcceptances of one namespace, with the list's resourceVersion.

    A 404 means the ReleaseAcceptance CRD is not installed: a ConfigError saying so
    (no changed release can be accepted without it).
    """
    what = f"list {ACCEPTANCE_PLURAL}.{CRD_GROUP}/{CRD_VERSION} in {namespace}"
    try:
        doc = await kube.list(what, ACCEPTANCES.path(namespace), passthrough=(404,))
    except ApiStatus as st:
        raise ConfigError(
            f"{what}: the ReleaseAcceptance CRD is not installed (apply k8s/crd.yaml): {st.message}"
        ) from st
    return body.items(doc, JsonObj)


def watch_acceptances_async(
    kube: KubeHttp, namespace: str, *, resource_version: str | None, timeout: int
) -> AsyncIterator[tuple[str, JsonObj]]:
    """Watch the ReleaseAcceptances of one namespace from ``resource_version``."""
    return kube.watch(
        f"watch {ACCEPTANCE_PLURAL}.{CRD_GROUP} in {namespace}",
        ACCEPTANCES.path(namespace),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        bookmarks=True,
    )


async def patch_acceptance_status(
    kube: KubeHttp, namespace: str, name: str, status: Mapping[str, object]
) -> JsonObj | None:
    """Merge-patch a ReleaseAcceptance's status (what became of it); None when gone."""
    what = f"patch {ACCEPTANCE_PLURAL}/status {namespace}/{name}"
    try:
        return await kube.patch(
            what,
            ACCEPTANCES.path(namespace, name, "status"),
            {"status": dict(status)},
            passthrough=(404,),
        )
    except ApiStatus:
        _LOG.info("%s: the ReleaseAcceptance is gone", what)
        return None


async def patch_check_status(
    kube: KubeHttp, namespace: str, name: str, status: Mapping[str, object]
) -> JsonObj | None:
    """Merge-patch an ArtifactCheck's status subresource; None when it was deleted.

    A merge patch (custom resources do not support a strategic one): keys set to None
    are removed, lists are replaced whole.
    """
    what = f"patch {CRD_PLURAL}/status {namespace}/{name}"
    try:
        return await kube.patch(
            what,
            ARTIFACTCHECKS.path(namespace, name, "status"),
            {"status": dict(status)},
            passthrough=(404,),
        )
    except ApiStatus:
        _LOG.info("%s: the ArtifactCheck is gone; status not written", what)
        return None


async def patch_check_annotations(
    kube: KubeHttp, namespace: str, name: str, annotations: Mapping[str, str | None]
) -> JsonObj | None:
    """Merge-patch an ArtifactCheck's annotations (None removes one, e.g. an accepted
    ``artifactcheck.io/accept-release``); None when the check was deleted."""
    what = f"patch {CRD_PLURAL} {namespace}/{name} annotations"
    try:
        return await kube.patch(
            what,
            ARTIFACTCHECKS.path(namespace, name),
            {"metadata": {"annotations": dict(annotations)}},
            passthrough=(404,),
        )
    except ApiStatus:
        _LOG.info("%s: the ArtifactCheck is gone", what)
        return None


async def record_check_event(
    kube: KubeHttp,
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
        kube=kube,
        component=COMPONENT,
        instance=COMPONENT,
        timeout=DEFAULT_TIMEOUT,
        clock=utcnow,
        log=logger or _LOG,
    )
    await recorder.record(
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
