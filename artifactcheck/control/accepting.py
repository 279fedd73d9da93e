"""Release pins in a controller: accepting a changed release by annotation, and one
Warning Event per release change (docs/release-trust.md).

An ``artifactcheck.io/accept-release`` annotation is acted on by the leader only: the
release it names is adopted and recorded in the status, then the annotation is
removed (in that order: a crash between the two only repeats an acceptance already
recorded, which is recognised and not recorded twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck.act.logs import ContextAdapter
from artifactcheck.control.context import Context
from artifactcheck.control.release_pins import (
    ANN_ACCEPT_RELEASE,
    PinsError,
    StatusPins,
    parse_accept,
)
from artifactcheck.control.reporting import Reporting, change_message
from artifactcheck.control.state import CheckState
from artifactcheck.control.status import patch_check_annotations
from artifactcheck.model.errors import ArtifactCheckError

__all__ = ["Accepting", "accept_requested", "annotated_by", "pins_of"]


@dataclass(slots=True)
class Accepting:
    """Adopts the releases annotations accept; announces the changes not accepted."""

    ctx: Context
    reporting: Reporting

    async def accept(self, state: CheckState, value: str) -> None:
        """Adopt the release the annotation names, record it in the status, then remove
        the annotation (the module's order).

        A value that does not parse, or names no change to adopt, is a Warning Event;
        the annotation is removed too, so it is not tried again forever.
        """
        assert state.pins is not None and state.latest is not None
        obj = state.latest
        try:
            version, digest = parse_accept(value)
            if not state.pins.already_accepted(version, digest):
                record = state.pins.accept(version, digest, by=annotated_by(obj))
                self.ctx.log.warning(
                    "%s: release %s accepted (sha256 %s) by %s",
                    state.key,
                    version,
                    record.sha256,
                    record.by or "an annotation",
                )
                state.announced = {a for a in state.announced if a[0] != version}
                if state.last_report is not None:
                    clog = ContextAdapter(
                        logging.getLogger("artifactcheck.check"), {"check": state.key}
                    )
                    await self.reporting.rewrite_status(state, clog)
                    if not _pins_written(state):
                        return  # not recorded yet: the annotation stays, tried again
                state.wake.set()
        except (ValueError, PinsError) as exc:
            await self.reporting.warn(state, "ReleaseAcceptRefused", str(exc))
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
    """The release an ``accept-release`` annotation on the check names (None: none, or
    the check keeps no pins)."""
    annotations = ((state.latest or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ANN_ACCEPT_RELEASE)
    if value is None or state.pins is None:
        return None
    return str(value)


def pins_of(state: CheckState, obj: Mapping[str, Any]) -> tuple[StatusPins, set[tuple[str, str]]]:
    """The pins the object's status holds, and the changes in it (already announced)."""
    pins = StatusPins.from_status(
        obj.get("status"),
        max_versions=state.spec.cache_versions,
        check=f"{state.name} -n {state.namespace}",
    )
    announced = {(v, p.changed.sha256) for v, p in pins.changed().items() if p.changed}
    return pins, announced


def _pins_written(state: CheckState) -> bool:
    """The last status written holds the pins as they are now."""
    if state.pins is None or state.last_status is None:
        return False
    now = state.pins.to_status()
    return all(state.last_status.get(k) == v for k, v in now.items())


def annotated_by(obj: Mapping[str, Any]) -> str:
    """The field manager that set the accept annotation (``kubectl-annotate``, a user's
    tool), from managedFields: the API server records who wrote which field."""
    key = f"f:{ANN_ACCEPT_RELEASE}"
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = (((entry or {}).get("fieldsV1") or {}).get("f:metadata") or {}).get(
            "f:annotations"
        ) or {}
        if key in fields:
            return str(entry.get("manager") or "")
    return ""
