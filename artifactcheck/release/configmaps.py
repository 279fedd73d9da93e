"""Release manifests kept in ConfigMaps: listed, then watched, in one namespace, read-only.

A team that cannot run a release server keeps each release's manifest in a ConfigMap
next to its workload. The layout is one ConfigMap per release: the
``artifactcheck.io/version`` label names the version and the ``manifest.json`` key
(``data``, or ``binaryData`` for a manifest that is not UTF-8) holds the manifest. One
object per release rather than one key per version in a shared ConfigMap, because
publishing a release is then creating one object (CI applies it, nothing to merge),
withdrawing one is deleting it, a watch event carries only the release that changed,
and no ConfigMap approaches the 1 MiB object limit as releases accumulate.

Only the namespace it is given is ever read, with the check's label selector: a
namespaced ArtifactCheck names its own ConfigMaps and nobody else's. The calls are
``list`` and ``watch`` of ``configmaps`` and nothing else (no get, no write), which is
what k8s/rbac.yaml grants and the RBAC scanner (tests/tools/rbac_scan.py) holds
both to.

Every request is a coroutine of the asynchronous client. With ``watch`` (the
controller), the first use lists and a task of the running event loop then follows the
watch from the list's resourceVersion, relisting on 410 Gone; a broken watch marks
the cache unsynced, so the next use lists again and an API server that stays down is an
error the caller turns into ``inconclusive``. Without ``watch`` (one ``verify`` run)
every use lists once. What is returned is raw bytes: parsing and the declared-version
and hash rules are :mod:`artifactcheck.release.sources`'s, the same as for every other source.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import DEFAULT_TIMEOUT, ApiClient, Timeout, WatchExpired
from artifactcheck.clients.kube_bodies import JsonObj
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.clients.kube_routes import CONFIGMAPS
from artifactcheck.model.errors import (
    ArtifactCheckError,
    ConfigError,
    DependencyError,
    ExpectationUnavailable,
)
from artifactcheck.model.names import RELEASE_CONFIGMAP_SELECTOR, RELEASE_VERSION_LABEL

VERSION_LABEL = RELEASE_VERSION_LABEL
MANIFEST_KEY = "manifest.json"
DEFAULT_SELECTOR = RELEASE_CONFIGMAP_SELECTOR

_LOG = logging.getLogger(__name__)


def _version_of(obj: Mapping[str, object]) -> str | None:
    labels = body.meta(obj).get("labels")
    value = labels.get(VERSION_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) else None


def _manifest_bytes(obj: Mapping[str, object], where: str) -> bytes:
    data = obj.get("data")
    if isinstance(data, Mapping) and isinstance(data.get(MANIFEST_KEY), str):
        return str(data[MANIFEST_KEY]).encode("utf-8")
    binary = obj.get("binaryData")
    if isinstance(binary, Mapping) and isinstance(binary.get(MANIFEST_KEY), str):
        try:
            return base64.b64decode(str(binary[MANIFEST_KEY]), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ExpectationUnavailable(
                f"{where}: binaryData {MANIFEST_KEY} is not base64"
            ) from exc
    raise ExpectationUnavailable(f"{where}: no {MANIFEST_KEY} key in data or binaryData")


class ConfigMapReleases:
    """The release-manifest ConfigMaps of one namespace, by the version they are labelled.

    Give ``kube`` (borrowed, never closed: the controller's asynchronous client),
    ``api_client`` (borrowed: a client is made from its configuration for each use and
    closed after it) or ``connect`` (a factory, for one ``verify`` run: each API client
    it makes serves one use, so a one-shot run leaves no connection pool behind).
    """

    def __init__(
        self,
        *,
        namespace: str,
        selector: str = DEFAULT_SELECTOR,
        kube: KubeHttp | None = None,
        api_client: ApiClient | None = None,
        connect: Callable[[], ApiClient] | None = None,
        watch: bool = True,
        watch_timeout: int = 30,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        if sum(x is not None for x in (kube, api_client, connect)) != 1:
            raise ConfigError(
                "ConfigMap release source: give exactly one of kube, api_client, connect"
            )
        if not selector.strip():
            raise ConfigError("ConfigMap release source: an empty selector would read them all")
        self.namespace = namespace
        self.selector = selector
        self._kube = kube
        self._api_client = api_client
        self._connect = connect
        self.watch = watch
        self.watch_timeout = max(1, math.ceil(watch_timeout))
        self.request_timeout = request_timeout
        self.description = f"ConfigMaps {selector!r} in namespace {namespace}"
        # One event loop reads and writes these: no lock.
        self._items: dict[str, JsonObj] = {}
        self._resource_version = ""
        self._synced = False
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.lists = 0

    # -- requests ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[KubeHttp]:
        """The asynchronous client for one use: the borrowed one, or one of its own."""
        if self._kube is not None:
            yield self._kube
            return
        if self._api_client is not None:
            api = self._api_client
        else:
            assert self._connect is not None
            try:
                # a kubeconfig's exec plugin may run: off the loop (one verify run only)
                api = await asyncio.to_thread(self._connect)
            except ConfigError as exc:  # no kubeconfig: the API cannot be reached
                raise DependencyError(f"list ConfigMaps in {self.namespace}: {exc}") from exc
        try:
            async with KubeHttp.like(api, timeout=self.request_timeout) as kube:
                yield kube
        finally:
            if self._connect is not None:
                api.close()  # type: ignore[no-untyped-call]

    async def _list(self, kube: KubeHttp) -> tuple[list[JsonObj], str]:
        self.lists += 1
        doc = await kube.list(
            f"list ConfigMaps in {self.namespace} matching {self.selector!r}",
            CONFIGMAPS.path(self.namespace),
            {"labelSelector": self.selector},
        )
        return body.items(doc, JsonObj)

    async def _relist(self, kube: KubeHttp) -> None:
        items, version = await self._list(kube)
        self._items = {str(body.meta(i).get("name")): i for i in items}
        self._resource_version = version
        self._synced = self.watch

    # -- the watch ---------------------------------------------------------------------

    async def _follow(self) -> None:
        what = f"watch ConfigMaps in {self.namespace} matching {self.selector!r}"
        try:
            async with self._client() as kube:
                while not self._closed:
                    try:
                        async for kind, obj in kube.watch(
                            what,
                            CONFIGMAPS.path(self.namespace),
                            resource_version=self._resource_version,
                            timeout_seconds=self.watch_timeout,
                            params={"labelSelector": self.selector},
                            bookmarks=True,
                        ):
                            self._apply(kind, obj)
                    except WatchExpired:
                        _LOG.info("%s: resourceVersion expired; relisting", what)
                        await self._relist(kube)
        except ArtifactCheckError as exc:
            _LOG.warning("%s: %s; the next use lists again", what, exc)
        finally:
            self._synced = False
            self._task = None

    def _apply(self, kind: str, obj: JsonObj) -> None:
        meta = body.meta(obj)
        if meta.get("resourceVersion"):
            self._resource_version = str(meta["resourceVersion"])
        name = str(meta.get("name"))
        if kind in ("ADDED", "MODIFIED"):
            self._items[name] = obj
        elif kind == "DELETED":
            self._items.pop(name, None)

    async def _snapshot(self) -> dict[str, JsonObj]:
        if self._synced:
            return dict(self._items)
        async with self._client() as kube:
            await self._relist(kube)
        if self.watch and self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._follow(), name=f"configmap-watch-{self.namespace}"
            )
        return dict(self._items)

    # -- what the release source asks ----------------------------------------------------

    async def release(self, version: str) -> tuple[str, bytes, str]:
        """``(where, manifest bytes, revision)`` of the ConfigMap labelled ``version``.

        One list unless the watch is synced. Raises DependencyError when the API server
        cannot be asked, ExpectationUnavailable when no single ConfigMap of the
        namespace carries that version.
        """
        items = await self._snapshot()
        found = sorted(n for n, cm in items.items() if _version_of(cm) == version)
        if not found:
            labelled = sorted(
                f"{n} ({_version_of(cm) or f'no {VERSION_LABEL} label'})" for n, cm in items.items()
            )
            raise ExpectationUnavailable(
                f"no ConfigMap matching {self.selector!r} in namespace {self.namespace} is "
                f"labelled {VERSION_LABEL}={version}"
                + (f" (found: {', '.join(labelled)})" if labelled else " (none found)")
            )
        if len(found) > 1:
            raise ExpectationUnavailable(
                f"ConfigMaps {', '.join(found)} in namespace {self.namespace} are all labelled "
                f"{VERSION_LABEL}={version}; keep one per release"
            )
        cm = items[found[0]]
        where = f"configmap {self.namespace}/{found[0]}"
        return where, _manifest_bytes(cm, where), self._revision_of(cm)

    @staticmethod
    def _revision_of(cm: Mapping[str, object]) -> str:
        meta = body.meta(cm)
        return f"{meta.get('name')}@{meta.get('resourceVersion')}"

    def revision(self, version: str) -> str | None:
        """What :meth:`release` would return as revision now, from the watched cache only
        (never a request): ``""`` when no ConfigMap carries the version, None when the
        cache is not being watched (cannot tell)."""
        if not self._synced:
            return None
        found = [cm for cm in self._items.values() if _version_of(cm) == version]
        return self._revision_of(found[0]) if len(found) == 1 else ""

    def close(self, timeout: float = 0.0) -> None:
        """Stop the watch: its task is cancelled, which closes its stream at once
        (``timeout`` is kept for the reader protocol: nothing is waited for)."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
