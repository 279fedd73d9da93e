"""The certificate and the pod behind an instance: TLS expiry and the pod's events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from artifactcheck.model.names import ANNOTATION_PREFIX
from artifactcheck.model.values import (
    CertInfo,
    Instance,
)
from artifactcheck.present.oncall.view_models import PodEvent, PodView, TlsView


def tls_view(
    role: str,
    url: str,
    cert: CertInfo | None,
    *,
    error: str | None = None,
    now: datetime,
) -> TlsView:
    """The certificate row for an endpoint: its subject and expiry, or why not shown."""
    if not url.startswith("https://"):
        return TlsView(role=role, endpoint=url, note="n/a (http)")
    if cert is None:
        return TlsView(role=role, endpoint=url, note=error or "not recorded")
    days = (cert.not_after - now).total_seconds() / 86400
    return TlsView(
        role=role,
        endpoint=url,
        subject=cert.subject,
        issuer=cert.issuer,
        not_after=cert.not_after,
        days_left=round(days, 1),
    )


def pod_view(
    inst: Instance,
    *,
    condition_type: str,
    events: Sequence[PodEvent],
    events_note: str | None = None,
) -> PodView | None:
    """The pod's gate condition, annotations (artifactcheck's first) and Events."""
    if inst.kind != "pod":
        return None
    ours = sorted((k, v) for k, v in inst.annotations.items() if k.startswith(ANNOTATION_PREFIX))
    theirs = sorted(
        (k, v) for k, v in inst.annotations.items() if not k.startswith(ANNOTATION_PREFIX)
    )
    return PodView(
        condition_type=condition_type,
        has_gate=inst.has_readiness_gate,
        gate_status=inst.gate_status,
        ready=inst.ready,
        annotations=tuple(ours + theirs),
        events=tuple(events),
        events_note=events_note,
    )
