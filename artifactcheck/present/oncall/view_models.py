"""The view models the on-call views are built into: frozen, so a view is data to render or
serialise (``artifactcheck/investigate/v1``, ``artifactcheck/fleet/v1``), never a
computation left half done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from artifactcheck.model.values import (
    BAD_VERDICTS,
    UNKNOWN_VERDICTS,
    Finding,
    Instance,
    Report,
    Verdict,
)

INVESTIGATE_SCHEMA = "artifactcheck/investigate/v1"


FLEET_SCHEMA = "artifactcheck/fleet/v1"


#: Files worth a unified diff: text a human can read.
TEXT_SUFFIXES = (".js", ".mjs", ".cjs", ".css", ".html", ".htm", ".json", ".txt", ".svg", ".xml")


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One recent Kubernetes Event of a pod, as ``kubectl describe`` shows it."""

    type: str  # "Normal" | "Warning"
    reason: str
    message: str
    count: int = 1
    last_seen: datetime | None = None


@dataclass(frozen=True, slots=True)
class SignalRow:
    """One place the instance states its version, and whether it agrees."""

    source: str  # "target", "label:app.kubernetes.io/version", "endpoint:/version", "content"
    value: str | None
    agrees: bool | None  # None: nothing to agree with (no reported version)
    note: str = ""


@dataclass(frozen=True, slots=True)
class Evidence:
    """The response headers that say where bytes came from and how old they are."""

    etag: str | None = None
    age: str | None = None
    cache_control: str | None = None
    cache_status: str | None = None
    server: str | None = None


@dataclass(frozen=True, slots=True)
class AssetRow:
    """One file: what the release expects, what the instance and the CDN serve."""

    path: str
    state: str  # same | differs | unexpected | missing | error | unchecked | not-fetched
    status: int | None = None
    error: str | None = None
    expected_sha256: str | None = None
    expected_from: str | None = None  # "release 1.4.2" | "siblings"
    served_sha256: str | None = None
    size: int | None = None
    expected_size: int | None = None
    matches: tuple[str, ...] = ()  # "1.4.1:assets/index-Bfu9pp8v.js": same bytes elsewhere
    cdn_state: str = "not-checked"  # same | differs | missing | error | not-checked
    cdn_status: int | None = None
    cdn_sha256: str | None = None
    cdn_error: str | None = None
    evidence: Evidence = field(default_factory=Evidence)
    cdn_evidence: Evidence | None = None
    elapsed_ms: float | None = None
    cdn_elapsed_ms: float | None = None
    content_encoding: str | None = None
    loaded_by: tuple[str, ...] = ()  # the entry pages that load it ("/", "/login")

    @property
    def is_text(self) -> bool:
        """True for files a unified diff is readable for (JS, CSS, HTML...)."""
        return self.path.lower().endswith(TEXT_SUFFIXES)


@dataclass(frozen=True, slots=True)
class ReleaseMatch:
    """How much of the served content is byte-identical to one known release."""

    version: str
    matching: int
    total: int

    @property
    def complete(self) -> bool:
        """Every observed file's bytes belong to this release."""
        return self.total > 0 and self.matching == self.total


@dataclass(frozen=True, slots=True)
class ManifestComparison:
    """The served manifest against the expected release: added, removed, changed."""

    served_path: str
    served_format: str | None
    served_entries: int | None
    served_error: str | None
    expected_version: str | None
    expected_from: str | None  # "release manifest" | "siblings (consensus)" | None
    expected_stale: bool = False
    expected_error: str | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    unchanged: int = 0
    not_compared: tuple[str, ...] = ()  # in the release, outside what the instance lists
    release_matches: tuple[ReleaseMatch, ...] = ()
    serves_version: str | None = None


@dataclass(frozen=True, slots=True)
class TlsView:
    """The certificate an endpoint presents, or why there is none to show."""

    role: str  # "instance" | "CDN"
    endpoint: str
    subject: str | None = None
    issuer: str | None = None
    not_after: datetime | None = None
    days_left: float | None = None
    note: str | None = None  # "n/a (http)", a probe error


