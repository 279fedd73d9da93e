"""Pins in an ArtifactCheck's status: a version's release is immutable, in the cluster too.

``verify --pins FILE`` keeps the first release manifest seen for each version in a
file; the controller keeps the same document in the ArtifactCheck's status
(``status.releasePins``), so the pins survive restarts and leader changes: a new
leader (or a restarted one) reads them back from the object before its first cycle.
The rules are those of :mod:`artifactcheck.release.pins` (pure functions over the
document); this is only where the document lives.

What differs from the file:

- the status is bounded: past ``cacheVersions`` versions, the oldest pins are dropped
  (versions whose release is unchanged first: a changed one is what must not be lost);
- no manifest bytes are kept (a status is no place for them), so a changed version has
  no pinned copy at hand: its instances are ``inconclusive`` until the change is
  accepted, and while they are, the controller opens no gate and lifts no quarantine
  on their account;
- accepting is ``kubectl annotate artifactcheck NAME
  artifactcheck.io/accept-release=VERSION@sha256:DIGEST`` (:func:`parse_accept`),
  recorded in ``status.acceptedReleases`` (what, when, and by which field manager).

Every method is safe to call from the guard's thread while the event loop reads the
document for a status write: one lock guards it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck.release.pins import (
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

#: The annotation that accepts a changed release: ``VERSION@sha256:DIGEST`` (the
#: digest the ``ReleaseChanged`` condition names), or ``VERSION`` alone for the
#: change last seen.
ANN_ACCEPT_RELEASE = "artifactcheck.io/accept-release"
#: Acceptances the status remembers (the most recent).
MAX_ACCEPTED = 20


@dataclass(frozen=True, slots=True)
class Accepted:
    """One accepted release: the version, the digest adopted, when, by whom."""

    version: str
    sha256: str
    at: str
    by: str = ""


def parse_accept(value: str) -> tuple[str, str | None]:
    """``VERSION@sha256:DIGEST`` (or ``VERSION``) as (version, digest or None).

    ValueError says what is wrong, for the Warning Event.
    """
    text = value.strip()
    version, at, digest = text.partition("@")
    version = version.strip()
    if not version:
        raise ValueError(f"{ANN_ACCEPT_RELEASE}={value!r}: give VERSION@sha256:DIGEST")
    if not at:
        return version, None
    algo, colon, hexdigest = digest.strip().partition(":")
    if algo != "sha256" or not colon or not is_sha256(hexdigest):
        raise ValueError(
            f"{ANN_ACCEPT_RELEASE}={value!r}: the digest must be sha256: and 64 lowercase "
            "hex digits (as the ReleaseChanged condition names it)"
        )
    return version, hexdigest


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

    description = "the ArtifactCheck's status.releasePins"

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
                    versions[raw["version"]] = VersionPins(
                        pinned=pinned, changed=_seen(raw.get("changed"))
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
            f"kubectl annotate artifactcheck {self.check} "
            f"{ANN_ACCEPT_RELEASE}={version}@sha256:{digest}"
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

    def already_accepted(self, version: str, sha256: str | None) -> bool:
        """The pin of ``version`` is this digest and nothing changed since (an
        annotation seen again after its acceptance was recorded)."""
        with self._lock:
            current = self._doc.versions.get(version)
        if current is None or current.changed is not None:
            return False
        return sha256 is None or current.pinned.sha256 == sha256

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
            pins.append(item)
        return {
            "releasePins": pins,
            "acceptedReleases": [
                {"version": a.version, "sha256": a.sha256, "at": a.at, "by": a.by} for a in accepted
            ],
        }

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


__all__ = ["ANN_ACCEPT_RELEASE", "Accepted", "PinsError", "StatusPins", "parse_accept"]
