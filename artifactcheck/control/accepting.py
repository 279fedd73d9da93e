"""Accepting a changed release in a controller, and one Warning Event per change
(docs/release-trust.md).

Accepting is a permission of its own, apart from editing the check: a release approver
creates a ``ReleaseAcceptance`` in the check's namespace naming the check, the version
and (normally) the digest the ``ReleaseChanged`` condition names; RBAC grants that
(the ``artifactcheck-release-approver`` ClusterRole) to whom the admin binds it. The
leader follows the ReleaseAcceptances of each check with pins, adopts the release
(:func:`artifactcheck.release.pins.accept`'s rules: without a digest, only a single
recorded change), records it in the pins' store and the check's status (``by``: the
acceptance's namespace and name; the controller is never told who created an object,
the API server's audit log is) and writes a Normal Event naming the digest, then marks
the acceptance ``Accepted``. A refused one is marked ``Refused`` with the reason (the
digests to choose from) and a Warning Event. Each acceptance is acted on once.

The ``artifactcheck.io/accept-release`` annotation accepts nothing any more (whoever
edits the check could set it, and the field manager it was recorded under is a name
any client chooses): it is answered with a Warning Event saying what to create, and
removed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube_bodies import JsonObj
from artifactcheck.control.context import Context, sleep_unless_stopped
from artifactcheck.control.release_pins import (
    ANN_ACCEPT_RELEASE,
    Accepted,
    PinsError,
    StatusPins,
)
from artifactcheck.control.reporting import Reporting, change_message
from artifactcheck.control.state import CheckState
from artifactcheck.control.status import (
    list_acceptances_async,
    patch_acceptance_status,
    patch_check_annotations,
    watch_acceptances_async,
)
from artifactcheck.control.watching import Watching
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.names import ACCEPTANCE_KIND
from artifactcheck.present.logs import ContextAdapter
from artifactcheck.release.pins import is_sha256

__all__ = ["Accepting", "accept_requested", "acceptance_by", "annotated_by", "pins_of"]

#: The longest version a ReleaseAcceptance may name (the status's limit).
_MAX_VERSION = 128


def acceptance_by(namespace: str, name: str) -> str:
    """What ``acceptedReleases[].by`` records: the acceptance that adopted the release."""
    return f"{ACCEPTANCE_KIND} {namespace}/{name}"


def requested(obj: Mapping[str, Any]) -> tuple[str, str | None]:
    """(version, digest or None) a ReleaseAcceptance names; ValueError says what is
    wrong (the CRD's schema refuses it too, on a server that validates)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    version, digest = spec.get("version"), spec.get("sha256")
    if not isinstance(version, str) or not version.strip() or len(version) > _MAX_VERSION:
        raise ValueError("spec.version must name the version whose release changed")
    if digest in (None, ""):
        return version.strip(), None
    if not isinstance(digest, str) or not is_sha256(digest):
        raise ValueError(
            "spec.sha256 must be 64 lowercase hex digits (as the ReleaseChanged condition names it)"
        )
    return version.strip(), digest


def _pending_for(state: CheckState, obj: Mapping[str, Any]) -> bool:
    """A ReleaseAcceptance that names this check and was not acted on yet."""
    spec = obj.get("spec")
    status = obj.get("status")
    if not isinstance(spec, Mapping) or spec.get("check") != state.name:
        return False
    return not (isinstance(status, Mapping) and status.get("phase"))


@dataclass(slots=True)
class Accepting:
    """Adopts the releases ReleaseAcceptances accept; announces the changes not accepted."""

    ctx: Context
    reporting: Reporting
    #: The controller's watches (set by control/checking.py, which follows with them).
    watching: Watching | None = None
    #: (acceptance, digest) whose Normal Event was written: one each, retries or not.
    announced: set[tuple[str, str]] = field(default_factory=set)

    # -- ReleaseAcceptances ------------------------------------------------------------

    async def follow(self, state: CheckState, stop: asyncio.Event) -> None:
        """Act on the ReleaseAcceptances naming the check, one at a time, until ``stop``."""
        watching = self.watching
        assert watching is not None
        queue: asyncio.Queue[JsonObj] = asyncio.Queue()

        def listed(items: list[JsonObj]) -> None:
            for obj in items:
                changed("ADDED", obj)

        def changed(kind: str, obj: dict[str, Any]) -> None:
            if kind in ("ADDED", "MODIFIED") and _pending_for(state, obj):
                queue.put_nowait(obj)

        kube = watching.kube
        async with asyncio.TaskGroup() as tg:
            tg.create_task(
                watching.run(
                    stop,
                    name=f"acceptances {state.key}",
                    list_fn=lambda: list_acceptances_async(kube, state.namespace),
                    watch_fn=lambda rv: watch_acceptances_async(
                        kube,
                        state.namespace,
                        resource_version=rv,
                        timeout=self.ctx.settings.watch_timeout,
                    ),
                    on_sync=listed,
                    on_event=changed,
                )
            )
            while not stop.is_set():
                obj = await queue.get()
                failures = 0
                while not await self.acceptance(state, obj) and not stop.is_set():
                    failures += 1  # not recorded yet (the store or the API): again
                    await sleep_unless_stopped(
                        stop, min(self.ctx.settings.backoff_max, 2.0**failures * 0.1)
                    )

    async def acceptance(self, state: CheckState, obj: Mapping[str, Any]) -> bool:
        """Act on one ReleaseAcceptance; whether it is done (recorded, or refused)."""
        assert state.pins is not None
        meta = body.meta(obj)
        name = str(meta.get("name") or "")
        by = acceptance_by(state.namespace, name)
        try:
            version, digest = requested(obj)
            # recorded already (its status not written yet): the same ask, still pinned
            record = state.pins.accepted_by(by)
            if (
                record is None
                or (record.version, digest or record.sha256) != (version, record.sha256)
                or state.pins.pinned(version) != record.sha256
            ):
                record = state.pins.accept(version, digest, by=by)
            else:
                version = ""  # nothing adopted now
        except (ValueError, PinsError) as exc:
            message = f"{by} refused: {exc}"
            self.ctx.log.warning("%s: %s", state.key, message)
            await self.reporting.warn(state, "ReleaseAcceptRefused", message)
            return await self._mark(state, name, obj, refused=str(exc))
        if version:
            self.ctx.log.warning(
                "%s: release %s accepted (sha256 %s) by %s",
                state.key,
                record.version,
                record.sha256,
                by,
            )
            state.announced = {a for a in state.announced if a[0] != record.version}
        if not await self._recorded(state):
            return False
        if (by, record.sha256) not in self.announced and await self.reporting.warn(
            state,
            "ReleaseAccepted",
            f"release {record.version} accepted by {by}: sha256 {record.sha256} is pinned",
            event_type="Normal",
        ):
            self.announced.add((by, record.sha256))
        state.wake.set()
        return await self._mark(state, name, obj, accepted=record)

    async def _recorded(self, state: CheckState) -> bool:
        """The pins as they are now are in the store (and, after a cycle, the status)."""
        clog = ContextAdapter(logging.getLogger("artifactcheck.check"), {"check": state.key})
        if state.last_report is not None:
            await self.reporting.rewrite_status(state, clog)
        elif self.reporting.save_pins is not None:
            await self.reporting.save_pins(state)
        pins = state.pins
        return pins is not None and pins.saved == pins.to_status()

    async def _mark(
        self,
        state: CheckState,
        name: str,
        obj: Mapping[str, Any],
        *,
        accepted: Accepted | None = None,
        refused: str = "",
    ) -> bool:
        """The acceptance's status: what became of it (it is not acted on again)."""
        if not self.reporting.writes.may_act():
            return False
        generation = body.meta(obj).get("generation")
        if accepted is not None:
            status: dict[str, Any] = {
                "phase": "Accepted",
                "sha256": accepted.sha256,
                "acceptedAt": accepted.at,
                "message": f"release {accepted.version} of check {state.name} is pinned to "
                f"sha256 {accepted.sha256}",
            }
        else:
            status = {"phase": "Refused", "message": refused[:4096]}
        if isinstance(generation, int):
            status["observedGeneration"] = generation
        try:
            await asyncio.to_thread(
                patch_acceptance_status, self.ctx.api, state.namespace, name, status
            )
        except ArtifactCheckError as exc:
            self.ctx.metrics.api_errors.labels("status").inc()
            self.ctx.log.warning(
                "could not write the status of %s: %s", acceptance_by(state.namespace, name), exc
            )
            return False
        return True

    # -- the annotation, which accepts nothing -------------------------------------------

    async def accept(self, state: CheckState, value: str) -> None:
        """Answer an ``accept-release`` annotation: a Warning Event naming the
        ReleaseAcceptance to create instead, and the annotation removed."""
        obj = state.latest or {}
        manager = annotated_by(obj)
        hint = "a ReleaseAcceptance in the check's namespace"
        if state.pins is not None:
            changed = sorted(state.pins.changed().items())
            if changed and changed[0][1].changed is not None:
                hint = state.pins.accept_hint(changed[0][0], changed[0][1].changed.sha256)
        await self.reporting.warn(
            state,
            "ReleaseAcceptRefused",
            f"{ANN_ACCEPT_RELEASE}={value!r} (set by {manager or 'an unnamed client'}) accepts "
            "nothing: accepting a changed release is a permission of its own, apart from "
            f"editing the check; create {hint}",
        )
        if not self.reporting.writes.may_act():
            return
        try:
            await asyncio.to_thread(
                patch_check_annotations,
                self.ctx.api,
                state.namespace,
                state.name,
                {ANN_ACCEPT_RELEASE: None},
            )
        except ArtifactCheckError as exc:
            self.ctx.metrics.api_errors.labels("status").inc()
            self.ctx.log.warning(
                "could not remove %s from %s: %s", ANN_ACCEPT_RELEASE, state.key, exc
            )

    async def announce_changes(self, state: CheckState) -> None:
        """One Warning Event per release change (a version and the digest it changed to),
        not one per cycle."""
        if state.pins is None:
            return
        for version, entry in sorted(state.pins.changed().items()):
            assert entry.changed is not None
            key = (version, entry.changed.sha256)
            if key in state.announced:
                continue
            message = change_message(state.pins, version, entry)
            if await self.reporting.warn(state, "ReleaseChanged", message):
                state.announced.add(key)


def accept_requested(state: CheckState) -> str | None:
    """The value of an ``accept-release`` annotation on the check, to answer (None:
    none, or the check keeps no pins)."""
    annotations = ((state.latest or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANN_ACCEPT_RELEASE)
    if value is None or state.pins is None:
        return None
    return str(value)


def pins_of(state: CheckState, obj: Mapping[str, Any]) -> tuple[StatusPins, set[tuple[str, str]]]:
    """The pins the object's status holds, and the changes in it (already announced):
    where a check starts from until its store is read (control/pins_store.py)."""
    pins = StatusPins.from_status(
        obj.get("status"),
        max_versions=state.spec.cache_versions,
        check=f"{state.name} -n {state.namespace}",
    )
    announced = {(v, p.changed.sha256) for v, p in pins.changed().items() if p.changed}
    return pins, announced


def annotated_by(obj: Mapping[str, Any]) -> str:
    """The field manager that set the accept annotation (``kubectl-annotate``, or any
    name a client chose), from managedFields: named in the refusal, never trusted."""
    key = f"f:{ANN_ACCEPT_RELEASE}"
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = (((entry or {}).get("fieldsV1") or {}).get("f:metadata") or {}).get(
            "f:annotations"
        ) or {}
        if key in fields:
            return str(entry.get("manager") or "")
    return ""
