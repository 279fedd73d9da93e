"""Pins: a version's release is immutable, so the first manifest seen for it is kept.

The outage this project exists for began with an artifact rebuilt under the same
version; when the rebuild reaches the release source too, every instance agrees with
the new manifest. So the first release manifest loaded for each version is pinned by
the sha256 of its bytes (where from, when), and a later, different one is a
``release-changed``, never adopted silently: ``artifactcheck pins accept`` is the only
way in.

The pins live in a JSON file (:class:`FilePins`), read and updated by ``verify``; the
bytes of each pinned manifest are kept beside it in ``FILE.releases/<sha256>``
(content-addressed, so a copy altered there no longer matches its name and is not
used), so a changed version's instances are still judged against the release that was
pinned. The document's rules (:func:`parse_pins`, :func:`dump_pins`, :func:`observe`,
:func:`accept`) are pure functions over bytes and values; :class:`PinStore` is the small
interface a store offers, so the controller can keep pins in an ArtifactCheck's status
with the same rules.

The file is shared state and may be written by two runs at once: every update holds an
exclusive ``fcntl.flock`` on ``FILE.lock``, re-reads the file, merges, and writes a
temporary file in the same directory that is fsynced and renamed over it (the file is
never truncated, and a reader sees the old or the new document, never half of one).

Its directory may be shared too (a CI workspace, ``/tmp``), so nothing here is ever
opened through a symbolic link someone else planted: temporary files get a random name
and are created with ``O_CREAT | O_EXCL | O_NOFOLLOW``; the lock file, the pins file and
everything in ``FILE.releases/`` are opened with ``O_NOFOLLOW``; ``FILE.releases`` is
used only when it is a real directory. A pins file that *is* a link is refused (exit 2,
naming it) rather than followed: following it would let a link planted where the pins
are written redirect the write to any file the run may write, and whoever made the link
on purpose loses nothing by giving the path it points to (docs/release-trust.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from artifactcheck.clients import filesystem
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import Record, field, replace

SCHEMA = "artifactcheck/pins"
FORMAT = 1
MAX_PINS_BYTES = 16 << 20
#: Distinct changed releases a version remembers (the most recent; more than one
#: already means ``pins accept`` needs ``--digest``).
MAX_CHANGES = 16
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PinsError(ConfigError):
    """A pins file that cannot be used: not JSON, a newer format, not writable, a link."""


class AmbiguousAccept(PinsError):
    """Accepting without a digest while more than one changed release was recorded."""

    def __init__(self, version: str, digests: tuple[str, ...]) -> None:
        self.version = version
        self.digests = digests
        listed = ", ".join(digests)
        super().__init__(
            f"version {version}: {len(digests)} different changed releases were seen "
            f"({listed}); name the one you reviewed with --digest SHA256"
        )


class Seen(Record):
    """One release manifest seen for a version: its bytes' sha256, where from, when."""

    sha256: str
    source: str
    at: str  # ISO 8601, UTC


class VersionPins(Record):
    """A version's pinned release and the other releases seen for it since.

    ``changed`` is the latest other one; ``earlier`` holds the other distinct ones seen
    before it (oldest first), so accepting without a digest can tell a single reviewed
    change from several (:func:`accept`).
    """

    pinned: Seen
    changed: Seen | None = None
    earlier: tuple[Seen, ...] = ()

    @property
    def changes(self) -> tuple[Seen, ...]:
        """Every distinct changed release recorded, oldest first (the latest last)."""
        return () if self.changed is None else (*self.earlier, self.changed)


class PinsDoc(Record):
    """The whole pins document: versions to their pins."""

    versions: Mapping[str, VersionPins] = field(default_factory=dict)


class Observed(Record):
    """What one load of a version meant for its pins."""

    pins: VersionPins
    new: bool  # pinned by this load

    @property
    def changed(self) -> bool:
        """The manifest loaded is not the pinned one."""
        return self.pins.changed is not None


def is_sha256(value: str) -> bool:
    """A lowercase hex sha256."""
    return bool(_SHA256.match(value))


def _seen(raw: object, where: str) -> Seen:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: not an object")
    sha, source, at = raw.get("sha256"), raw.get("source"), raw.get("at")
    if not isinstance(sha, str) or not is_sha256(sha):
        raise ValueError(f"{where}.sha256: not a hex sha256")
    if not isinstance(source, str) or not isinstance(at, str):
        raise ValueError(f"{where}: source and at must be strings")
    return Seen(sha256=sha, source=source, at=at)


