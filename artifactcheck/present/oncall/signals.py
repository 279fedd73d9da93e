"""The version signals of an instance side by side, and whether they disagree."""

from __future__ import annotations

from artifactcheck.model.values import (
    UNKNOWN_VERDICTS,
    InstanceResult,
    Verdict,
)
from artifactcheck.present.oncall.view_models import SignalRow


def signal_rows(result: InstanceResult) -> tuple[tuple[SignalRow, ...], bool]:
    """Every version signal with its agreement, the served content last; and "all agree".

    The content row is the point of the whole tool: labels, annotations and /version
    can all agree with each other and still be false about the bytes.
    """
    inst = result.instance
    obs = result.observation
    reported = result.reported_version
    rows: list[SignalRow] = []
    for s in inst.signals:
        rows.append(SignalRow(s.source, s.value, None if reported is None else s.value == reported))
    if obs is not None and (obs.endpoint_version is not None or obs.endpoint_error is not None):
        rows.append(
            SignalRow(
                "endpoint",
                obs.endpoint_version,
                None
                if obs.endpoint_version is None or reported is None
                else obs.endpoint_version == reported,
                note=f"could not read: {obs.endpoint_error}"
                if obs.endpoint_error
                else obs.endpoint_note or "",
            )
        )
    values = {r.value for r in rows if r.value is not None}
    agree = len(values) <= 1
    if result.serves_version is not None:
        rows.append(
            SignalRow(
                "content",
                result.serves_version,
                False,
                note=f"the bytes served are release {result.serves_version}'s",
            )
        )
        agree = False
    elif result.verdict is Verdict.MISMATCH:
        # no single other release matches every file (a mix, or unknown bytes): the
        # verdict's reason says which; the signal only says it is not the reported one
        note = f"differs from release {reported}" if reported else "differs from the release"
        rows.append(SignalRow("content", None, False, note=note))
        agree = False
    elif reported is not None and result.verdict not in UNKNOWN_VERDICTS:
        rows.append(SignalRow("content", reported, True, note="the bytes served match"))
    return tuple(rows), agree
