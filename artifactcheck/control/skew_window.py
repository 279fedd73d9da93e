"""The previous release in the controller: checked for ``skewWindow`` after a rollout.

After a workload moves to its desired version, pages opened before keep asking for
the files of the version it ran before; for ``skewWindow`` seconds (default an hour)
after the desired version first appeared, that previous version is checked as
``verify --previous-version`` checks it (the CDN, and with ``previousOnInstances`` the
pods), besides any the check lists in ``previousVersions``.

Which version came before is read from when each version was first seen: the check's
release pins when it keeps them (``releasePins``: they survive restarts), and what
this controller saw pods report since it started. The status says what was found in a
``PreviousReleaseServed`` condition; files gone get one Warning Event per distinct set.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from artifactcheck.control.state import CheckState
from artifactcheck.judge.order import version_key
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.skew import ON_CDN
from artifactcheck.model.values import Observation, Report

#: The condition type, and the reason of the Warning Event when files are gone.
CONDITION = "PreviousReleaseServed"
EVENT_REASON = "PreviousReleaseMissing"


def record_versions(state: CheckState, observations: list[Observation], now: float) -> None:
    """Remember when each version a pod reports was first seen."""
    for obs in observations:
        version = obs.instance.reported_version
        if version is not None and version not in state.versions_seen:
            state.versions_seen[version] = now


def first_seen(state: CheckState) -> dict[str, float]:
    """Each version's first sighting: the earlier of the pins' and this controller's."""
    seen = dict(state.versions_seen)
    if state.pins is not None:
        for version, at in state.pins.first_seen().items():
            try:
                when = datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            seen[version] = min(when, seen.get(version, when))
    return seen


def previous_version(
    seen: Mapping[str, float], desired: str | None, *, now: float, window: float
) -> str | None:
    """The version seen just before the current one, while ``now`` is within ``window``
    seconds of the current one's first sighting; None otherwise.

    The current version is the desired one, else the last one seen. Versions first seen
    together (a controller started mid-rollout) are ordered by version number.
    """
    order = sorted(seen, key=lambda v: (seen[v], version_key(v)))
    current = desired if desired in seen else (order[-1] if order else None)
    if current is None:
        return None
    index = order.index(current)
    if index == 0 or now - seen[current] > window:
        return None
    return order[index - 1]


def with_previous(spec: CheckSpec, state: CheckState, *, now: float) -> CheckSpec:
    """``spec`` with the version a rollout replaced among its previous versions, while
    in the skew window and when there is somewhere to check it."""
    if not spec.cdn and not spec.previous_on_instances:
        return spec
    found = previous_version(
        first_seen(state), spec.desired_version, now=now, window=spec.skew_window
    )
    if found is None or found in spec.previous_versions or found == spec.desired_version:
        return spec
    return spec.model_copy(update={"previous_versions": [*spec.previous_versions, found]})


def missing_message(report: Report) -> str:
    """Which files of which previous release are gone or different, and where ("" if
    none is)."""
    parts = []
    for p in report.previous:
        if not p.wrong:
            continue
        where = f"the CDN {p.base_url}" if p.where == ON_CDN else f"pod {p.where}"
        files = ", ".join([*p.missing, *p.differs][:20])
        more = len(p.missing) + len(p.differs) - 20
        parts.append(
            f"previous release {p.version} on {where}: {len(p.missing)} missing, "
            f"{len(p.differs)} different: {files}" + (f" and {more} more" if more > 0 else "")
        )
    return "; ".join(parts)


def previous_condition(state: CheckState, report: Report) -> list[dict[str, Any]]:
    """``PreviousReleaseServed``: False naming the files gone, Unknown when they could
    not be checked, True when all were served; once set, True outside the window."""
    if not report.previous and CONDITION not in state.transitions:
        return []
    missing = missing_message(report)
    unknown = [p for p in report.previous if p.unknown]
    if missing:
        status, reason, message = "False", EVENT_REASON, missing
    elif unknown:
        status, reason = "Unknown", "PreviousReleaseUnchecked"
        message = "; ".join(
            f"previous release {p.version} on {p.where}: "
            + (p.error or f"{len(p.unchecked)} file(s) not checked")
            for p in unknown
        )
    elif report.previous:
        status, reason = "True", "PreviousReleaseServed"
        message = ", ".join(sorted({p.version for p in report.previous})) + " still served"
    else:
        status, reason, message = "True", "OutsideSkewWindow", ""
    return [
        {
            "type": CONDITION,
            "status": status,
            "reason": reason,
            "message": message[:32768],
            "observedGeneration": state.generation,
        }
    ]
