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

With ``watch`` (the controller), the first use lists and a daemon thread then follows
the watch from the list's resourceVersion, relisting on 410 Gone; a broken watch marks
the cache unsynced, so the next use lists again and an API server that stays down is an
error the caller turns into ``inconclusive``. Without ``watch`` (one ``verify`` run)
every use lists once. What is returned is raw bytes: parsing and the declared-version
and hash rules are :mod:`artifactcheck.release.sources`'s, the same as for every other source.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import threading
from collections.abc import Callable, Mapping

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    ApiClient,
    CoreV1Api,
    Timeout,
    WatchExpired,
    call_json,
    close_client,
    raw,
    watch,
    watch_timeout,
)
from artifactcheck.clients.kube_bodies import JsonObj
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

    Give ``api_client`` (borrowed, never closed: the controller's) or ``connect`` (a
    factory; each client it makes is closed after use, so a one-shot CLI run leaves no
    connection pool behind).
    """

    def __init__(
        self,
        *,
        namespace: str,
        selector: str = DEFAULT_SELECTOR,
        api_client: ApiClient | None = None,
        connect: Callable[[], ApiClient] | None = None,
        watch: bool = True,
        watch_timeout: int = 30,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        if (api_client is None) == (connect is None):
            raise ConfigError("ConfigMap release source: give exactly one of api_client, connect")
        if not selector.strip():
            raise ConfigError("ConfigMap release source: an empty selector would read them all")
        self.namespace = namespace
        self.selector = selector
        self._api_client = api_client
        self._connect = connect
        self.watch = watch
        self.watch_timeout = max(1, math.ceil(watch_timeout))
        self.request_timeout = request_timeout
        self.description = f"ConfigMaps {selector!r} in namespace {namespace}"
        self._lock = threading.Lock()
        self._items: dict[str, JsonObj] = {}
        self._resource_version = ""
        self._synced = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.lists = 0

    # -- requests ----------------------------------------------------------------------

    def _client(self) -> tuple[ApiClient, bool]:
        if self._api_client is not None:
            return self._api_client, False
        assert self._connect is not None
        try:
            return self._connect(), True
        except ConfigError as exc:  # no kubeconfig: the API cannot be reached
            raise DependencyError(f"list ConfigMaps in {self.namespace}: {exc}") from exc

    def _list(self) -> tuple[list[JsonObj], str]:
        api, owned = self._client()
        try:
            core = CoreV1Api(api)
            self.lists += 1
            doc = call_json(
                f"list ConfigMaps in {self.namespace} matching {self.selector!r}",
                lambda: core.list_namespaced_config_map(
                    self.namespace, label_selector=self.selector, **raw(self.request_timeout)
                ),
            )
        finally:
            if owned:
                close_client(api)
        return body.items(doc, JsonObj)

    def _relist(self) -> None:
        items, version = self._list()
        with self._lock:
            self._items = {str(body.meta(i).get("name")): i for i in items}
            self._resource_version = version
            self._synced = self.watch

    # -- the watch ---------------------------------------------------------------------

    def _follow(self) -> None:
        api, owned = self._client()
        core = CoreV1Api(api)
        what = f"watch ConfigMaps in {self.namespace} matching {self.selector!r}"
        try:
            while not self._stop.is_set():
                since = self._resource_version

                def send(since: str = since) -> object:
                    return core.list_namespaced_config_map(
                        self.namespace,
                        label_selector=self.selector,
                        watch=True,
                        allow_watch_bookmarks=True,
                        resource_version=since or None,
                        timeout_seconds=self.watch_timeout,
                        **raw(watch_timeout(self.request_timeout, self.watch_timeout)),
                    )

                try:
                    for kind, obj in watch(what, send, self._stop):
                        self._apply(kind, obj)
                except WatchExpired:
                    _LOG.info("%s: resourceVersion expired; relisting", what)
                    self._relist()
        except ArtifactCheckError as exc:
            _LOG.warning("%s: %s; the next use lists again", what, exc)
        finally:
            with self._lock:
                self._synced = False
                self._thread = None
            if owned:
                close_client(api)

    def _apply(self, kind: str, obj: JsonObj) -> None:
        meta = body.meta(obj)
        with self._lock:
            if meta.get("resourceVersion"):
                self._resource_version = str(meta["resourceVersion"])
            name = str(meta.get("name"))
            if kind in ("ADDED", "MODIFIED"):
                self._items[name] = obj
            elif kind == "DELETED":
                self._items.pop(name, None)

    def _snapshot(self) -> dict[str, JsonObj]:
        with self._lock:
            if self._synced:
                return dict(self._items)
        self._relist()
        with self._lock:
            if self.watch and self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._follow, name=f"configmap-watch-{self.namespace}", daemon=True
                )
                self._thread.start()
            return dict(self._items)

    # -- what the release source asks ----------------------------------------------------

    def release(self, version: str) -> tuple[str, bytes, str]:
        """``(where, manifest bytes, revision)`` of the ConfigMap labelled ``version``.

        Blocking (one list unless the watch is synced). Raises DependencyError when the
        API server cannot be asked, ExpectationUnavailable when no single ConfigMap of
        the namespace carries that version.
        """
        items = self._snapshot()
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
        with self._lock:
            if not self._synced:
                return None
            found = [cm for cm in self._items.values() if _version_of(cm) == version]
        return self._revision_of(found[0]) if len(found) == 1 else ""

    def close(self, timeout: float = 0.0) -> None:
        """Stop the watch: it ends at its next event or at the server's timeout. Waits at
        most ``timeout`` seconds for it (by default not at all: the thread is a daemon
        and reads nothing after this, so shutting down never waits on an idle watch)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and timeout > 0:
            thread.join(timeout=timeout)
