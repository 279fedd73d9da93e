"""Pins in the controller: a version's release is immutable, in the cluster too.

``verify --pins FILE`` keeps the first release manifest seen for each version in a
file; the controller keeps the same document in a ConfigMap of its own namespace, one
per check (:func:`store_name`), written only by the controller and never by whoever
writes the ArtifactCheck: deleting and re-creating the check finds the pins again
(control/pins_store.py reads and writes it). The check's status mirrors the document
(``status.releasePins``, ``status.acceptedReleases``) for ``kubectl`` readers, and names
the ConfigMap (``status.releasePinsStore``). The rules are those of
:mod:`artifactcheck.release.pins` (pure functions over the document); this module is
only the document as the controller holds it, and its encodings.

What differs from the file:

- the document is bounded: past ``cacheVersions`` versions, the oldest pins are dropped
  (versions whose release is unchanged first: a changed one is what must not be lost);
- no manifest bytes are kept (a ConfigMap or a status is no place for them), so a
  changed version has no pinned copy at hand: its instances are ``inconclusive`` until
  the change is accepted, and while they are, the controller opens no gate and lifts
  no quarantine on their account;
- accepting is creating a ``ReleaseAcceptance`` naming the check, the version and the
  digest (control/accepting.py): a permission RBAC grants apart from editing the check
  (the ``artifactcheck-release-approver`` ClusterRole). It is recorded in
  ``acceptedReleases`` with the acceptance's namespace and name (``by``).

Every method is safe to call from the guard's thread while the event loop reads the
document for a status write: one lock guards it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck.release.pins import (
    MAX_CHANGES,
    Observed,
    PinsDoc,
    PinsError,
    Seen,
    VersionPins,
    accept,
    is_sha256,
    now_iso,
    observe,
)

#: The annotation that accepted a changed release before acceptance became a resource
#: of its own: it accepts nothing now (whoever edits the check could set it); the
#: controller answers it with a Warning Event naming the ReleaseAcceptance to create.
ANN_ACCEPT_RELEASE = "artifactcheck.io/accept-release"
#: Acceptances the status remembers (the most recent).
MAX_ACCEPTED = 20
#: Label of the ConfigMaps that keep pins, in the controller's namespace.
PINS_LABEL = "artifactcheck.io/release-pins"
#: Annotations naming the check a pins ConfigMap belongs to (for the admin who reads it).
ANN_PINS_NAMESPACE = "artifactcheck.io/check-namespace"
ANN_PINS_NAME = "artifactcheck.io/check-name"
#: The key of the pins document in the ConfigMap's data.
PINS_KEY = "pins.json"
_PREFIX = "artifactcheck-pins."
#: A ConfigMap's name is a DNS subdomain: at most 253 characters.
_MAX_NAME = 253


@dataclass(frozen=True, slots=True)
class Accepted:
    """One accepted release: the version, the digest adopted, when, by whom."""

    version: str
    sha256: str
    at: str
    by: str = ""


def store_name(namespace: str, name: str) -> str:
    """The pins ConfigMap of check ``namespace/name``: ``artifactcheck-pins.NS.NAME``.

    Deterministic, so a re-created check finds its predecessor's pins, and unambiguous
    (a namespace has no dot). A name too long for a ConfigMap's is replaced by its
    sha256 (the annotations still name the check).
    """
    full = f"{_PREFIX}{namespace}.{name}"
    if len(full) <= _MAX_NAME:
        return full
    return f"{_PREFIX}{namespace}.{hashlib.sha256(name.encode()).hexdigest()}"


def _seen(raw: object) -> Seen | None:
    if not isinstance(raw, Mapping):
        return None
    sha, source, at = raw.get("sha256"), raw.get("source"), raw.get("at")
    if not isinstance(sha, str) or not is_sha256(sha):
        return None
    return Seen(sha256=sha, source=str(source or ""), at=str(at or ""))


def _seen_status(seen: Seen) -> dict[str, str]:
    return {"sha256": seen.sha256, "source": seen.source[:1024], "at": seen.at}


class StatusPins:
    """A :class:`~artifactcheck.release.pins.PinStore` whose document is the status's."""

    description = "the controller's pins of the ArtifactCheck"

    def __init__(
        self,
        doc: PinsDoc | None = None,
        *,
        max_versions: int = 32,
        accepted: tuple[Accepted, ...] = (),
        clock: Callable[[], str] = now_iso,
        check: str = "NAME",
    ) -> None:
        self._doc = doc or PinsDoc()
        self.max_versions = max_versions
        self._accepted = accepted
        self.clock = clock
        self.check = check
        self._lock = threading.Lock()
        #: The pins ConfigMap's resourceVersion as last read or written (None: not read
        #: from the store yet), and the document as last written there.
        self.stored: str | None = None
        self.saved: dict[str, Any] | None = None

    @classmethod
    def from_status(cls, status: object, *, max_versions: int, check: str = "NAME") -> StatusPins:
        """The pins an ArtifactCheck's status holds (entries that do not parse are
        skipped: the API server validated them, so only a hand edit could get there)."""
        versions: dict[str, VersionPins] = {}
        accepted: list[Accepted] = []
        if isinstance(status, Mapping):
            for raw in status.get("releasePins") or []:
                if not isinstance(raw, Mapping) or not isinstance(raw.get("version"), str):
                    continue
                pinned = _seen(raw.get("pinned"))
                if pinned is not None:
                    changed = _seen(raw.get("changed"))
                    earlier = raw.get("earlier") if changed is not None else None
                    versions[raw["version"]] = VersionPins(
                        pinned=pinned,
                        changed=changed,
                        earlier=tuple(
                            seen
                            for seen in (_seen(item) for item in (earlier or [])[-MAX_CHANGES:])
                            if seen is not None
                        ),
                    )
            for raw in status.get("acceptedReleases") or []:
                if isinstance(raw, Mapping) and is_sha256(str(raw.get("sha256"))):
                    accepted.append(
                        Accepted(
                            version=str(raw.get("version") or ""),
                            sha256=str(raw["sha256"]),
                            at=str(raw.get("at") or ""),
                            by=str(raw.get("by") or ""),
                        )
                    )
        store = cls(
            PinsDoc(versions=versions),
            max_versions=max_versions,
            accepted=tuple(accepted[-MAX_ACCEPTED:]),
            check=check,
        )
        store._doc = store._bounded(store._doc)
        return store

    # -- the PinStore interface -------------------------------------------------------

    def observe(self, version: str, sha256: str, source: str, data: bytes) -> Observed:
        """Record one load of ``version``: pinned if first, else the pin or a change."""
        seen = Seen(sha256=sha256, source=source, at=self.clock())
        with self._lock:
            doc, result = observe(self._doc, version, seen)
            self._doc = self._bounded(doc)
        return result

    def release_bytes(self, sha256: str) -> bytes | None:
        """Never at hand: the status keeps digests, not manifests (so a changed version
        is ``inconclusive``, never judged against a copy nobody can vouch for)."""
        return None

    def accept_hint(self, version: str, digest: str) -> str:
        """How to adopt a changed release, for the finding and the condition."""
        return (
            f"a ReleaseAcceptance naming check {self.check}, version {version} and "
            f"sha256 {digest} (granted by the artifactcheck-release-approver ClusterRole)"
        )

    # -- the controller's side ----------------------------------------------------------

    def accept(self, version: str, sha256: str | None, *, by: str = "") -> Accepted:
        """Adopt a release for ``version`` (PinsError when there is nothing to adopt)."""
        at = self.clock()
        with self._lock:
            doc, chosen = accept(self._doc, version, sha256, at=at)
            self._doc = self._bounded(doc)
            record = Accepted(version=version, sha256=chosen.sha256, at=at, by=by)
            self._accepted = (*self._accepted, record)[-MAX_ACCEPTED:]
        return record

    def pinned(self, version: str) -> str | None:
        """The digest ``version`` is pinned to (None: not pinned)."""
        with self._lock:
            entry = self._doc.versions.get(version)
        return entry.pinned.sha256 if entry is not None else None

    def accepted_by(self, by: str) -> Accepted | None:
        """The acceptance recorded for ``by`` (a ReleaseAcceptance seen again after it
        was recorded), if it is still remembered."""
        with self._lock:
            return next((a for a in reversed(self._accepted) if a.by == by), None)

    def adopt(self, other: StatusPins) -> None:
        """Hold ``other``'s document and acceptances from now on (the store's, read
        back), in place: the release guard keeps this object."""
        with other._lock:
            doc, accepted = other._doc, other._accepted
        if other is self:
            return
        with self._lock:
            self._doc = self._bounded(doc)
            self._accepted = accepted

    def merge_missing(self, other: StatusPins) -> None:
        """Add the versions ``other`` pins and this document does not (another writer's,
        read back after a conflict): a pin is never lost to a race."""
        if other is self:
            return
        with other._lock:
            theirs = dict(other._doc.versions)
        with self._lock:
            versions = {**theirs, **self._doc.versions}
            self._doc = self._bounded(PinsDoc(versions=versions))

    def erase(self) -> list[str]:
        """Forget every pin (the admin deleted the store); the versions forgotten."""
        with self._lock:
            versions = list(self._doc.versions)
            self._doc = PinsDoc()
            self._accepted = ()
        self.stored = self.saved = None
        return versions

    def empty(self) -> bool:
        """No pin and no acceptance recorded."""
        with self._lock:
            return not self._doc.versions and not self._accepted

    def first_seen(self) -> dict[str, str]:
        """When each pinned version's release was first seen (ISO 8601): the versions a
        workload ran, in the order it ran them, kept across restarts."""
        with self._lock:
            return {v: p.pinned.at for v, p in self._doc.versions.items()}

    def changed(self) -> dict[str, VersionPins]:
        """Versions whose release changed and is not accepted."""
        with self._lock:
            return {v: p for v, p in self._doc.versions.items() if p.changed is not None}

    def to_status(self) -> dict[str, Any]:
        """``releasePins`` and ``acceptedReleases`` as the status holds them."""
        with self._lock:
            doc, accepted = self._doc, self._accepted
        pins: list[dict[str, Any]] = []
        for version, entry in doc.versions.items():
            item: dict[str, Any] = {"version": version, "pinned": _seen_status(entry.pinned)}
            if entry.changed is not None:
                item["changed"] = _seen_status(entry.changed)
            if entry.earlier:
                # the other changes seen: an acceptance without a digest must still
                # find them ambiguous after a restart or a leader change
                item["earlier"] = [_seen_status(seen) for seen in entry.earlier]
            pins.append(item)
        return {
            "releasePins": pins,
            "acceptedReleases": [
                {"version": a.version, "sha256": a.sha256, "at": a.at, "by": a.by} for a in accepted
            ],
        }

    def to_data(self) -> dict[str, str]:
        """The document as the pins ConfigMap's ``data`` holds it (the status's form)."""
        return {PINS_KEY: json.dumps(self.to_status(), sort_keys=True)}

    @classmethod
    def from_data(
        cls, data: object, *, max_versions: int, check: str = "NAME"
    ) -> StatusPins | None:
        """The pins a ConfigMap's ``data`` holds; None when it holds no pins document
        (not JSON, not an object): the caller says so instead of starting afresh."""
        raw = data.get(PINS_KEY) if isinstance(data, Mapping) else None
        try:
            doc = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            return None
        return cls.from_status(doc, max_versions=max_versions, check=check)

    def _bounded(self, doc: PinsDoc) -> PinsDoc:
        """At most ``max_versions`` pins: the oldest unchanged ones dropped first."""
        excess = len(doc.versions) - self.max_versions
        if excess <= 0:
            return doc
        order = list(doc.versions)  # first pinned first
        drop = [v for v in order if doc.versions[v].changed is None][:excess]
        if len(drop) < excess:
            drop += [v for v in order if v not in drop][: excess - len(drop)]
        gone = set(drop)
        return PinsDoc(versions={v: p for v, p in doc.versions.items() if v not in gone})


__all__ = [
    "ANN_ACCEPT_RELEASE",
    "ANN_PINS_NAME",
    "ANN_PINS_NAMESPACE",
    "PINS_KEY",
    "PINS_LABEL",
    "Accepted",
    "PinsError",
    "StatusPins",
    "store_name",
]
