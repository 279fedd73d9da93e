"""Frozen values that flow through artifactcheck, one stage to the next.

::

    discover -> sample -> fetch -> compare -> decide -> act / report
     Instance    Instance  Observation  Finding   InstanceResult  Action, Report

They are frozen records (:mod:`artifactcheck.model.records`) rather than pydantic
models: a fleet check builds hundreds of thousands of manifest entries, and these values
never come from untrusted input directly (readers and settings validate first).
Configuration, which does come from users, lives in :mod:`artifactcheck.model.settings`
as pydantic models.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator, Mapping
from datetime import datetime

from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import Record, field
from artifactcheck.model.skew import PreviousServed

# A verdict's home is model/verdicts; the names every stage reads are re-exported here.
from artifactcheck.model.verdicts import BAD_VERDICTS as BAD_VERDICTS
from artifactcheck.model.verdicts import UNKNOWN_VERDICTS as UNKNOWN_VERDICTS
from artifactcheck.model.verdicts import VOUCHING
from artifactcheck.model.verdicts import Verdict as Verdict


class Severity(enum.StrEnum):
    """How loud a finding is; ``alert`` is for a human, never an automatic action."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    ALERT = "alert"


class FindingKind(enum.StrEnum):
    """Every kind of discrepancy artifactcheck can report."""

    CONTENT_DIFFERS = "content-differs"  # served bytes differ from the expected release
    FILE_MISSING = "file-missing"  # in the release, not served (404 or absent from manifest)
    FILE_UNEXPECTED = "file-unexpected"  # served manifest lists a file the release lacks
    INTEGRITY_FAILED = "integrity-failed"  # bytes differ from the served manifest's own hash
    SERVES_OTHER_RELEASE = "serves-other-release"  # content matches another known release
    CDN_MISSING = "cdn-missing"
    CDN_DIFFERS = "cdn-differs"
    SIGNAL_CONFLICT = "signal-conflict"  # label says X, endpoint says Y
    IMAGE_DIVERGES = "image-diverges"  # same version, different image digests
    MINORITY_CONTENT = "minority-content"  # consensus: differs from its siblings
    NO_CONSENSUS = "no-consensus"  # consensus: siblings disagree with no majority
    DRIFT = "drift"  # consistent, but not the desired version
    MANIFEST_INVALID = "manifest-invalid"  # served manifest unreadable / over limits
    UNSAFE_REFERENCE = "unsafe-reference"  # manifest points outside the base URL
    UNREACHABLE = "unreachable"
    OBSERVATION_FAILED = "observation-failed"  # an asset could not be fetched
    EXPECTATION_UNAVAILABLE = "expectation-unavailable"
    EXPECTATION_STALE = "expectation-stale"  # last known good copy was used
    NO_VERSION = "no-version"  # the instance reports no version
    SUSPECT_EXPECTATION = "suspect-expectation"  # most of a workload disagrees
    TLS_EXPIRING = "tls-expiring"
    NOT_GATED = "not-gated"  # pod lacks the readiness gate: flag only
    ACTION_HELD = "action-held"  # a safety limit (cap, floor, rate) withheld an action
    NODE_SUSPECT = "node-suspect"  # a node serves stale content; cordon capped or off
    NOT_COMPARED = "not-compared"  # a release file was not compared, with the reason
    MANIFEST_MISSING = "manifest-missing"  # the served manifest could not be fetched
    NAMES_ONLY = "names-only"  # the release source carries no hashes: names compared only
    INVALID_VERSION = "invalid-version"  # the reported version fails the version grammar
    FALLBACK_PAGE = "fallback-page"  # a missing file answered with the site's HTML page
    SAMPLED = "sampled"  # only a sample of files or instances was checked
    CHECK_FAILED = "check-failed"  # an unexpected error while observing one instance
    RELEASE_CHANGED = "release-changed"  # a pinned version's release manifest changed
    RELEASE_UNTRUSTED = "release-untrusted"  # no valid signature by a release key
    LAYOUT = "layout"  # where the release's files are served: a prefix detected, or wrong
    SKEW_MISSING = "skew-missing"  # a previous release's file is gone (CDN or instance)
    SKEW_DIFFERS = "skew-differs"  # a previous release's file has other bytes


class VersionSignal(Record):
    """One place an instance reports its version, e.g. a label or ``/version``."""

    source: str  # "target", "label:app.kubernetes.io/version", "endpoint:/version#/v"
    value: str


