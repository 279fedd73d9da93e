"""What a check says about itself: its ``status`` (counts, findings, conditions with
their transition times, pins) and its Warning Events; a refused check's refusal.

A status is written only when something other than time changed, and only by a
replica that may act now (control/actions.py :class:`Writes`): a skipped write is
made by a later cycle, as ``last_status`` stays as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from artifactcheck.control.actions import Writes
from artifactcheck.control.context import Context
from artifactcheck.control.release_pins import StatusPins
from artifactcheck.control.skew_window import previous_condition
from artifactcheck.control.state import CheckState, RefusedCheck
from artifactcheck.control.status import patch_check_status, record_check_event
from artifactcheck.judge.decide import held_out_of_traffic
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.values import Finding, Report, Verdict

__all__ = ["Reporting", "change_message", "check_conditions", "stamp_transitions", "top_findings"]


@dataclass(slots=True)
class Reporting:
    """Writes checks' statuses and Warning Events through the Kubernetes API."""

    ctx: Context
    writes: Writes
    #: Called before every status write of a check with pins: their store is written
    #: first (control/pins_store.py), so the status never shows pins the store lacks.
    save_pins: Callable[[CheckState], Awaitable[None]] | None = None

    async def write_status(
        self,
        state: CheckState,
        report: Report,
        quarantined: int,
        log_: logging.LoggerAdapter[logging.Logger],
    ) -> None:
        """Patch the ArtifactCheck status, only when something other than time changed."""
        conds = check_conditions(state, report)
        body: dict[str, Any] = {
            "observedGeneration": state.generation,
            "counts": report.counts(),
            "quarantined": quarantined,
            "heldOutOfTraffic": len(
                held_out_of_traffic(state.pods, opened=state.opened, history=state.history)
            ),
            "findings": [
                {
                    "kind": f.kind.value,
                    "severity": f.severity.value,
                    "instance": f.instance or "",
                    "message": f.message[:500],
                }
                for f in top_findings(report)
            ],
        }
        if state.pins is not None:
            if self.save_pins is not None:
                await self.save_pins(state)
            body.update(state.pins.to_status())
            if state.pins_store is not None:
                body["releasePinsStore"] = state.pins_store
        comparable = {**body, "conditions": [dict(c) for c in conds]}
        if state.last_status == comparable:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        transitions = stamp_transitions(state.transitions, conds, stamp)
        status = {**body, "conditions": conds, "lastCheckTime": stamp}
        if not self.writes.allowed():
            return  # written by a later cycle (last_status is unchanged)
        try:
            await patch_check_status(self.ctx.kube, state.namespace, state.name, status)
            state.last_status = comparable
            state.transitions = transitions
        except ArtifactCheckError as exc:
            self.writes.throttled(exc)
            self.ctx.metrics.api_errors.labels("status").inc()
            log_.warning("could not write status: %s", exc)

    async def rewrite_status(
        self, state: CheckState, log_: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        """The last report's status again, with what changed since (a throttle, pins)."""
        if state.last_report is not None:
            await self.write_status(state, state.last_report, state.quarantined(), log_)

    async def refusal(self, refused: RefusedCheck) -> None:
        """``Accepted=False`` and a Warning Event for a check admission refused."""
        meta = refused.obj.get("metadata", {})
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        admission = refused.admission
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "observedGeneration": refused.generation,
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "False",
                    "reason": admission.reason,
                    "message": admission.message[:32768],
                    "observedGeneration": refused.generation,
                    "lastTransitionTime": stamp,
                }
            ],
            "counts": None,
            "findings": None,
            "quarantined": None,
        }
        try:
            if not self.writes.may_act():
                return
            await patch_check_status(self.ctx.kube, ns, name, status)
            if not self.writes.may_act():
                return
            await record_check_event(
                self.ctx.kube,
                refused.obj,
                reason=admission.reason,
                message=admission.message,
                logger=self.ctx.log,
            )
        except ArtifactCheckError as exc:
            self.ctx.metrics.api_errors.labels("status").inc()
            self.ctx.log.warning("could not report the refusal of %s: %s", refused.key, exc)

    async def warn(
        self, state: CheckState, reason: str, message: str, *, event_type: str = "Warning"
    ) -> bool:
        """One Event (a Warning unless told) about the ArtifactCheck; whether it was
        written."""
        if not self.writes.may_act() or state.latest is None:
            return False
        try:
            await record_check_event(
                self.ctx.kube,
                state.latest,
                reason=reason,
                message=message[:1024],
                event_type=event_type,
                logger=self.ctx.log,
            )
        except ArtifactCheckError as exc:
            self.ctx.metrics.api_errors.labels("event").inc()
            self.ctx.log.warning("could not record %s for %s: %s", reason, state.key, exc)
            return False
        return True


