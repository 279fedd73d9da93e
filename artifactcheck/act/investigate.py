"""The on-call views: one instance investigated, and the fleet grouped by what it serves.

An engineer woken at 3 a.m. must see in one screen which instances serve what, and
why; in the outage that motivates artifactcheck every dashboard agreed on the version
and the truth came from curl. This module turns a :class:`~artifactcheck.model.values.Report`
(plus what the check saw of the CDN and the releases) into frozen view models: a
plain-language summary first, then every signal side by side. It is pure, like
:mod:`artifactcheck.judge.compare` — no I/O, no clock (``now`` is a parameter) — so every
sentence can be pinned by a test; fetching lives in :mod:`artifactcheck.cli.investigate`,
rendering in :mod:`artifactcheck.act.views`.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from artifactcheck.judge.answers import short as short  # re-exported for the views
from artifactcheck.judge.order import natural as natural  # re-exported
from artifactcheck.judge.prefix import FALLBACK, is_fallback, page_hashes
from artifactcheck.judge.statuses import MISSING, NOT_HERE
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import ANNOTATION_PREFIX, DEFAULT_CONDITION_TYPE
from artifactcheck.model.values import (
    BAD_VERDICTS,
    UNKNOWN_VERDICTS,
    CertInfo,
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    Report,
    Verdict,
)

INVESTIGATE_SCHEMA = "artifactcheck/investigate/v1"
FLEET_SCHEMA = "artifactcheck/fleet/v1"

#: Served statuses that mean "this file is not there", on an instance or on the CDN.
#: Headers that tell a human where a response came from and how old it is.
_CACHE_STATUS = ("cache-status", "x-cache", "x-cache-status", "cf-cache-status")
#: Files worth a unified diff: text a human can read.
TEXT_SUFFIXES = (".js", ".mjs", ".cjs", ".css", ".html", ".htm", ".json", ".txt", ".svg", ".xml")


# --------------------------------------------------------------------------- values


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

    def with_note(self, note: str) -> FleetView:
        """The same view with one more note (e.g. a failed ``--watch`` refresh)."""
        from dataclasses import replace

        return replace(self, notes=(*self.notes, note))


# --------------------------------------------------------------------------- words


def join_words(items: Sequence[str], *, conj: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conj} {items[-1]}"


def file_names(paths: Sequence[str], *, limit: int = 4) -> str:
    """Base names when they are unambiguous (a tired human reads those), else paths."""
    bases = [p.rsplit("/", 1)[-1] for p in paths]
    shown = bases if len(set(bases)) == len(bases) else list(paths)
    if len(shown) > limit:
        return f"{', '.join(shown[:limit])} and {len(shown) - limit} more"
    return join_words(shown)


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 file`` / ``3 files``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def age(seconds: float) -> str:
    """A short human duration: 45s, 12m, 3h05m, 2d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def clock(moment: datetime, now: datetime) -> str:
    """``12:04 UTC`` today, ``2024-05-01 12:04 UTC`` otherwise."""
    if moment.tzinfo is not None and now.tzinfo is not None:
        moment = moment.astimezone(now.tzinfo)
    if moment.date() == now.date():
        return moment.strftime("%H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def noun_for(instances: Iterable[Instance]) -> str:
    """The plural noun for a set of instances: pods, containers, or instances when mixed."""
    kinds = {i.kind for i in instances}
    if kinds == {"pod"}:
        return "pods"
    if kinds == {"container"}:
        return "containers"
    return "instances"


def _verb(n: int, one: str, many: str) -> str:
    """Subject-verb agreement: '1 of 6 serves', '2 of 6 serve'."""
    return one if n == 1 else many


# --------------------------------------------------------------------------- target


def _norm_url(url: str) -> str:
    """Base URLs always end with '/', so compare URLs the same way."""
    return url if url.endswith("/") else url + "/"


def find_target(ref: str, instances: Sequence[Instance]) -> Instance | None:
    """The instance a TARGET names: URL, name, ``namespace/pod``, pod or container name.

    Returns None when nothing matches (the caller may add a URL as a new target) and
    raises ConfigError when the name is ambiguous, so the user is told which to pick.
    """
    if "://" in ref:
        url = _norm_url(ref)
        return next((i for i in instances if i.base_url == url or i.name == ref), None)
    exact = [i for i in instances if i.name == ref]
    if exact:
        return exact[0]
    loose = [
        i
        for i in instances
        if i.name.rsplit("/", 1)[-1] == ref
        or (i.uid is not None and len(ref) >= 12 and i.uid.startswith(ref))
    ]
    if len(loose) > 1:
        names = ", ".join(sorted(i.name for i in loose)[:10])
        raise ConfigError(f"TARGET {ref!r} is ambiguous: {names}; give namespace/name")
    return loose[0] if loose else None


def unknown_target(ref: str, instances: Sequence[Instance]) -> ConfigError:
    """The error for a TARGET that names no instance, listing what there is."""
    if not instances:
        return ConfigError(
            f"TARGET {ref!r} is not a URL and no instances were found to look it up in: "
            "give --target, --selector, --docker-label or --config"
        )
    names = sorted(i.name for i in instances)
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ConfigError(f"TARGET {ref!r} matches no instance; known: {', '.join(names[:10])}{more}")


# --------------------------------------------------------------------------- assets


def _evidence(headers: Mapping[str, str]) -> Evidence:
    """The evidence subset of kept headers; the cache status has four common names."""
    cache = next((headers[h] for h in _CACHE_STATUS if h in headers), None)
    return Evidence(
        etag=headers.get("etag"),
        age=headers.get("age"),
        cache_control=headers.get("cache-control"),
        cache_status=cache,
        server=headers.get("server"),
    )


def _release_index(releases: Mapping[str, Manifest]) -> dict[str, list[str]]:
    """sha256 -> ``version:path`` of every known release file with those bytes."""
    out: dict[str, list[str]] = defaultdict(list)
    for version in sorted(releases):
        for path, entry in sorted(releases[version].files.items()):
            sha = entry.hashes.get("sha256")
            if sha:
                out[sha].append(f"{version}:{path}")
    return out


def _cdn_state(
    row_sha: str | None,
    got: Fetched | None,
    *,
    path: str = "",
    pages: frozenset[str] = frozenset(),
    expected: str | None = None,
) -> tuple[str, int | None, str | None]:
    """The CDN's answer for a path, relative to the bytes the instance served.

    The judge's own rules (403 counts as missing, the S3 symptom; the site's page
    standing in for a file is missing too), so the table and the verdict never
    disagree; (state, status, error).
    """
    if got is None:
        return "not-checked", None, None
    if got.error is not None or got.status is None:
        return "error", got.status, got.error
    if got.status in NOT_HERE:
        return "missing", got.status, None
    if got.sha256 != (expected or row_sha) and is_fallback(got, path, pages):
        return "missing", got.status, FALLBACK
    if not got.ok:
        return "error", got.status, f"HTTP {got.status}"
    return ("same" if got.sha256 == row_sha else "differs"), got.status, None


def _asset_row(
    path: str,
    got: Fetched,
    *,
    release: Manifest | None,
    release_version: str | None,
    consensus: Mapping[str, str],
    index: Mapping[str, list[str]],
    cdn: Fetched | None,
    pages: frozenset[str] = frozenset(),
) -> AssetRow:
    """One file's row: its state against the release (or siblings) and the CDN.

    The expected hash comes from the release manifest when there is one, else from the
    siblings' majority (consensus findings), so consensus mode still shows a diffable row.
    """
    entry = release.files.get(path) if release is not None else None
    expected = entry.hashes.get("sha256") if entry is not None else consensus.get(path)
    expected_from = (
        f"release {release_version}"
        if entry is not None
        else ("siblings" if path in consensus else None)
    )
    fallback = is_fallback(got, path, pages) and got.sha256 != expected
    state = _asset_state(
        got, expected, fallback=fallback, unlisted=release is not None and entry is None
    )
    cdn_state, cdn_status, cdn_error = _cdn_state(
        got.sha256, cdn, path=path, pages=pages, expected=expected
    )
    served = got.ok and not fallback  # a fallback page is not this file's bytes
    why = FALLBACK if fallback else None
    return AssetRow(
        path=path,
        state=state,
        status=got.status,
        error=got.error or why or (f"HTTP {got.status}" if state == "error" else None),
        expected_sha256=expected,
        expected_from=expected_from,
        served_sha256=got.sha256 if served else None,
        size=got.size if served else None,
        expected_size=entry.size if entry is not None else None,
        matches=tuple(index.get(got.sha256 or "", ())) if served else (),
        cdn_state=cdn_state,
        cdn_status=cdn_status,
        cdn_sha256=cdn.sha256 if cdn is not None and cdn.ok else None,
        cdn_error=cdn_error,
        evidence=_evidence(got.headers),
        cdn_evidence=_evidence(cdn.headers) if cdn is not None and cdn.status else None,
        elapsed_ms=round(got.elapsed * 1000, 1),
        cdn_elapsed_ms=round(cdn.elapsed * 1000, 1) if cdn is not None else None,
        content_encoding=got.content_encoding,
    )


def _asset_state(got: Fetched, expected: str | None, *, fallback: bool, unlisted: bool) -> str:
    """same, differs, missing, error, unexpected (not in the release) or unchecked."""
    if got.error is not None or got.status is None:
        return "error"
    if got.status in MISSING or fallback:
        return "missing"
    if not got.ok or got.sha256 is None:
        return "error"
    if unlisted:
        return "unexpected"
    if expected is None:
        return "unchecked"
    return "same" if expected == got.sha256 else "differs"


_STATE_ORDER = {
    "differs": 0,
    "missing": 1,
    "unexpected": 2,
    "error": 3,
    "unchecked": 4,
    "same": 5,
    "not-fetched": 6,
}


def asset_rows(
    result: InstanceResult,
    *,
    releases: Mapping[str, Manifest],
    cdn_assets: Mapping[str, Fetched],
) -> tuple[AssetRow, ...]:
    """Every file of the target, problems first: expected, served and CDN side by side.

    Rows come from what was fetched (assets and the served manifest itself) plus the
    release's files that were not fetched, so nothing the release promises is silently
    absent from the table. Each served hash is looked up in every known release: "these
    bytes are 1.4.1's index-Bfu9pp8v.js" is the sentence that ends an incident.
    """
    obs = result.observation
    if obs is None:
        return ()
    version = result.reported_version
    release = releases.get(version) if version else None
    consensus = {
        f.path: f.expected
        for f in result.findings
        if f.kind is FindingKind.MINORITY_CONTENT and f.path and f.expected
    }
    index = _release_index(releases)
    pages = page_hashes(obs.assets, release)
    # an instance that could not be observed served nothing: its failed probe is no file
    fetched: dict[str, Fetched] = dict(obs.assets) if obs.error is None else {}
    if obs.manifest_fetch is not None and obs.manifest_path and obs.error is None:
        fetched.setdefault(obs.manifest_path, obs.manifest_fetch)
    rows = [
        _asset_row(
            path,
            got,
            release=release,
            release_version=version,
            consensus=consensus,
            index=index,
            cdn=cdn_assets.get(path),
            pages=pages,
        )
        for path, got in fetched.items()
    ]
    if release is not None:  # every file the release promises has a row
        for path in sorted(set(release.files) - set(fetched)):
            entry = release.files[path]
            rows.append(
                AssetRow(
                    path=path,
                    state="not-fetched",
                    expected_sha256=entry.hashes.get("sha256"),
                    expected_from=f"release {version}",
                    expected_size=entry.size,
                )
            )
    return tuple(sorted(rows, key=lambda r: (_STATE_ORDER.get(r.state, 9), r.path)))


def manifest_comparison(
    result: InstanceResult,
    rows: Sequence[AssetRow],
    *,
    releases: Mapping[str, Manifest],
    release_source: str | None,
) -> ManifestComparison:
    """Served files against the expected release, and which known release the bytes match.

    Formats that list every file (native) make an omission a removal; formats that list
    only chunks (Vite, webpack...) cannot, so the release files they do not mention are
    reported as "not compared" rather than guessed to be missing.
    """
    obs = result.observation
    version = result.reported_version
    release = releases.get(version) if version else None
    stale = any(f.kind is FindingKind.EXPECTATION_STALE for f in result.findings)
    unavailable = next(
        (f.message for f in result.findings if f.kind is FindingKind.EXPECTATION_UNAVAILABLE),
        None,
    )
    served = obs.manifest if obs is not None else None
    listed = set(served.files) if served is not None else set()
    by_state: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_state[r.state].append(r.path)
    added = set(by_state["unexpected"])
    removed = {r.path for r in rows if r.state == "missing" and r.expected_sha256}
    not_compared = set(by_state["not-fetched"])
    if release is not None and served is not None:
        added |= listed - set(release.files)
        if served.format == "native":  # a full listing: what it omits was removed
            removed |= not_compared
            not_compared = set()
    if obs is not None and obs.manifest_path and obs.error is None:
        not_compared.discard(obs.manifest_path)
    unobserved = obs is None or obs.error is not None
    return ManifestComparison(
        # the name probed when the connection failed was never served
        served_path="" if unobserved or obs is None else obs.manifest_path,
        served_format=served.format if served is not None else None,
        served_entries=len(served.files) if served is not None else None,
        served_error=obs.manifest_error if obs is not None else None,
        expected_version=version,
        expected_from=_expected_from(release, release_source, rows, version),
        expected_stale=stale,
        expected_error=unavailable,
        added=tuple(sorted(added)),
        removed=tuple(sorted(removed)),
        changed=tuple(sorted(by_state["differs"])),
        unchanged=len(by_state["same"]),
        not_compared=tuple(sorted(not_compared)),
        release_matches=_release_matches(releases, rows, version),
        # the release the differing files are from: the whole instance's when it serves
        # another release, else the one release all changed files come from (a mix)
        serves_version=result.serves_version
        or _mixed_with([r for r in rows if r.state == "differs"]),
    )


def _expected_from(
    release: Manifest | None,
    release_source: str | None,
    rows: Sequence[AssetRow],
    version: str | None,
) -> str | None:
    """Where the expectation came from: the release manifest, siblings, or nowhere."""
    if release is not None:
        return "release manifest"
    if release_source is None and any(r.expected_from == "siblings" for r in rows):
        return "siblings (consensus)"
    if release_source is None and version is not None:
        return "siblings (consensus)"
    return None


def _release_matches(
    releases: Mapping[str, Manifest], rows: Sequence[AssetRow], version: str | None
) -> tuple[ReleaseMatch, ...]:
    """How many observed files each known release has the bytes of, best match first."""
    observed = [r for r in rows if r.served_sha256]
    matches = []
    for v in sorted(releases):
        hashes = {e.hashes.get("sha256") for e in releases[v].files.values()}
        hits = sum(1 for r in observed if r.served_sha256 in hashes)
        if hits:
            matches.append(ReleaseMatch(version=v, matching=hits, total=len(observed)))
    matches.sort(key=lambda m: (-m.matching, m.version != version, m.version))
    return tuple(matches)


# --------------------------------------------------------------------------- signals


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


# --------------------------------------------------------------------------- siblings


def _does_the_same(target: InstanceResult, other: InstanceResult) -> bool:
    """Whether ``other`` serves what ``target`` serves: same version, same fingerprint.

    Unobserved instances have no fingerprint; they 'do the same' when equally unobserved.
    """
    if target.fingerprint is None:
        return other.fingerprint is None and other.verdict is target.verdict
    return (
        other.reported_version == target.reported_version
        and other.fingerprint == target.fingerprint
    )


def siblings(report: Report, target: InstanceResult) -> Siblings:
    """Who else does what the target does, where they run and when they started.

    One bad pod is a curiosity; three of twenty on one node, all started after the
    same minute, is a stale image cache or a bad rebuild, and tells on-call where to
    look next. Image digests are compared only among instances of the same version.
    """
    results = report.results
    same = [r for r in results if _does_the_same(target, r)]
    rest = [r for r in results if not _does_the_same(target, r)]
    version = target.reported_version
    same_version = [r for r in results if version is not None and r.reported_version == version]
    with_image = [r for r in same_version if r.instance.image_id]
    images = Counter(r.instance.image_id for r in with_image)
    majority = images.most_common(1)[0][0] if images else None
    image_same = sum(1 for r in with_image if r.instance.image_id == target.instance.image_id)
    starts = [r.instance.started_at for r in same]
    known_starts = [s for s in starts if s is not None]
    all_known = len(known_starts) == len(starts) and bool(known_starts)
    others = [r.instance.started_at for r in rest if r.instance.started_at is not None]
    return Siblings(
        noun=noun_for(r.instance for r in results),
        total=len(results),
        same=tuple(sorted((r.instance.name for r in same), key=natural)),
        same_version=len(same_version),
        same_version_same_content=sum(
            1 for r in same_version if r.fingerprint == target.fingerprint
        ),
        image_total=len(with_image),
        image_same=image_same if target.instance.image_id else 0,
        majority_image=majority,
        nodes=tuple(sorted({r.instance.node for r in same if r.instance.node})),
        first_started=min(known_starts) if all_known else None,
        last_started=max(known_starts) if all_known else None,
        others_last_started=max(others) if others else None,
    )


def _where_and_when(sib: Siblings, now: datetime, *, group_of: int) -> str:
    """The ", all on node X, all started after 12:04" tail, saying only what is known."""
    parts = []
    every = "all " if group_of > 1 else ""
    if sib.nodes and len(sib.nodes) == 1:
        parts.append(f"{every}on node {sib.nodes[0]}")
    elif sib.nodes and len(sib.nodes) <= 3:
        parts.append(f"on nodes {join_words(list(sib.nodes))}")
    if sib.first_started is not None and sib.last_started is not None:
        first, last = clock(sib.first_started, now), clock(sib.last_started, now)
        when = f"started {first}" if first == last else f"started between {first} and {last}"
        if group_of > 1 and first == last:
            when = f"all {when}"
        if sib.others_last_started is not None and sib.others_last_started < sib.first_started:
            when += ", after every other one"
        parts.append(when)
    return (", " + ", ".join(parts)) if parts else ""


# --------------------------------------------------------------------------- summary


def _cdn_clause(changed: Sequence[AssetRow], others_missing: Sequence[AssetRow]) -> str:
    """One clause: what the CDN has of the differing files, and which other files it lacks."""
    said = []
    states = {r.cdn_state for r in changed}
    if changed and states <= {"differs", "missing"}:
        said.append({1: "does not have it", 2: "has neither"}.get(len(changed), "has none of them"))
        origins = {r.expected_from for r in changed}
        if len(origins) == 1 and all(
            r.cdn_sha256 is not None and r.cdn_sha256 == r.expected_sha256 for r in changed
        ):
            said[-1] += f" (it has {next(iter(origins))}'s bytes)"
    elif changed and states == {"same"}:
        said.append("serves the same bytes")
    if others_missing:
        statuses = sorted({r.cdn_status for r in others_missing if r.cdn_status})
        said.append(
            f"answers {'/'.join(map(str, statuses))} for "
            f"{file_names([r.path for r in others_missing])}"
        )
    return f"the CDN {' and '.join(said)}" if said else ""


def _siblings_clause(sib: Siblings, target: InstanceResult, now: datetime) -> str:
    """The summary's 'N of M do the same' clause: the scale of the problem first."""
    n = len(sib.same)
    if sib.total <= 1:
        return "no siblings were checked to compare with"
    where = _where_and_when(sib, now, group_of=n)
    if target.verdict is Verdict.CONSISTENT:
        return f"{n} of {sib.total} {sib.noun} serve the same content{where}"
    if n == 1:
        return f"it is the only one of {sib.total} {sib.noun} doing so{where}"
    others = [name for name in sib.same if name != target.instance.name]
    names = f" ({join_words(others[:5])}{' and more' if len(others) > 5 else ''})"
    return f"{n} of {sib.total} {sib.noun} do the same{names}{where}"


def _mixed_with(changed: Sequence[AssetRow]) -> str | None:
    """The one other release every differing file's bytes belong to, if exactly one."""
    common: set[str] | None = None
    for row in changed:
        versions = {m.split(":", 1)[0] for m in row.matches}
        common = versions if common is None else common & versions
    if not common or len(common) != 1:
        return None
    return next(iter(common))


def summarise(
    result: InstanceResult,
    rows: Sequence[AssetRow],
    sib: Siblings,
    notes: Sequence[str],
    *,
    desired: str | None,
    now: datetime,
) -> str:
    """The one paragraph an on-call engineer reads first, in plain language.

    Built from the verdict and the rows, never from free text, so each clause is
    testable: who, what it claims, what it serves (and whose bytes those are), what the
    CDN has, how many siblings do the same, where and since when. Names are base names
    when unambiguous; what could not be checked is pointed to, not hidden.
    """
    clauses = _verdict_clauses(result, rows, desired=desired)
    sib_clause = _siblings_clause(sib, result, now)
    if sib_clause:
        clauses.append(sib_clause)
    text = "; ".join(c for c in clauses if c) + "."
    if any(n.startswith("could not check") for n in notes):
        text += " Could not check everything: see the notes below."
    return text


def _verdict_clauses(
    result: InstanceResult, rows: Sequence[AssetRow], *, desired: str | None
) -> list[str]:
    """The summary's clauses about the instance itself: what it claims and serves."""
    name = result.instance.name
    v = result.reported_version
    verdict = result.verdict
    if verdict is Verdict.UNREACHABLE:
        reason = result.reason.removeprefix("could not be observed: ")
        return [f"{name} could not be reached: {reason}"]
    if verdict is Verdict.MISMATCH:
        return _mismatch_clauses(result, rows)
    if verdict is Verdict.SIGNAL_CONFLICT:
        conflict = next(
            (f.message for f in result.findings if f.kind is FindingKind.SIGNAL_CONFLICT),
            result.reason,
        )
        return [f"{name}'s {conflict}"]
    if verdict is Verdict.DRIFT:
        return [f"{name} serves release {v} as it reports, but the desired version is {desired}"]
    if verdict in (Verdict.CDN_MISSING, Verdict.CDN_MISMATCH):
        return _cdn_verdict_clauses(result, rows)
    if verdict is Verdict.INCONCLUSIVE:
        return [f"{name} reports {v or '(no version)'} but could not be judged: {result.reason}"]
    same = sum(1 for r in rows if r.state == "same")
    how = f"release {v}" if result.reason.startswith("serves release") else "its siblings"
    return [f"{name} reports {v} and serves {how} ({plural(same, 'file')} verified)"]


def _cdn_missing(rows: Sequence[AssetRow]) -> list[AssetRow]:
    """Files the CDN lacks, among those the instance serves as expected."""
    return [r for r in rows if r.cdn_state == "missing" and r.state != "differs"]


def _mismatch_clauses(result: InstanceResult, rows: Sequence[AssetRow]) -> list[str]:
    """What a mismatching instance serves instead, whose bytes those are, and the CDN."""
    v = result.reported_version
    changed = [r for r in rows if r.state == "differs"]
    missing = [r for r in rows if r.state == "missing"]
    added = [r for r in rows if r.state == "unexpected"]
    head = f"{result.instance.name} reports {v or '(no version)'} but serves "
    mixed = _mixed_with(changed)
    if result.serves_version and changed:
        head += f"{result.serves_version}'s {file_names([r.path for r in changed])}"
    elif changed and mixed is not None:
        # the differing files are another release's, the others this one's: a mix,
        # so the instance as a whole is not said to serve that release
        head += (
            f"{mixed}'s {file_names([r.path for r in changed])} "
            f"mixed with release {v}'s other files"
        )
    elif changed:
        head += (
            f"different bytes for {file_names([r.path for r in changed])} "
            "(matching no known release)"
        )
    else:
        head += "different content"
    extra = []
    if missing:
        extra.append(f"answers {missing[0].status} for {file_names([r.path for r in missing])}")
    if added:
        extra.append(f"serves {plural(len(added), 'file')} the release lacks")
    clauses = [head + (f", and {join_words(extra)}" if extra else "")]
    cdn = _cdn_clause(changed, _cdn_missing(rows))
    if cdn:
        clauses.append(cdn)
    return clauses


def _cdn_verdict_clauses(result: InstanceResult, rows: Sequence[AssetRow]) -> list[str]:
    """An instance right for its version whose CDN lacks files or serves other bytes."""
    v = result.reported_version
    clauses = [f"{result.instance.name} reports {v} and serves release {v}"]
    cdn_missing = _cdn_missing(rows)
    if cdn_missing:
        clauses.append(_cdn_clause([], cdn_missing))
    differs = [r for r in rows if r.cdn_state == "differs"]
    if differs:
        clauses.append(f"the CDN serves other bytes for {file_names([r.path for r in differs])}")
    return clauses


# --------------------------------------------------------------------------- notes


def _sampled_files(report: Report) -> str:
    """ " in the files sampled (...)" when only some files of each instance were fetched:
    agreement on a sample is not agreement on the content."""
    sample = report.sample
    if sample is None or sample.assets_per_instance is None:
        return ""
    return (
        f" in the files sampled ({sample.assets_per_instance} per instance besides entry "
        f"points, seed {sample.seed})"
    )


def _fleet_notes(report: Report, *, release_source: str | None) -> list[str]:
    """'could not check' notes from the run's fleet-wide findings and configuration.

    A missing CDN or release source is said, not silently skipped: a quiet check that
    checked nothing is how a tired human is misled.
    """
    notes: list[str] = []
    sample = report.sample
    if sample is not None and sample.instances_checked < sample.instances_total:
        notes.append(
            f"could not check every instance: {sample.instances_checked} of "
            f"{sample.instances_total} sampled (seed {sample.seed}; repeat with --seed)"
        )
    if sample is not None and sample.assets_per_instance is not None:
        notes.append(
            f"could not check every file: {sample.assets_per_instance} per instance besides "
            f"entry points were sampled (seed {sample.seed}; repeat with --seed)"
        )
    if report.cdn is None:
        notes.append("could not check the CDN: none configured (give --cdn)")
    if release_source is None:
        notes.append(
            "could not check against a release: no release source configured, so "
            "instances are compared with their siblings only (consensus)"
        )
    for f in report.findings:
        if f.kind is FindingKind.OBSERVATION_FAILED:
            notes.append(f"could not check: {f.message}")
        elif f.kind is FindingKind.EXPECTATION_UNAVAILABLE:
            notes.append(f"could not check against the release: {f.message}")
        elif f.kind is FindingKind.EXPECTATION_STALE:
            notes.append(f"checked against an old copy: {f.message}")
        elif f.kind is FindingKind.SUSPECT_EXPECTATION:
            notes.append(f"the expectation itself is suspect: {f.message}")
        elif f.kind is FindingKind.RELEASE_CHANGED:
            notes.append(f"the release itself changed: {f.message}")
        elif f.kind is FindingKind.RELEASE_UNTRUSTED:
            notes.append(f"could not trust the release: {f.message}")
    return notes


def _instance_notes(result: InstanceResult) -> list[str]:
    """'could not check' notes about the target itself (files, endpoint, reachability)."""
    notes = []
    for f in result.findings:
        if f.kind is FindingKind.OBSERVATION_FAILED:
            notes.append(f"could not check: {f.message}")
    obs = result.observation
    if obs is not None and obs.endpoint_error:
        notes.append(f"could not check the version endpoint: {obs.endpoint_error}")
    if result.verdict is Verdict.UNREACHABLE:
        notes.append(f"could not check the instance at all: {result.reason}")
    return notes


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    """Keep the first of each note, in order (a fleet note can repeat per instance)."""
    return tuple(dict.fromkeys(items))


# --------------------------------------------------------------------------- TLS, pod


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


# --------------------------------------------------------------------------- builders


def build_investigation(
    report: Report,
    target: str,
    *,
    releases: Mapping[str, Manifest],
    cdn_assets: Mapping[str, Fetched] | None = None,
    tls: Sequence[TlsView] = (),
    events: Sequence[PodEvent] = (),
    events_note: str | None = None,
    condition_type: str = DEFAULT_CONDITION_TYPE,
    release_source: str | None = None,
    now: datetime,
) -> Investigation:
    """The investigation of instance ``target`` (its name) from a whole-fleet report.

    ``releases`` are the manifests the check loaded (expected and known versions),
    ``cdn_assets`` what the CDN answered per path; TLS views and pod Events are read by
    the caller, which does the I/O. ``now`` is a parameter so ages and clock times are
    reproducible.
    """
    result = next((r for r in report.results if r.instance.name == target), None)
    if result is None:
        raise ValueError(f"{target} is not in the report")
    rows = asset_rows(result, releases=releases, cdn_assets=cdn_assets or {})
    signals, agree = signal_rows(result)
    sib = siblings(report, result)
    notes = _dedupe(
        [*_fleet_notes(report, release_source=release_source), *_instance_notes(result)]
    )
    summary = summarise(result, rows, sib, notes, desired=report.desired_version, now=now)
    return Investigation(
        target=result.instance,
        url=result.instance.base_url,
        verdict=result.verdict,
        reason=result.reason,
        summary=summary,
        reported_version=result.reported_version,
        serves_version=result.serves_version,
        fingerprint=result.fingerprint,
        signals=signals,
        signals_agree=agree,
        siblings=sib,
        manifest=manifest_comparison(
            result, rows, releases=releases, release_source=release_source
        ),
        assets=rows,
        tls=tuple(tls),
        pod=pod_view(
            result.instance, condition_type=condition_type, events=events, events_note=events_note
        ),
        findings=result.findings,
        notes=notes,
        diffs=(),
        generated_at=now,
        elapsed=report.elapsed,
        requests=report.requests,
        counts={k: v for k, v in report.counts().items() if v},
        desired_version=report.desired_version,
        cdn=report.cdn,
        release_source=release_source,
    )


def build_fleet(report: Report, *, release_source: str | None, now: datetime) -> FleetView:
    """Instances grouped by (version, content, image), largest first, odd groups marked.

    Oddness is judged per reported version, against the majority of that version's
    instances: the whole point is that the version labels agree while the content does
    not. Headlines state each disagreement as a sentence ("2 of 14 pods of 1.4.2 serve
    different content") because a table of fingerprints does not jump out at 3 a.m.
    """
    results = report.results
    noun = noun_for(r.instance for r in results)
    by_version: dict[str | None, list[InstanceResult]] = defaultdict(list)
    for r in results:
        by_version[r.reported_version].append(r)
    top_content: dict[str | None, str | None] = {}
    top_image: dict[str | None, str | None] = {}
    headlines: list[str] = []
    for version, members in _largest_first(by_version):
        top_content[version], top_image[version], said = _version_headlines(
            version, members, noun, report
        )
        headlines.extend(said)
    headlines.extend(_fleet_headlines(report, by_version, noun))
    groups = _fleet_groups(report, top_content, top_image, by_version, noun)
    return FleetView(
        noun=noun,
        total=len(results),
        groups=tuple(groups),
        headlines=tuple(headlines),
        counts={k: v for k, v in report.counts().items() if v},
        notes=_dedupe(_fleet_notes(report, release_source=release_source)),
        generated_at=now,
        elapsed=report.elapsed,
        requests=report.requests,
        exit_code=report.exit_code,
        desired_version=report.desired_version,
        cdn=report.cdn,
        release_source=release_source,
    )


def _largest_first(
    by_version: Mapping[str | None, list[InstanceResult]],
) -> list[tuple[str | None, list[InstanceResult]]]:
    """Versions with the most instances first, then by name."""
    return sorted(by_version.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))