class Instance(Record):
    """One serving unit: a pod, a container or a bare URL."""

    name: str
    base_url: str  # always ends with "/"
    kind: str = "url"  # "url" | "pod" | "container"
    signals: tuple[VersionSignal, ...] = ()
    namespace: str | None = None
    node: str | None = None
    owner: str | None = None  # ReplicaSet / compose service
    image: str | None = None
    image_id: str | None = None
    started_at: datetime | None = None
    has_readiness_gate: bool = False
    uid: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    gate_status: str | None = None  # the readiness-gate condition: "True", "False", None
    ready: bool = True  # serving traffic now (pod Ready)

    @property
    def reported_version(self) -> str | None:
        """The first version signal, the one the instance is judged against."""
        return self.signals[0].value if self.signals else None


class Sha256Hashes(Mapping[str, str]):
    """``{"sha256": hex}`` held as the 32-byte digest: the hashes of a native entry.

    A release manifest cache holds tens of versions of tens of thousands of entries,
    nearly all carrying only a sha256. As a dict of one 64-character string an entry is
    several times the size of this read-only mapping, which reads as the same mapping
    (lowercase hex, equal to the dict it replaces, same repr), so no caller changes.
    See docs/benchmarks.md for the measurements.
    """

    __slots__ = ("digest",)

    digest: bytes

    def __init__(self, digest: bytes) -> None:
        if len(digest) != 32:
            raise ValueError("a sha256 digest is 32 bytes")
        object.__setattr__(self, "digest", bytes(digest))

    @classmethod
    def from_hex(cls, sha256: str) -> Mapping[str, str]:
        """The compact form of a 64-digit hex sha256; a plain dict for anything else,
        so a value that is not a well-formed digest is kept exactly as it was given."""
        if len(sha256) == 64:
            try:
                digest = bytes.fromhex(sha256)
            except ValueError:
                return {"sha256": sha256}
            if digest.hex() == sha256:  # lowercase, no whitespace: it reads back the same
                return cls(digest)
        return {"sha256": sha256}

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> str:
        if key == "sha256":
            return self.digest.hex()
        raise KeyError(key)

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """The hex digest for ``"sha256"``, else ``default`` (the hot path of comparisons)."""
        return self.digest.hex() if key == "sha256" else default

    def __contains__(self, key: object) -> bool:
        return key == "sha256"

    def __iter__(self) -> Iterator[str]:
        yield "sha256"

    def __len__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sha256Hashes):
            return self.digest == other.digest
        if isinstance(other, Mapping):
            return len(other) == 1 and other.get("sha256") == self.digest.hex()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return repr({"sha256": self.digest.hex()})

    def __reduce__(self) -> tuple[type[Sha256Hashes], tuple[bytes]]:
        return (Sha256Hashes, (self.digest,))


def is_entry_page(path: str) -> bool:
    """An entry page (``index.html`` anywhere): the bytes a fallback serves."""
    return path == "index.html" or path.endswith("/index.html")


#: A file name's ending -> the content coding its bytes are stored in: a precompressed
#: sibling (Sprockets' ``x-<digest>.css.gz``, ``gzip -k``, ``brotli``, ``zstd``).
STORED_CODINGS: Mapping[str, str] = {".gz": "gzip", ".br": "br", ".zst": "zstd"}


class ManifestEntry(Record):
    """One file a manifest promises, with whatever hashes the format carries."""

    path: str  # relative to the base URL, no leading "/", normalised
    hashes: Mapping[str, str] = field(default_factory=dict)  # algorithm -> lowercase hex
    size: int | None = None
    entry: bool = False  # an entry point: always sampled
    logical: str | None = None  # source name, e.g. "src/main.ts"
    #: Precompressed siblings (``x.css.gz`` beside ``x.css``): content coding -> the
    #: sibling's own entry (its path, the hashes and size of its stored bytes).
    encodings: Mapping[str, ManifestEntry] = field(default_factory=dict)


class Manifest(Record, dict=True):
    """A normalised manifest: the release's expected files or what an instance serves.

    ``dict=True`` gives each manifest a ``__dict__`` beside its fields, where
    :attr:`page_hashes` keeps what it worked out; it takes no part in equality,
    hashing, ``repr``, pickling or :func:`~artifactcheck.model.records.replace`.
    """

    format: str  # "native", "vite", "webpack-manifest", "cra", ...
    files: Mapping[str, ManifestEntry]
    version: str | None = None
    source: str | None = None  # file path or URL it was read from
    image_id: str | None = None  # when built from a container image
    rejected: tuple[tuple[str, str], ...] = ()  # (raw path, why) refused as unsafe

    @property
    def page_hashes(self) -> frozenset[str]:
        """sha256 of the entry pages listed (``index.html`` anywhere): the bytes an SPA
        fallback answers with. Worked out once per manifest, not once per instance
        judged against it (a walk over every file of the release each time)."""
        pages: frozenset[str] | None = self.__dict__.get("page_hashes")
        if pages is None:
            found = {e.hashes.get("sha256") for p, e in self.files.items() if is_entry_page(p)}
            pages = self.__dict__["page_hashes"] = frozenset(s for s in found if s)
        return pages

    @property
    def has_hashes(self) -> bool:
        """True when at least one entry carries a content hash."""
        return any(e.hashes for e in self.files.values())

    def fingerprint(self) -> str:
        """A short stable digest of the file list and hashes, for grouping."""
        h = hashlib.sha256()
        for path in sorted(self.files):
            entry = self.files[path]
            h.update(path.encode())
            h.update(b"\0")
            for algo in sorted(entry.hashes):
                h.update(f"{algo}={entry.hashes[algo]};".encode())
            h.update(b"\n")
        return h.hexdigest()[:16]