def top_findings(report: Report) -> list[Finding]:
    """The ten findings the status shows: errors and alerts, alerts first."""
    return sorted(
        [f for r in report.results for f in r.findings if f.severity.value in ("error", "alert")]
        + [f for f in report.findings if f.severity.value in ("error", "alert")],
        key=lambda f: (f.severity.value != "alert", f.instance or "", f.path or ""),
    )[:10]


def check_conditions(state: CheckState, report: Report) -> list[dict[str, Any]]:
    """The check's status conditions, without their transition times."""
    counts = report.counts()
    bad = sum(counts[v.value] for v in Verdict if v.value not in ("consistent",))
    suspect = any(f.kind.value == "suspect-expectation" for f in report.findings)

    def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True" if status else "False",
            "reason": reason,
            "message": message,
            "observedGeneration": state.generation,
        }

    return [
        condition(
            "Consistent",
            bad == 0 and bool(report.results),
            "AllConsistent" if bad == 0 else "Discrepancies",
            f"{bad} of {len(report.results)} instance(s) not consistent",
        ),
        condition(
            "ExpectationSuspect",
            suspect,
            "MajorityDisagrees" if suspect else "Plausible",
            "most of the workload disagrees with the expected release" if suspect else "",
        ),
        condition("Accepted", True, "Accepted", state.admission.message if state.admission else ""),
        condition(
            "Throttled",
            bool(state.throttled),
            "RequestBudgetExhausted" if state.throttled else "WithinBudget",
            state.throttled or "",
        ),
        *_release_condition(state, condition),
        *previous_condition(state, report),
    ]


def _release_condition(
    state: CheckState, condition: Callable[[str, bool, str, str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``ReleaseChanged``: True while a version's release changed and is not accepted."""
    if state.pins is None:
        return []
    changed = state.pins.changed()
    if not changed:
        return [condition("ReleaseChanged", False, "ReleasesPinned", "")]
    message = "; ".join(change_message(state.pins, v, p) for v, p in sorted(changed.items()))
    return [condition("ReleaseChanged", True, "ReleaseChanged", message[:32768])]


def change_message(pins: StatusPins, version: str, entry: Any) -> str:
    """What a changed release's condition and Warning Event say, and how to accept it."""
    changed = entry.changed
    return (
        f"release {version} changed: {changed.source} now has sha256 {changed.sha256}, but "
        f"{entry.pinned.sha256} was pinned (from {entry.pinned.source} at {entry.pinned.at}); "
        f"its instances are inconclusive, no gate opens and no quarantine is lifted on its "
        f"account until it is accepted: {pins.accept_hint(version, changed.sha256)}"
    )


def stamp_transitions(
    known: Mapping[str, tuple[str, str]], conditions: list[dict[str, Any]], stamp: str
) -> dict[str, tuple[str, str]]:
    """Give each condition its lastTransitionTime: ``stamp`` when its status changed,
    else the one it had; the transitions to remember once the status is written."""
    transitions = dict(known)
    for c in conditions:
        old = transitions.get(c["type"])
        if old is None or old[0] != c["status"]:
            transitions[c["type"]] = (c["status"], stamp)
        c["lastTransitionTime"] = transitions[c["type"]][1]
    return transitions