@dataclass(frozen=True, slots=True)
class Siblings:
    """The target among the instances checked with it."""

    noun: str  # "pods" | "containers" | "instances"
    total: int  # instances checked, target included
    same: tuple[str, ...]  # instances doing what the target does, target included
    same_version: int  # instances reporting the target's version, target included
    same_version_same_content: int
    image_total: int = 0  # same-version instances whose image digest is known
    image_same: int = 0  # ... of which run the target's digest
    majority_image: str | None = None
    nodes: tuple[str, ...] = ()  # nodes of the "same" group, when known
    first_started: datetime | None = None  # of the "same" group, when all are known
    last_started: datetime | None = None
    others_last_started: datetime | None = None  # latest start among the rest
    #: the target served a file whose agreement vouches for content; without one (404s,
    #: refusals, the fallback page), no sibling "serves this content"
    content_served: bool = True


@dataclass(frozen=True, slots=True)
class PodView:
    """The Kubernetes side of a pod: readiness gate, annotations, recent Events."""

    condition_type: str
    has_gate: bool
    gate_status: str | None
    ready: bool
    annotations: tuple[tuple[str, str], ...]
    events: tuple[PodEvent, ...] = ()
    events_note: str | None = None


@dataclass(frozen=True, slots=True)
class DiffView:
    """A unified diff of one mismatching text file, expected against served."""

    path: str
    expected_source: str | None  # "sibling web-1 (http://...)" | "CDN http://..." | None
    lines: tuple[str, ...] = ()
    truncated: int = 0  # diff lines not shown
    note: str | None = None  # why there is no diff, or what was adjusted


@dataclass(frozen=True, slots=True)
class Investigation:
    """Everything ``artifactcheck investigate`` shows about one instance."""

    target: Instance
    url: str
    verdict: Verdict
    reason: str
    summary: str
    reported_version: str | None
    serves_version: str | None
    fingerprint: str | None
    signals: tuple[SignalRow, ...]
    signals_agree: bool
    siblings: Siblings
    manifest: ManifestComparison
    assets: tuple[AssetRow, ...]
    tls: tuple[TlsView, ...]
    pod: PodView | None
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]  # what could not be checked, and why
    diffs: tuple[DiffView, ...]
    generated_at: datetime
    elapsed: float
    requests: int
    counts: Mapping[str, int]
    desired_version: str | None
    cdn: str | None
    release_source: str | None

    @property
    def exit_code(self) -> int:
        """The target's verdict as an exit code: 0 consistent, 1 bad, 3 could not judge."""
        if self.verdict in BAD_VERDICTS:
            return 1
        if self.verdict in UNKNOWN_VERDICTS:
            return 3
        return 0

    def with_diffs(self, diffs: Sequence[DiffView]) -> Investigation:
        """The same investigation carrying the diffs fetched after the check."""
        from dataclasses import replace

        return replace(self, diffs=tuple(diffs))


@dataclass(frozen=True, slots=True)
class FleetGroup:
    """Instances that report one version, serve one content and run one image."""

    version: str | None
    fingerprint: str | None
    image_id: str | None
    instances: tuple[str, ...]
    verdicts: Mapping[str, int]
    serves_version: str | None
    nodes: tuple[str, ...]
    owners: tuple[str, ...]
    first_started: datetime | None
    last_started: datetime | None
    odd: bool
    why: str

    @property
    def count(self) -> int:
        """Instances in the group."""
        return len(self.instances)


@dataclass(frozen=True, slots=True)
class FleetView:
    """Everything ``artifactcheck fleet`` shows: groups, largest first, odd ones marked."""

    noun: str
    total: int
    groups: tuple[FleetGroup, ...]
    headlines: tuple[str, ...]
    counts: Mapping[str, int]
    notes: tuple[str, ...]
    generated_at: datetime
    elapsed: float
    requests: int
    exit_code: int
    desired_version: str | None
    cdn: str | None
    release_source: str | None
    #: The check behind the view, for ``--output html`` (built from its JSON document).
    report: Report | None = field(default=None, repr=False, compare=False)

    def with_note(self, note: str) -> FleetView:
        """The same view with one more note (e.g. a failed ``--watch`` refresh)."""
        from dataclasses import replace

        return replace(self, notes=(*self.notes, note))