class CertInfo(Record):
    """The TLS certificate an endpoint presented."""

    endpoint: str
    subject: str
    issuer: str
    not_after: datetime


class Fetched(Record):
    """What one GET observed: a status and body digests, or why it could not."""

    url: str
    path: str
    status: int | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)  # always "sha256" when a body was read
    size: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # evidence headers only
    elapsed: float = 0.0
    error: str | None = None  # set when nothing could be observed
    error_kind: ErrorKind | None = None  # set with ``error``
    attempts: int = 1
    content_encoding: str | None = None  # what the server sent, before decoding
    body: bytes | None = None  # only kept for small documents (manifests, /version)
    #: Every compared coding's answer (coding asked for -> answer) when a client could
    #: tell them apart; empty when one coding was compared or all answered alike.
    codings: Mapping[str, Fetched] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when a 2xx body was read completely."""
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def sha256(self) -> str | None:
        """The sha256 of the body, when one was read."""
        return self.hashes.get("sha256")

    @property
    def unreachable(self) -> bool:
        """True when nothing answered (:attr:`ErrorKind.unreachable`)."""
        return self.error_kind is not None and ErrorKind(self.error_kind).unreachable


class Layout(Record):
    """Where an instance's release files were looked for, relative to its base URL.

    ``prefix`` is the directory the files were fetched under (``static/``; ``""``: the
    base URL itself); ``detected`` when probing chose it rather than the spec.
    ``found_at`` is where they were found when not under ``prefix`` (the prefix to
    use), and ``tried`` the prefixes probed when they were found nowhere.
    """

    prefix: str = ""
    detected: bool = False
    found_at: str | None = None
    tried: tuple[str, ...] = ()


class PageLoad(Record):
    """A file the instance's entry pages make a browser load (the page as a source).

    ``loaded_by`` names the entry pages that lead to it, in their configured order
    ("/", "/login"); ``integrity`` the ``(algorithm, hex)`` pairs of the first
    ``integrity=`` attribute a page gives it, and ``integrity_page`` that page: browsers
    refuse bytes that do not match it, whatever any release says.
    """

    loaded_by: tuple[str, ...]
    integrity: tuple[tuple[str, str], ...] = ()
    integrity_page: str | None = None


class Observation(Record):
    """Everything fetched from one instance (or the CDN) in one check."""

    instance: Instance
    manifest_path: str
    manifest: Manifest | None = None
    manifest_fetch: Fetched | None = None
    manifest_error: str | None = None  # the served manifest was unreadable/hostile
    assets: Mapping[str, Fetched] = field(default_factory=dict)
    unsafe_paths: tuple[str, ...] = ()  # manifest entries rejected as off-base
    endpoint_version: str | None = None
    endpoint_error: str | None = None
    endpoint_note: str | None = None  # how the version was read (no JSON pointer given)
    tls: CertInfo | None = None
    error: str | None = None  # the instance could not be observed at all
    error_kind: ErrorKind | None = None  # set with ``error``
    elapsed: float = 0.0
    #: ``assets`` is a sample: the release files not fetched were sampled out on purpose.
    sampled: bool = False
    #: Content codings whose (decoded) bytes the assets hold, reported in the coverage.
    encodings: tuple[str, ...] = ("identity",)
    #: Assets fetched from the CDN because the served manifest references them there
    #: by absolute URL (webpack ``publicPath``): path under the CDN base -> the reference.
    on_cdn: Mapping[str, str] = field(default_factory=dict)
    #: Where the release's files were fetched under the instance's base URL.
    layout: Layout = field(default_factory=Layout)
    #: What the entry pages load, by the path in ``assets`` (or ``on_cdn``) it was
    #: fetched as; other origins' URLs listed, never requested; why a page or
    #: stylesheet is unreadable (hostile: over a cap, undecodable), or did not answer.
    page_loads: Mapping[str, PageLoad] = field(default_factory=dict)
    page_elsewhere: tuple[str, ...] = ()
    page_problems: tuple[str, ...] = ()
    page_failures: tuple[str, ...] = ()


class Finding(Record):
    """One concrete discrepancy, with the evidence to act on it."""

    kind: FindingKind
    message: str
    instance: str | None = None  # instance name; None for fleet-wide findings
    path: str | None = None
    expected: str | None = None
    actual: str | None = None
    severity: Severity = Severity.ERROR


class Coverage(Record):
    """What of the expected release was compared for one instance, and what was not.

    Every file of the expected release is accounted for: compared, or listed in
    ``not_compared`` with the reason (sampled out, not referenced by the served
    manifest, the served manifest missing, not fetched).
    """

    compared: int = 0
    total: int = 0
    not_compared: tuple[tuple[str, str], ...] = ()  # (path, why)
    encodings: tuple[str, ...] = ("identity",)  # content codings whose bytes were compared
    hashes: tuple[str, ...] = ("sha256",)  # the release's hashes compared ("sha1": ngsw.json)

    @property
    def complete(self) -> bool:
        """True when every file of the expected release was compared."""
        return self.total > 0 and self.compared >= self.total and not self.not_compared


class SampleInfo(Record):
    """How a run sampled: reported so a partial check never reads as a complete one."""

    seed: int | None = None
    instances_checked: int = 0
    instances_total: int = 0
    assets_per_instance: int | None = None  # None: every file


class InstanceResult(Record):
    """The verdict on one instance and the findings behind it."""

    instance: Instance
    verdict: Verdict
    reason: str
    findings: tuple[Finding, ...] = ()
    reported_version: str | None = None
    serves_version: str | None = None  # the known release its content matches
    fingerprint: str | None = None
    observation: Observation | None = None
    coverage: Coverage | None = None
    #: The instance's own bytes were compared with an expectation that vouches for them
    #: (a release with content hashes, or at least two agreeing siblings) and nothing
    #: spoke against them. ``None`` (results built by hand): derived from the verdict.
    content_verified: bool | None = None
    #: The files of the one other release the content matches that were never fetched:
    #: "serves X" needs all of X's files seen, so the pipeline fetches these once and
    #: judges again (:func:`artifactcheck.pipeline.judge`).
    unconfirmed: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """True when the content is known right for its version: a gate may open on it."""
        if self.content_verified is not None:
            return self.content_verified
        return self.verdict in VOUCHING


class ActionKind(enum.StrEnum):
    """What policy decided to do about an instance."""

    NONE = "none"
    FLAG = "flag"
    QUARANTINE = "quarantine"
    RELEASE = "release"  # undo a quarantine / open the gate of a verified pod
    UNFLAG = "unflag"
    CORDON = "cordon"
    UNCORDON = "uncordon"


class Action(Record):
    """A decided action; ``dry_run`` actions are reported but never performed."""

    kind: ActionKind
    target: str
    reason: str
    dry_run: bool = False
    files: tuple[str, ...] = ()
    #: A release that opens a gate without verification, by the fail-open policy (the
    #: actor writes ``VerificationUnavailable`` rather than ``ContentVerified``).
    fail_open: bool = False
    #: A flag an earlier leader made (the pod's annotations show it), made once more so
    #: that its Event is written if that leader died before writing it. The earlier
    #: leader's rate limit counted it, so this one's does not: a new leader's budget
    #: goes to new quarantines, not to repeating old flags.
    inherited: bool = False


class Expectation(Record):
    """The expected release for one version, and how fresh it is."""

    version: str
    manifest: Manifest | None
    stale: bool = False  # last known good copy used because the source failed
    error: str | None = None  # why it could not be (freshly) obtained


class Report(Record):
    """The result of one check run, the input of every report format."""

    results: tuple[InstanceResult, ...]
    findings: tuple[Finding, ...] = ()  # fleet-wide findings (CDN, expectation, alerts)
    actions: tuple[Action, ...] = ()
    started_at: datetime | None = None
    elapsed: float = 0.0
    desired_version: str | None = None
    cdn: str | None = None
    requests: int = 0
    retries: int = 0
    sample: SampleInfo | None = None
    names_only: bool = False  # the release source vouches for file names, not bytes
    previous: tuple[PreviousServed, ...] = ()  # previous releases still served (skew)

    def counts(self) -> dict[str, int]:
        """Number of instances per verdict, every verdict present."""
        out = {v.value: 0 for v in Verdict}
        for r in self.results:
            out[r.verdict.value] += 1
        return out

    @property
    def exit_code(self) -> int:
        """0 consistent, 1 something served is wrong, 3 could not judge."""
        verdicts = {r.verdict for r in self.results}
        if verdicts & BAD_VERDICTS:
            return 1
        if any(f.kind is FindingKind.RELEASE_CHANGED for f in self.findings):
            return 1  # a published release was rebuilt: never 0, whatever was judged
        if any(p.wrong for p in self.previous):
            return 1  # pages open in browsers ask for files that are gone
        if verdicts & UNKNOWN_VERDICTS or not self.results or any(p.unknown for p in self.previous):
            return 3
        if any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in self.findings):
            return 1
        return 0
