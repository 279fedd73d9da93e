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
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from artifactcheck.clients.files import unwritable
from artifactcheck.model.errors import ConfigError

SCHEMA = "artifactcheck/pins"
FORMAT = 1
MAX_PINS_BYTES = 16 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PinsError(ConfigError):
    """A pins file that cannot be used: not JSON, a newer format, not writable."""


@dataclass(frozen=True, slots=True)
class Seen:
    """One release manifest seen for a version: its bytes' sha256, where from, when."""

    sha256: str
    source: str
    at: str  # ISO 8601, UTC


@dataclass(frozen=True, slots=True)
class VersionPins:
    """A version's pinned release and, when another was seen since, the latest other."""

    pinned: Seen
    changed: Seen | None = None


@dataclass(frozen=True, slots=True)
class PinsDoc:
    """The whole pins document: versions to their pins."""

    versions: Mapping[str, VersionPins] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Observed:
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
            versions[version] = VersionPins(
                pinned=_seen(entry.get("pinned"), f"versions.{version}.pinned"),
                changed=None if changed is None else _seen(changed, f"versions.{version}.changed"),
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
        versions[version] = out
    body = {"schema": SCHEMA, "format": FORMAT, "versions": versions}
    return json.dumps(body, indent=2, sort_keys=True).encode() + b"\n"


def observe(doc: PinsDoc, version: str, seen: Seen) -> tuple[PinsDoc, Observed]:
    """What loading ``seen`` for ``version`` means: pinned now, the pin, or a change.

    The first manifest seen for a version is pinned; the pinned one again changes
    nothing (and clears no recorded change: only :func:`accept` does); another one is
    recorded as the version's latest change, for ``pins accept`` to adopt.
    """
    current = doc.versions.get(version)
    if current is None:
        pins = VersionPins(pinned=seen)
        return _with(doc, version, pins), Observed(pins=pins, new=True)
    if current.pinned.sha256 == seen.sha256:
        return doc, Observed(pins=replace(current, changed=None), new=False)
    pins = replace(current, changed=seen)
    return _with(doc, version, pins), Observed(pins=pins, new=False)


def accept(doc: PinsDoc, version: str, sha256: str | None, *, at: str) -> tuple[PinsDoc, Seen]:
    """Adopt a release for ``version``: the digest given, else the change last seen.

    Raises PinsError when there is nothing to adopt (no digest and no change seen).
    """
    current = doc.versions.get(version)
    if sha256 is None:
        if current is None or current.changed is None:
            raise PinsError(f"version {version}: no changed release was seen; give --digest SHA256")
        chosen = replace(current.changed, at=at)
    else:
        source = "accepted by hand"
        if current is not None and current.changed is not None:
            if current.changed.sha256 == sha256:
                source = current.changed.source
        chosen = Seen(sha256=sha256, source=source, at=at)
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
        """Read the file now: PinsError (exit 2) when it cannot be read, parsed or written."""
        problem = unwritable(self.path, replaced=True)
        if problem is not None:
            raise PinsError(f"{self.path}: {problem}")
        return self.read()

    def read(self) -> PinsDoc:
        """The document as the file holds it now (empty when there is no file yet)."""
        try:
            with self.path.open("rb") as f:
                data = f.read(MAX_PINS_BYTES + 1)
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
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
                write_atomically(self.path, dump_pins(after))
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
        """Keep a manifest's bytes under their digest (once; the name is the check)."""
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError("the bytes kept must be the ones digested")
        target = self.releases / sha256
        if target.exists():
            return
        self.releases.mkdir(exist_ok=True)
        write_atomically(target, data)

    def release_bytes(self, sha256: str) -> bytes | None:
        """The kept bytes of ``sha256``, or None when missing or no longer matching it."""
        if not is_sha256(sha256):
            return None
        try:
            data = (self.releases / sha256).read_bytes()
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == sha256 else None


def write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``target``, fsync it, rename it over."""
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise PinsError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    with contextlib.suppress(OSError):  # the rename itself made durable
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