def _version_headlines(
    version: str | None, members: Sequence[InstanceResult], noun: str, report: Report
) -> tuple[str | None, str | None, list[str]]:
    """The majority content and image of one version's instances, and the headlines
    saying where they disagree (or that all agree)."""
    label = f"of {version}" if version is not None else "reporting no version"
    headlines: list[str] = []
    observed = [r for r in members if r.fingerprint is not None]
    content = Counter(r.fingerprint for r in observed).most_common()
    top_content = _unique_top(content)
    if len(content) > 1:
        if top_content is None:
            headlines.append(f"{len(observed)} {noun} {label} disagree on content with no majority")
        else:
            odd = len(observed) - content[0][1]
            headlines.append(
                f"{odd} of {len(observed)} {noun} {label} "
                f"{_verb(odd, 'serves', 'serve')} different content"
            )
    elif len(observed) > 1:
        headlines.append(
            f"All {len(observed)} observed {noun} {label} serve the same content"
            + _sampled_files(report)
        )
    images = Counter(r.instance.image_id for r in members if r.instance.image_id).most_common()
    top_image = _unique_top(images)
    if len(images) > 1:
        with_image = sum(n for _, n in images)
        odd = with_image - images[0][1]
        headlines.append(
            f"{odd} of {with_image} {noun} {label} {_verb(odd, 'runs', 'run')} a different "
            "image digest"
        )
    unobserved = len(members) - len(observed)
    if unobserved:
        headlines.append(f"{unobserved} of {len(members)} {noun} {label} could not be observed")
    return top_content, top_image, headlines