def parse_pins(data: bytes, where: str) -> PinsDoc:
    """The pins document in ``data``, or PinsError naming ``where`` and what is wrong."""
    if not data.strip():
        return PinsDoc()
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PinsError(f"{where}: not a JSON pins file: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise PinsError(f"{where}: not an artifactcheck pins file (schema {SCHEMA!r})")
    fmt = doc.get("format")
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise PinsError(f"{where}: format must be a positive integer")
    if fmt > FORMAT:
        raise PinsError(
            f"{where}: written by a newer artifactcheck (format {fmt}; this one reads up to "
            f"{FORMAT}); upgrade artifactcheck, or give another --pins file"
        )
    raw = doc.get("versions", {})
    if not isinstance(raw, dict):
        raise PinsError(f"{where}: versions must be an object")
    versions: dict[str, VersionPins] = {}
    try:
        for version, entry in raw.items():
            if not isinstance(entry, dict):
                raise ValueError(f"versions.{version}: not an object")
            changed = entry.get("changed")
            earlier = entry.get("earlier", [])
            if not isinstance(earlier, list) or (earlier and changed is None):
                raise ValueError(f"versions.{version}.earlier: a list, only beside changed")
            versions[version] = VersionPins(
                pinned=_seen(entry.get("pinned"), f"versions.{version}.pinned"),
                changed=None if changed is None else _seen(changed, f"versions.{version}.changed"),
                earlier=tuple(
                    _seen(item, f"versions.{version}.earlier[{i}]")
                    for i, item in enumerate(earlier)
                ),
            )
    except ValueError as exc:
        raise PinsError(f"{where}: {exc}") from exc
    return PinsDoc(versions=versions)


def _seen_doc(seen: Seen) -> dict[str, str]:
    return {"sha256": seen.sha256, "source": seen.source, "at": seen.at}


def dump_pins(doc: PinsDoc) -> bytes:
    """The pins document as the file holds it (sorted, so diffs stay readable)."""
    versions: dict[str, Any] = {}
    for version in sorted(doc.versions):
        entry = doc.versions[version]
        out: dict[str, Any] = {"pinned": _seen_doc(entry.pinned)}
        if entry.changed is not None:
            out["changed"] = _seen_doc(entry.changed)
        if entry.earlier:
            out["earlier"] = [_seen_doc(seen) for seen in entry.earlier]
        versions[version] = out
    body = {"schema": SCHEMA, "format": FORMAT, "versions": versions}
    return json.dumps(body, indent=2, sort_keys=True).encode() + b"\n"


def observe(doc: PinsDoc, version: str, seen: Seen) -> tuple[PinsDoc, Observed]:
    """What loading ``seen`` for ``version`` means: pinned now, the pin, or a change.

    The first manifest seen for a version is pinned; the pinned one again changes
    nothing (and clears no recorded change: only :func:`accept` does); another one is
    recorded as the version's latest change, for ``pins accept`` to adopt, and the
    change it replaces as latest is kept in ``earlier`` (each digest once, the most
    recent :data:`MAX_CHANGES`).
    """
    current = doc.versions.get(version)
    if current is None:
        pins = VersionPins(pinned=seen)
        return _with(doc, version, pins), Observed(pins=pins, new=True)
    if current.pinned.sha256 == seen.sha256:
        return doc, Observed(pins=replace(current, changed=None, earlier=()), new=False)
    others = [c for c in current.changes if c.sha256 != seen.sha256]
    pins = replace(current, changed=seen, earlier=tuple(others[-(MAX_CHANGES - 1) :]))
    return _with(doc, version, pins), Observed(pins=pins, new=False)


def accept(doc: PinsDoc, version: str, sha256: str | None, *, at: str) -> tuple[PinsDoc, Seen]:
    """Adopt a release for ``version``: the digest given, else the one change recorded.

    Without a digest, only a single recorded change is adopted: when several different
    releases were seen since the pin, the one a person reviewed may not be the latest
    (a rebuild recorded after the review), so :class:`AmbiguousAccept` lists them and
    the digest must be named. PinsError when there is nothing to adopt.
    """
    current = doc.versions.get(version)
    changes = () if current is None else current.changes
    if sha256 is None:
        if not changes:
            raise PinsError(f"version {version}: no changed release was seen; give --digest SHA256")
        if len(changes) > 1:
            raise AmbiguousAccept(version, tuple(c.sha256 for c in changes))
        chosen = replace(changes[0], at=at)
    else:
        sources = [c.source for c in changes if c.sha256 == sha256]
        chosen = Seen(sha256=sha256, source=sources[-1] if sources else "accepted by hand", at=at)
    return _with(doc, version, VersionPins(pinned=chosen)), chosen


def _with(doc: PinsDoc, version: str, pins: VersionPins) -> PinsDoc:
    return PinsDoc(versions={**doc.versions, version: pins})


def now_iso() -> str:
    """Now, as pins record it."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class PinStore(Protocol):
    """Where pins are kept: a file for ``verify``; the controller's status later."""

    description: str

    def observe(self, version: str, sha256: str, source: str, data: bytes) -> Observed:
        """Record one load of ``version`` (atomically) and say what it means."""
        ...

    def release_bytes(self, sha256: str) -> bytes | None:
        """The bytes of a manifest seen before, when still at hand (and intact)."""
        ...


class FilePins:
    """Pins in a JSON file, with each pinned manifest's bytes kept beside it."""

    def __init__(self, path: str | Path, *, clock: Callable[[], str] = now_iso) -> None:
        self.path = Path(path)
        self.description = str(path)
        self.clock = clock
        self.releases = self.path.with_name(self.path.name + ".releases")
        self._lock_path = self.path.with_name(self.path.name + ".lock")

    # -- checked before any request ------------------------------------------------

    def check(self) -> PinsDoc:
        """Read the file now: PinsError (exit 2) when it cannot be read, parsed or written,
        or when it, its lock or its releases directory is a symbolic link."""
        if self.path.is_symlink():
            raise PinsError(
                f"{self.path}: {filesystem.LinkRefused(self.path).strerror}: pins are never "
                "written through a link; give the path it points to"
            )
        for beside in (self._lock_path, self.releases):
            if beside.is_symlink():
                raise PinsError(
                    f"{beside}: {filesystem.LinkRefused(beside).strerror}: remove it (the pins "
                    "beside it are never written through a link)"
                )
        if self.releases.exists() and not self.releases.is_dir():
            raise PinsError(f"{self.releases}: not a directory (it keeps pinned manifests)")
        problem = filesystem.unwritable(self.path, replaced=True)
        if problem is not None:
            raise PinsError(f"{self.path}: {problem}")
        return self.read()

    def read(self) -> PinsDoc:
        """The document as the file holds it now (empty when there is no file yet)."""
        try:
            data = filesystem.read_limited(self.path, MAX_PINS_BYTES + 1)
        except FileNotFoundError:
            return PinsDoc()
        except OSError as exc:
            raise PinsError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        if len(data) > MAX_PINS_BYTES:
            raise PinsError(f"{self.path}: larger than {MAX_PINS_BYTES} bytes")
        return parse_pins(data, str(self.path))

    # -- updates ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            fd = filesystem.open_lock(self._lock_path)
        except OSError as exc:
            raise PinsError(f"{self._lock_path}: cannot lock: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the lock

    def update(self, change: Callable[[PinsDoc], tuple[PinsDoc, Any]]) -> Any:
        """Re-read, apply ``change`` and write back, all under the lock; its result."""
        with self._locked():
            doc = self.read()
            after, result = change(doc)
            if after != doc:
                write_file(self.path, dump_pins(after))
            return result

    def observe(self, version: str, sha256: str, source: str, data: bytes) -> Observed:
        """Record one load of ``version``: pinned if first; its bytes kept when pinned or new."""
        seen = Seen(sha256=sha256, source=source, at=self.clock())
        self.keep_bytes(sha256, data)
        result: Observed = self.update(lambda doc: observe(doc, version, seen))
        return result

    def accept(self, version: str, sha256: str | None) -> Seen:
        """Adopt a release for ``version`` (see :func:`accept`)."""
        at = self.clock()
        result: Seen = self.update(lambda doc: accept(doc, version, sha256, at=at))
        return result

    def keep_bytes(self, sha256: str, data: bytes) -> None:
        """Keep a manifest's bytes under their digest (once; the name is the check), in
        ``FILE.releases`` only when it is a real directory, never through a link."""
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError("the bytes kept must be the ones digested")
        try:
            with filesystem.directory(self.releases, follow=False, create=True) as fd:
                if filesystem.is_regular_at(fd, sha256):
                    return
                filesystem.replace_at(fd, sha256, data, shown=self.releases / sha256)
        except OSError as exc:
            where = exc.filename or self.releases
            raise PinsError(f"{where}: cannot write: {exc.strerror or exc}") from exc

    def release_bytes(self, sha256: str) -> bytes | None:
        """The kept bytes of ``sha256``, or None when missing, reached through a link, or
        no longer matching it."""
        if not is_sha256(sha256):
            return None
        try:
            with filesystem.directory(self.releases, follow=False) as fd:
                data = filesystem.read_limited(Path(sha256), -1, dir_fd=fd)
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == sha256 else None


def write_file(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` all at once, never through a link
    (:func:`artifactcheck.clients.filesystem.write_atomically`); PinsError naming it when not."""
    try:
        filesystem.write_atomically(target, data)
    except OSError as exc:
        raise PinsError(f"{target}: cannot write: {exc.strerror or exc}") from exc
