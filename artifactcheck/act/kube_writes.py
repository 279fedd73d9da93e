"""Reads and guarded, conditional writes of pods and nodes: :class:`KubeWriter`.

What every action of :class:`~artifactcheck.act.kube_actor.KubeActor` (pods) and
:class:`~artifactcheck.act.kube_nodes.NodeActor` (nodes) shares: the leader check
right before each write, dry-run, a read-modify-write retried once on 409, an object
gone being "nothing to do", and the pod patches (the gate condition through
``pods/status``, annotations through the pod) that write only what differs.

Every request is a coroutine of the asynchronous client, awaited on the task of the
action that needs it: a 429's ``Retry-After`` reaches that task, never a thread
nobody awaits any more.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TypeVar

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiStatus,
    Logger,
    Timeout,
    rfc3339,
)
from artifactcheck.clients.kube_bodies import JsonObj, Node, Pod
from artifactcheck.clients.kube_http import KubeHttp, mutate
from artifactcheck.clients.kube_routes import PODS
from artifactcheck.discover.kube_pods import actionable_copy
from artifactcheck.model.errors import DependencyError
from artifactcheck.model.names import ANN_CHECKED_AT
from artifactcheck.model.settings import PolicySettings

__all__ = ["KubeWriter", "NotLeader"]

_LOG = logging.getLogger("artifactcheck.act.kube_actor")
Obj = TypeVar("Obj", Pod, Node)


class NotLeader(DependencyError):
    """A write refused locally: this replica may no longer act (its lease lapsed)."""


class KubeWriter:
    """One actor's requests: reads (or the informer's copy), guarded writes, retries."""

    def __init__(
        self,
        *,
        kube: KubeHttp,
        policy: PolicySettings,
        logger: Logger | None,
        request_timeout: Timeout,
        clock: Callable[[], datetime],
        may_write: Callable[[], bool] | None,
        cached_pod: Callable[[str, str], Pod | None] | None,
    ) -> None:
        self.policy = policy
        self.log: Logger = logger or _LOG
        self.timeout = request_timeout
        self.clock = clock
        #: Asked right before every write: a leader whose lease could not be renewed
        #: in time must not write, even in the middle of an action it began.
        self.may_write = may_write
        #: The informer's copy of a pod (namespace, name), read instead of a GET before
        #: the first write: a controller watching its pods already holds it. A stale
        #: copy is safe: every write carries its resourceVersion, and a 409 re-reads
        #: from the API server (the retry never uses the copy).
        self.cached_pod = cached_pod
        #: Pods as this actor's own last write returned them: a second action on the
        #: same pod starts from there, not from the (now stale) cached copy.
        self._written: dict[tuple[str, str], Pod] = {}
        self.kube = kube

    def guard(self, what: str) -> None:
        if self.may_write is not None and not self.may_write():
            raise NotLeader(f"{what}: not sent, this replica is no longer the leader")

    def dry(self, what: str) -> bool:
        if self.policy.dry_run:
            self.log.info("dry-run: would %s", what)
            return True
        return False

    async def on(
        self,
        what: str,
        label: str,
        read: Callable[[], Awaitable[Obj]],
        step: Callable[[Obj], Awaitable[bool]],
    ) -> bool:
        """Read the object and run ``step`` on it, with one retry on conflict; an object
        that is gone is logged and reported as "nothing changed", not as an error."""

        async def attempt() -> bool:
            return await step(await read())

        try:
            return await mutate(what, attempt, logger=self.log)
        except ApiStatus as st:
            if st.status == 404:
                self.log.warning("%s: %s is gone; nothing to do", what, label)
                return False
            raise DependencyError(f"{what}: unexpected status {st.status}: {st.message}") from st

    # ---- pods

    async def get_pod(self, ns: str, name: str) -> Pod:
        return body.typed(
            await self.kube.get(
                f"get pod {ns}/{name}",
                PODS.path(ns, name),
                passthrough=(404,),
                timeout=self.timeout,
            ),
            Pod,
        )

    async def on_pod(
        self, what: str, ns: str, name: str, step: Callable[[Pod], Awaitable[bool]]
    ) -> bool:
        attempts = 0

        async def read() -> Pod:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                cached = self._written.get((ns, name))
                if cached is None and self.cached_pod is not None:
                    cached = self.cached_pod(ns, name)
                if cached is not None:
                    return cached
            return await self.get_pod(ns, name)

        return await self.on(what, f"pod {ns}/{name}", read, step)

    async def patch_pod(self, ns: str, name: str, patch: JsonObj, *, status: bool) -> Pod:
        """Merge-patch the pod, or strategic-merge ``pods/status`` (where conditions are
        merged by ``type``, so kubelet's are kept); guarded, 404 and 409 left to
        :meth:`on`."""
        what = f"patch pods/status {ns}/{name}" if status else f"patch pod {ns}/{name}"
        self.guard(what)
        sent = body.typed(
            await self.kube.patch(
                what,
                PODS.path(ns, name, "status") if status else PODS.path(ns, name),
                patch,
                content_type=STRATEGIC_MERGE_PATCH if status else MERGE_PATCH,
                passthrough=(404, 409),
                timeout=self.timeout,
            ),
            Pod,
        )
        if self.cached_pod is not None:
            self._written[(ns, name)] = actionable_copy(sent, self.policy.condition_type)
        return sent

    async def set_condition(
        self, pod: Pod, ns: str, name: str, *, status: str, reason: str, message: str
    ) -> Pod | None:
        """Strategic-merge the gate condition (merged by ``type``, others untouched)."""
        ctype = self.policy.condition_type
        current = body.condition(pod, ctype)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == (
            status,
            reason,
            message,
        ):
            return None
        transition = (
            current.get("lastTransitionTime")
            if current and current.get("status") == status and current.get("lastTransitionTime")
            else rfc3339(self.clock())
        )
        cond = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        }
        patch: JsonObj = {
            "metadata": {"resourceVersion": body.meta(pod).get("resourceVersion")},
            "status": {"conditions": [cond]},
        }
        return await self.patch_pod(ns, name, patch, status=True)

    async def set_annotations(
        self, obj: Pod, ns: str, name: str, changes: Mapping[str, str | None]
    ) -> Pod | None:
        """Merge-patch only the annotations that differ (None removes one)."""
        current = body.annotations_of(obj)
        diff = {k: v for k, v in changes.items() if current.get(k) != v}
        if not diff:
            return None
        meta = {"resourceVersion": body.meta(obj).get("resourceVersion"), "annotations": diff}
        return await self.patch_pod(ns, name, {"metadata": meta}, status=False)

    async def gate_then_mark(
        self,
        pod: Pod,
        where: tuple[str, str],
        status: str | None,
        reason: str,
        text: str,
        marks: Mapping[str, str | None],
        done: str,
    ) -> bool:
        """Set the gate condition (``status``, ``reason``, ``text``; no ``status``:
        leave it) of the pod ``where`` (namespace, name), then the annotations
        ``marks``, with ``checked-at``, if any of them differs: what quarantine and
        release share. True when either was written.

        Logged as ``done`` as soon as the first write lands: the gate is what moves
        traffic, and a controller stopped (or demoted) before the mark must still have
        said that it moved it.
        """
        ns, name = where

        def say() -> None:
            level = logging.INFO if status != "False" else logging.WARNING
            self.log.log(level, "%s pod %s/%s: %s: %s", done, ns, name, reason, text)

        after = None
        if status is not None:
            after = await self.set_condition(
                pod, ns, name, status=status, reason=reason, message=text
            )
        if after is not None:
            say()
        latest = after if after is not None else pod
        current = body.annotations_of(latest)
        marked = any(current.get(k) != v for k, v in marks.items())
        if marked:
            await self.set_annotations(
                latest, ns, name, {**marks, ANN_CHECKED_AT: rfc3339(self.clock())}
            )
            if after is None:
                say()
        return marked or after is not None