def _fleet_headlines(
    report: Report, by_version: Mapping[str | None, list[InstanceResult]], noun: str
) -> list[str]:
    """The verdicts that are not consistent, and the versions reported, when several."""
    headlines = []
    results = report.results
    bad = {k: v for k, v in report.counts().items() if v and k != Verdict.CONSISTENT.value}
    if bad and results:
        said = ", ".join(f"{v} {k}" for k, v in bad.items())
        headlines.append(f"Verdicts of {len(results)} {noun}: {said}")
    if len(by_version) > 1:
        shown = ", ".join(f"{v or '(none)'} ({len(m)})" for v, m in _largest_first(by_version))
        desired = f"; desired {report.desired_version}" if report.desired_version else ""
        headlines.append(f"{len(by_version)} versions reported: {shown}{desired}")
    return headlines


def _fleet_groups(
    report: Report,
    top_content: Mapping[str | None, str | None],
    top_image: Mapping[str | None, str | None],
    by_version: Mapping[str | None, Sequence[InstanceResult]],
    noun: str,
) -> list[FleetGroup]:
    """One group per (version, content, image), largest first, odd ones marked."""
    keyed: dict[tuple[str | None, str | None, str | None], list[InstanceResult]] = defaultdict(list)
    for r in report.results:
        keyed[(r.reported_version, r.fingerprint, r.instance.image_id)].append(r)
    groups = []
    for (version, fp, image), members in keyed.items():
        odd, why = _oddity(version, fp, image, top_content, top_image, by_version, noun)
        starts = [m.instance.started_at for m in members if m.instance.started_at is not None]
        serves = Counter(m.serves_version for m in members if m.serves_version).most_common(1)
        groups.append(
            FleetGroup(
                version=version,
                fingerprint=fp,
                image_id=image,
                instances=tuple(sorted((m.instance.name for m in members), key=natural)),
                verdicts=dict(Counter(m.verdict.value for m in members).most_common()),
                serves_version=serves[0][0] if serves else None,
                nodes=tuple(sorted({m.instance.node for m in members if m.instance.node})),
                owners=tuple(sorted({m.instance.owner for m in members if m.instance.owner})),
                first_started=min(starts) if starts else None,
                last_started=max(starts) if starts else None,
                odd=odd,
                why=why,
            )
        )
    groups.sort(key=lambda g: (-g.count, g.odd, str(g.version), str(g.fingerprint)))
    return groups


