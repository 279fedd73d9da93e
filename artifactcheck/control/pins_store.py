"""Where a check's pins live: a ConfigMap in the controller's own namespace.

Pins kept in the ArtifactCheck's status died with the object: its author deleted and
re-created it after ``ReleaseChanged=True``, the rebuilt release was pinned as first
seen and every gate opened. So the document lives in one ConfigMap per check, in the
controller's namespace (the Lease's), named after the check
(:func:`~artifactcheck.control.release_pins.store_name`): a re-created check finds it,
and only the controller's Role writes there. Erasing pins is deleting that ConfigMap,
an act the admin grants; the controller sees the deletion (it watches the ConfigMap),
records a Warning Event ``ReleasePinsErased`` and pins anew from the next load.

:class:`PinsKeeper` follows one check's ConfigMap on the leader: the first list is the
load (the cycles wait for it), later events say whether it was erased; :meth:`save`
writes the document when it changed (create, or replace at the resourceVersion last
seen: a 404 there is an erasure too, a 409 re-reads and keeps both documents' pins).

Migration: a check whose status holds pins but names no store (written before the
pins moved here) has its pins carried into the store once; a status that names the
store while it is absent means the admin erased it while no controller watched.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    ApiClient,
    ApiStatus,
    NewConfigMap,
    configmap_model,
    model_as_json,
)
from artifactcheck.clients.kube_bodies import JsonObj
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.clients.kube_routes import CONFIGMAPS
from artifactcheck.control.context import Context
from artifactcheck.control.release_pins import (
    ANN_PINS_NAME,
    ANN_PINS_NAMESPACE,
    PINS_LABEL,
    StatusPins,
    store_name,
)
from artifactcheck.control.reporting import Reporting
from artifactcheck.control.state import CheckState
from artifactcheck.control.watching import Watching
from artifactcheck.discover.kube_pods import default_namespace
from artifactcheck.model.errors import ArtifactCheckError

__all__ = ["STORE_STATUS_KEY", "PinsKeeper", "StoreUnusable"]

#: The status field naming the pins ConfigMap (``NAMESPACE/NAME``).
STORE_STATUS_KEY = "releasePinsStore"


class StoreUnusable(ArtifactCheckError):
    """The pins ConfigMap exists but holds no pins document (edited by hand)."""


# -- the API calls (one ConfigMap, by name, in the controller's namespace) -----------


async def list_store_async(kube: KubeHttp, namespace: str, name: str) -> tuple[list[JsonObj], str]:
    """The pins ConfigMap (a list of none or one) and the list's resourceVersion."""
    doc = await kube.list(
        f"list ConfigMap {namespace}/{name}",
        CONFIGMAPS.path(namespace),
        params={"fieldSelector": f"metadata.name={name}"},
    )
    return body.items(doc, JsonObj)


def watch_store_async(
    kube: KubeHttp, namespace: str, name: str, *, resource_version: str | None, timeout: int
) -> AsyncIterator[tuple[str, JsonObj]]:
    """Watch the pins ConfigMap from ``resource_version`` (with bookmarks)."""
    return kube.watch(
        f"watch ConfigMap {namespace}/{name}",
        CONFIGMAPS.path(namespace),
        resource_version=resource_version or "",
        timeout_seconds=max(1, math.ceil(timeout)),
        params={"fieldSelector": f"metadata.name={name}"},
        bookmarks=True,
    )


async def write_store_async(
    kube: KubeHttp, configmap: NewConfigMap, api_client: ApiClient | None
) -> JsonObj | int:
    """Create the pins ConfigMap (no resourceVersion) or replace it at its
    resourceVersion; the object written, or the status code of a 404 or 409 (the
    model serialized by ``api_client``, the official client's own serializer)."""
    meta = configmap.metadata
    assert meta is not None
    namespace, name = str(meta.namespace), str(meta.name)
    document = model_as_json(configmap, api_client)
    try:
        if meta.resource_version:
            return await kube.replace(
                f"replace ConfigMap {namespace}/{name}",
                CONFIGMAPS.path(namespace, name),
                document,
                passthrough=(404, 409),
            )
        return await kube.create(
            f"create ConfigMap {namespace}/{name}",
            CONFIGMAPS.path(namespace),
            document,
            passthrough=(404, 409),
        )
    except ApiStatus as st:
        return st.status


# -- the keeper ------------------------------------------------------------------------