def _unique_top(counted: Sequence[tuple[str | None, int]]) -> str | None:
    """The most common value when strictly more common than the next, else None."""
    if not counted:
        return None
    if len(counted) > 1 and counted[0][1] == counted[1][1]:
        return None
    return counted[0][0]


def _oddity(
    version: str | None,
    fp: str | None,
    image: str | None,
    top_content: Mapping[str | None, str | None],
    top_image: Mapping[str | None, str | None],
    by_version: Mapping[str | None, Sequence[InstanceResult]],
    noun: str,
) -> tuple[bool, str]:
    """Whether a group stands out among the instances reporting its version, and why."""
    members = by_version[version]
    label = version or "(no version)"
    if fp is None:
        return True, "could not be observed"
    fingerprints = {r.fingerprint for r in members if r.fingerprint is not None}
    if len(fingerprints) > 1:
        top = top_content[version]
        if top is None:
            return True, f"{noun} of {label} disagree with no majority"
        if fp != top:
            same = sum(1 for r in members if r.fingerprint == top)
            return True, f"content differs from {same} of {len(members)} {noun} of {label}"
    images = {r.instance.image_id for r in members if r.instance.image_id}
    if image is not None and len(images) > 1 and image != top_image[version]:
        return True, f"image digest differs from most {noun} of {label}"
    return False, ""


# --------------------------------------------------------------------------- diffs


_BREAK = re.compile(r"(?<=[;{}])")


def _reflow(text: str, width: int = 100) -> list[str]:
    """Lines for diffing; minified lines are broken after ``; { }`` so a diff is readable."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        piece = ""
        for part in _BREAK.split(line):
            if piece and len(piece) + len(part) > width:
                out.append(piece)
                piece = ""
            piece += part
            while len(piece) > width * 2:  # no separator for a long stretch: hard wrap
                out.append(piece[:width])
                piece = piece[width:]
        if piece:
            out.append(piece)
    return out


def text_diff(
    path: str,
    expected: bytes,
    served: bytes,
    *,
    expected_source: str,
    max_lines: int = 40,
) -> DiffView:
    """A unified diff (difflib) of expected against served, the first ``max_lines`` lines.

    Bundles are minified onto one line, where a line diff says only "everything
    changed"; both sides are broken at the same statement boundaries first so the diff
    points at the changed statement. Bytes that decode to the same text are said to.
    """
    a = expected.decode("utf-8", errors="replace")
    b = served.decode("utf-8", errors="replace")
    left, right = _reflow(a), _reflow(b)
    reflowed = len(left) != len(a.splitlines()) or len(right) != len(b.splitlines())
    lines = [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            left, right, fromfile=f"expected/{path}", tofile=f"served/{path}", lineterm="", n=2
        )
    ]
    note = None
    if reflowed:
        note = "long minified lines were broken after ; { } to make the diff readable"
    if not lines:
        note = "the bytes differ but the text is the same (encoding or line endings)"
    return DiffView(
        path=path,
        expected_source=expected_source,
        lines=tuple(lines[:max_lines]),
        truncated=max(0, len(lines) - max_lines),
        note=note,
    )


@dataclass(frozen=True, slots=True)
class DiffPlan:
    """Where to fetch the expected bytes of one mismatching text file from."""

    path: str
    expected_sha256: str
    served_sha256: str | None
    sources: tuple[tuple[str, str], ...]  # (label, base_url), best first


def diff_plans(
    inv: Investigation, report: Report, cdn_assets: Mapping[str, Fetched]
) -> tuple[DiffPlan, ...]:
    """For each mismatching text file: siblings that serve the expected bytes, then the CDN.

    Only sources whose observed sha256 equals the expected one qualify, so the diff is
    against the real expected bytes, never against another wrong copy.
    """
    plans = []
    for row in inv.assets:
        if row.state != "differs" or not row.is_text or row.expected_sha256 is None:
            continue
        sources: list[tuple[str, str]] = []
        for r in report.results:
            if r.instance.name == inv.target.name or r.observation is None:
                continue
            got = r.observation.assets.get(row.path)
            if got is None and r.observation.manifest_path == row.path:
                got = r.observation.manifest_fetch
            if got is not None and got.ok and got.sha256 == row.expected_sha256:
                label = f"sibling {r.instance.name}"
                if r.instance.name != r.instance.base_url:
                    label += f" ({r.instance.base_url})"
                sources.append((label, r.instance.base_url))
        on_cdn = cdn_assets.get(row.path)
        if (
            inv.cdn is not None
            and on_cdn is not None
            and on_cdn.ok
            and on_cdn.sha256 == row.expected_sha256
        ):
            sources.append((f"CDN {inv.cdn}", inv.cdn))
        plans.append(
            DiffPlan(
                path=row.path,
                expected_sha256=row.expected_sha256,
                served_sha256=row.served_sha256,
                sources=tuple(sources[:3]),
            )
        )
    return tuple(plans)