@dataclass(slots=True)
class _Following:
    """One check's store as its watch last saw it."""

    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    present: bool = False


class PinsKeeper:
    """Loads, saves and follows the pins ConfigMap of each check this replica runs."""

    def __init__(self, ctx: Context, *, reporting: Reporting, watching: Watching) -> None:
        self.api = ctx.api
        self.settings = ctx.settings
        self.metrics = ctx.metrics
        self.log = ctx.log
        self._stopping = ctx.stopping
        self.reporting = reporting
        self.watching = watching
        self._namespace: str | None = ctx.settings.lease_namespace
        self._saving: dict[str, asyncio.Lock] = {}

    @property
    def namespace(self) -> str:
        """The controller's namespace (the Lease's): where every pins ConfigMap lives."""
        if self._namespace is None:
            self._namespace = default_namespace()
        return self._namespace

    def where(self, state: CheckState) -> str:
        """``NAMESPACE/NAME`` of the check's pins ConfigMap."""
        return f"{self.namespace}/{store_name(state.namespace, state.name)}"

    async def follow(self, state: CheckState, stop: asyncio.Event) -> asyncio.Task[None]:
        """Start following the check's store; returns once the first list is in (the
        pins are then the store's) with the watch's task, which goes on until ``stop``.

        Until then no cycle runs: a check whose pins cannot be read pins nothing (a
        store that cannot be read would make the rebuilt release the first seen).
        """
        following = _Following()
        task = asyncio.create_task(self._watch(state, stop, following))
        waiting = asyncio.create_task(following.loaded.wait())
        try:
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()  # the check ended while its pins were being read
            raise
        finally:
            waiting.cancel()
        if not following.loaded.is_set():
            await task  # ended before loading: stopped
        state.pins_store = self.where(state)
        return task

    async def _watch(self, state: CheckState, stop: asyncio.Event, following: _Following) -> None:
        name = store_name(state.namespace, state.name)
        kube = self.watching.kube
        await self.watching.run(
            stop,
            name=f"pins {state.key}",
            list_fn=lambda: list_store_async(kube, self.namespace, name),
            watch_fn=lambda rv: watch_store_async(
                kube, self.namespace, name, resource_version=rv, timeout=self.settings.watch_timeout
            ),
            on_sync=functools.partial(self._listed, state, following),
            on_event=functools.partial(self._changed, state, following),
        )

    # -- what the watch says ---------------------------------------------------------

    def _listed(self, state: CheckState, following: _Following, items: list[JsonObj]) -> None:
        """A list of the store: the load (first), or a relist that finds it gone."""
        found = items[0] if items else None
        if not following.loaded.is_set():
            self._first(state, following, found)
        elif found is None and following.present:
            self._erased(state, following)
        elif found is not None:
            following.present = True
            self._seen(state, found)

    def _changed(
        self, state: CheckState, following: _Following, kind: str, obj: dict[str, Any]
    ) -> None:
        if not following.loaded.is_set():  # waiting for a store that can be read
            self._first(state, following, None if kind == "DELETED" else obj)
        elif kind == "DELETED":
            if following.present:
                self._erased(state, following)
        elif kind in ("ADDED", "MODIFIED"):
            following.present = True
            self._seen(state, obj)

    def _first(
        self, state: CheckState, following: _Following, found: Mapping[str, Any] | None
    ) -> None:
        """Load the pins, unless the store holds none: then the check waits (logged)
        for the admin to restore or delete it, and the watch says when."""
        try:
            self._load(state, found)
        except StoreUnusable as exc:
            self.log.warning("%s: %s; the check waits", state.key, exc)
            return
        following.present = found is not None
        following.loaded.set()

    def _seen(self, state: CheckState, obj: Mapping[str, Any]) -> None:
        """Our own write echoed (or an admin's edit): the version to replace at next."""
        if state.pins is not None:
            version = body.meta(obj).get("resourceVersion")
            state.pins.stored = str(version) if version else state.pins.stored

    def _load(self, state: CheckState, found: Mapping[str, Any] | None) -> None:
        """The first list: the store's pins win; without a store, the status's pins are
        carried over once (migration), unless the status says a store was erased."""
        pins = state.pins
        if pins is None:
            return
        if found is not None:
            stored = StatusPins.from_data(
                found.get("data"), max_versions=pins.max_versions, check=pins.check
            )
            if stored is None:
                raise StoreUnusable(
                    f"ConfigMap {self.where(state)} holds no pins document: delete it to "
                    "erase the check's pins, or restore it"
                )
            # The store wins (another leader may have written it since this replica
            # last led); a version only this replica pinned meanwhile is kept too (and
            # a change it saw is seen again: a started check loads its manifests anew).
            saved = stored.to_status()
            stored.merge_missing(pins)
            pins.adopt(stored)
            version = body.meta(found).get("resourceVersion")
            pins.stored = str(version) if version else ""
            pins.saved = saved
            return
        status = (state.latest or {}).get("status") or {}
        named = isinstance(status, Mapping) and status.get(STORE_STATUS_KEY)
        if named and not pins.empty():
            # the store the status names is gone: erased while no controller watched
            state.erased = pins.erase()
        pins.stored = ""  # read: there is none (the next save creates it)

    def _erased(self, state: CheckState, following: _Following) -> None:
        following.present = False
        if state.pins is None:
            return
        state.erased = state.pins.erase()
        state.pins.stored = ""
        state.announced = set()
        state.wake.set()

    # -- writes ----------------------------------------------------------------------

    async def sync(self, state: CheckState) -> None:
        """Before a status write: an erasure's Event, then the pins into the store."""
        await self.announce_erased(state)
        await self.save(state)

    async def announce_erased(self, state: CheckState) -> None:
        """The Warning Event of an erasure the watch saw (once), and the status again."""
        if state.erased is None:
            return
        versions, state.erased = state.erased, None
        message = (
            f"the release pins of this check were erased (ConfigMap {self.where(state)} "
            f"deleted): {len(versions)} pinned version(s) forgotten"
            + (f" ({', '.join(versions[:20])})" if versions else "")
            + "; each version is pinned anew from the next release manifest loaded"
        )
        self.log.warning("%s: %s", state.key, message)
        await self.reporting.warn(state, "ReleasePinsErased", message)

    async def save(self, state: CheckState) -> bool:
        """Write the check's pins to its store if they changed since last written there
        (only the leader, only once loaded); whether the store holds them now."""
        pins = state.pins
        if pins is None or pins.stored is None:
            return pins is None
        lock = self._saving.setdefault(state.key, asyncio.Lock())
        async with lock:
            for _ in range(3):
                now = pins.to_status()
                if now == pins.saved:
                    return True
                if not self.reporting.writes.may_act():
                    return False
                written = await self._write(state, pins)
                if isinstance(written, dict):
                    pins.stored = str(body.meta(written).get("resourceVersion") or "")
                    pins.saved = now
                    continue
                if written == 404:  # replaced while the admin deleted it: erased
                    state.erased = pins.erase()
                    pins.stored = ""
                    state.announced = set()
                    await self.announce_erased(state)
                    return False
                if written == 409:  # written meanwhile: read it, keep both documents' pins
                    if not await self._reread(state, pins):
                        return False
            return False

    async def _write(self, state: CheckState, pins: StatusPins) -> JsonObj | int:
        configmap = configmap_model(
            store_name(state.namespace, state.name),
            self.namespace,
            data=pins.to_data(),
            labels={PINS_LABEL: "true", "app.kubernetes.io/part-of": "artifactcheck"},
            annotations={ANN_PINS_NAMESPACE: state.namespace, ANN_PINS_NAME: state.name},
            resource_version=pins.stored,
        )
        try:
            return await write_store_async(self.watching.kube, configmap, self.api)
        except ArtifactCheckError as exc:
            self.metrics.api_errors.labels("pins").inc()
            self.log.warning("could not write the pins of %s: %s", state.key, exc)
            return 0

    async def _reread(self, state: CheckState, pins: StatusPins) -> bool:
        """After a 409: the store as it is now, its pins merged under ours."""
        name = store_name(state.namespace, state.name)
        try:
            items, _ = await list_store_async(self.watching.kube, self.namespace, name)
        except ArtifactCheckError as exc:
            self.log.warning("could not read the pins of %s: %s", state.key, exc)
            return False
        if not items:
            pins.stored = ""
            return True
        theirs = StatusPins.from_data(items[0].get("data"), max_versions=pins.max_versions)
        if theirs is not None:
            pins.merge_missing(theirs)
        pins.stored = str(body.meta(items[0]).get("resourceVersion") or "")
        return True

    def forget(self, key: str) -> None:
        """A check gone: its save lock goes too."""
        self._saving.pop(key, None)
