"""The native release manifest: ``path -> sha256, size`` for every file of a release.

This is what CI writes with ``artifactcheck manifest build DIST --version V`` and what
``manifest from-image`` writes from a container image. Both go through
:class:`Builder` / :func:`dump`, so the two are equal byte for byte for the same tree.
The output is deterministic: sorted keys, fixed separators, a trailing newline.

A precompressed sibling (``x.css.gz``, ``.br``, ``.zst`` beside ``x.css``, as Rails'
``assets:precompile`` and ``gzip -k`` write them) is recorded as an encoding of its
file (``files["x.css"].encodings.gzip: {sha256, size}`` of the stored bytes), not as a
file of its own: servers hand it out as ``x.css`` to clients that accept the coding,
and its content is judged there, decoded, against ``x.css``'s hash
(``--compare-encoding gzip``). Read back, each sibling is also a file of the release
under its own name, so asked for by name its stored bytes are judged too. Manifests
without ``encodings`` read as before.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from artifactcheck.manifests._collect import Collector
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.limits import ManifestLimits, check_entries
from artifactcheck.model.errors import ManifestError, ManifestFormatError
from artifactcheck.model.records import replace
from artifactcheck.model.values import STORED_CODINGS, Manifest, ManifestEntry, Sha256Hashes
from artifactcheck.model.versions import version_problem

SCHEMA = "artifactcheck/release-manifest/v1"
CHUNK = 1024 * 1024
FORMAT_INFO = FormatInfo(
    name="native",
    title="native",
    order=10,
    file_names=("artifactcheck.json",),
    probes={"artifactcheck.json": 10},
    root="the release's root (where ``index.html`` is served)",
    version="``version``",
)


def looks_like(doc: Any) -> bool:
    """True when the document declares the native schema."""
    return isinstance(doc, dict) and doc.get("schema") == SCHEMA


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a native release manifest document.

    The native format is ours, so a malformed hash or size fails the whole document
    (CI wrote it wrong); an unsafe path is still only rejected, like in every format.
    """
    if not looks_like(doc):
        raise ManifestFormatError(f"not a native manifest: 'schema' must be {SCHEMA!r}")
    files = doc.get("files")
    if not isinstance(files, dict):
        raise ManifestFormatError("native manifest: 'files' must be an object")
    check_entries(len(files), limits)
    version = doc.get("version")
    if version is not None and not isinstance(version, str):
        raise ManifestFormatError("native manifest: 'version' must be a string")
    entries = _entrypoints(doc.get("entrypoints"))
    out = Collector("native", limits, prefix=prefix)
    coded: dict[str, dict[str, tuple[bytes, int]]] = {}
    for raw_path, meta in files.items():
        if not isinstance(meta, dict):
            raise ManifestFormatError(f"native manifest: files[{raw_path!r}] must be an object")
        digest = _digest(meta.get("sha256"))
        size = meta.get("size")
        if digest is None:
            raise ManifestFormatError(f"native manifest: files[{raw_path!r}].sha256 invalid")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestFormatError(f"native manifest: files[{raw_path!r}].size invalid")
        out.add(
            raw_path,
            where=f"files[{raw_path!r}]",
            hashes=Sha256Hashes(digest),
            size=size,
            entry=raw_path in entries,
        )
        if "encodings" in meta:
            coded[raw_path] = _encodings(raw_path, meta["encodings"])
    for path in entries:  # index.html pages were flagged as they were recorded
        out.mark_entry(path)
    image_id = doc.get("image_id")
    manifest = out.manifest(source=source)
    if coded:
        manifest = replace(manifest, files=_with_encodings(manifest.files, coded))
    return replace(
        manifest,
        version=version,
        image_id=image_id if isinstance(image_id, str) else None,
    )


def _encodings(raw_path: str, value: Any) -> dict[str, tuple[bytes, int]]:
    """A file's ``encodings`` object: coding -> {sha256, size} of its stored sibling."""
    where = f"native manifest: files[{raw_path!r}].encodings"
    if not isinstance(value, dict):
        raise ManifestFormatError(f"{where} must be an object")
    out: dict[str, tuple[bytes, int]] = {}
    for coding, meta in value.items():
        if coding not in STORED_CODINGS.values() or not isinstance(meta, dict):
            raise ManifestFormatError(f"{where}[{coding!r}] invalid")
        digest, size = _digest(meta.get("sha256")), meta.get("size")
        if digest is None or not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ManifestFormatError(f"{where}[{coding!r}]: sha256/size invalid")
        out[coding] = (digest, size)
    return out


def _with_encodings(
    files: Mapping[str, ManifestEntry], coded: Mapping[str, Mapping[str, tuple[bytes, int]]]
) -> dict[str, ManifestEntry]:
    """``files`` with each recorded encoding attached to its (accepted) file, and each
    sibling a file too: a client that asks for ``x.css.gz`` itself gets its stored
    bytes, and they are the release's (a stale ``.gz`` differs even when only identity
    is compared)."""
    ending = {c: e for e, c in STORED_CODINGS.items()}
    out = dict(files)
    for path, codings in coded.items():
        entry = out.get(path)
        if entry is None:  # the path itself was refused as unsafe
            continue
        siblings = {
            c: ManifestEntry(path=path + ending[c], hashes=Sha256Hashes(d), size=n)
            for c, (d, n) in sorted(codings.items())
        }
        out[path] = replace(entry, encodings=siblings)
        for sibling in siblings.values():  # still judged where it is asked for by name
            out.setdefault(sibling.path, sibling)
    return dict(sorted(out.items()))


def _digest(value: Any) -> bytes | None:
    """The 32 bytes of a sha256 given as exactly 64 hex digits (either case), else None.

    ``bytes.fromhex`` skips whitespace between bytes, so 64 characters decode to 32
    bytes only when all 64 are hex digits: the same rule as ``is_hex(value, 64)``,
    checked and converted in one step (this runs once per release file).
    """
    if not isinstance(value, str) or len(value) != 64:
        return None
    try:
        digest = bytes.fromhex(value)
    except ValueError:
        return None
    return digest if len(digest) == 32 else None


def _entrypoints(value: Any) -> set[str]:
    """The optional 'entrypoints' list; anything but a list of strings counts as none."""
    if not isinstance(value, list):
        return set()
    return {item for item in value if isinstance(item, str)}


def _is_entry(path: str) -> bool:
    return path == "index.html" or path.endswith("/index.html")


class Builder:
    """Hashes files one at a time (streamed) into a native manifest."""

    def __init__(self, *, version: str, image_id: str | None = None) -> None:
        self.version = version
        self.image_id = image_id
        self.files: dict[str, ManifestEntry] = {}

    def add_stream(self, path: str, stream: IO[bytes]) -> None:
        """Hash one file read from a binary stream, chunk by chunk."""
        h = hashlib.sha256()
        size = 0
        while chunk := stream.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
        self.add(path, h.hexdigest(), size)

    def add(self, path: str, sha256: str, size: int) -> None:
        """Record one file's digest."""
        clean = path.replace(os.sep, "/").lstrip("/")
        self.files[clean] = ManifestEntry(
            path=clean, hashes=Sha256Hashes.from_hex(sha256), size=size, entry=_is_entry(clean)
        )

    def manifest(self, *, source: str | None = None) -> Manifest:
        """The finished manifest, precompressed siblings folded into their files."""
        return Manifest(
            format="native",
            files=fold_precompressed(self.files),
            version=self.version,
            source=source,
            image_id=self.image_id,
        )


def fold_precompressed(files: Mapping[str, ManifestEntry]) -> dict[str, ManifestEntry]:
    """``x.css.gz`` (``.br``, ``.zst``) beside ``x.css``: an encoding of ``x.css``.

    The sibling stays a file in memory (asked for by name, its stored bytes are judged)
    and is written only under its file's ``encodings`` (:func:`to_document`), the
    shape :func:`parse` reads back. A compressed file with no original beside it (a
    download's ``.tar.gz``) is a file like any other.
    """
    siblings: dict[str, dict[str, ManifestEntry]] = {}
    for path, entry in files.items():
        for ending, coding in STORED_CODINGS.items():
            original = path[: -len(ending)]
            if path.endswith(ending) and original in files:
                siblings.setdefault(original, {})[coding] = entry
    out = dict(sorted(files.items()))
    for path, codings in siblings.items():
        out[path] = replace(out[path], encodings=dict(sorted(codings.items())))
    return out


def walk_files(root: Path) -> Iterator[tuple[str, Path]]:
    """Every regular file under root as (posix relative path, absolute path), sorted."""
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            found.append((full.relative_to(root).as_posix(), full))
    yield from sorted(found)


def build(dist: str | Path, *, version: str, exclude: Iterable[str] = ()) -> Manifest:
    """Hash every regular file of a build directory into a native release manifest.

    The version is checked against the version grammar (it is what instances will be
    matched by), and a directory with no file is refused: an empty release manifest
    is almost always a wrong path, and it would vouch for nothing.
    """
    problem = version_problem(version)
    if problem is not None:
        raise ManifestError(f"version {problem}")
    root = Path(dist)
    if not root.is_dir():
        raise ManifestError(f"{root}: not a directory")
    skip = set(exclude)
    builder = Builder(version=version)
    for rel, full in walk_files(root):
        if rel in skip:
            continue
        with full.open("rb") as fh:
            builder.add_stream(rel, fh)
    if not builder.files:
        raise ManifestError(
            f"{root}: no files to hash (give the build output directory, e.g. dist/)"
        )
    return builder.manifest(source=str(root))


def to_document(manifest: Manifest) -> dict[str, Any]:
    """The JSON-ready native document for a manifest (hashes must include sha256)."""
    files: dict[str, dict[str, Any]] = {}
    siblings = {e.path for f in manifest.files.values() for e in f.encodings.values()}
    for path in sorted(manifest.files):
        entry = manifest.files[path]
        if path in siblings:  # written under its file's "encodings"
            continue
        sha = entry.hashes.get("sha256")
        if sha is None or entry.size is None:
            raise ManifestError(f"{path}: no sha256/size, cannot write a native manifest")
        files[path] = {"sha256": sha, "size": entry.size}
        coded = {
            coding: {"sha256": e.hashes.get("sha256"), "size": e.size}
            for coding, e in sorted(entry.encodings.items())
        }
        if coded:
            files[path]["encodings"] = coded
    doc: dict[str, Any] = {"schema": SCHEMA, "version": manifest.version, "files": files}
    if manifest.image_id:
        doc["image_id"] = manifest.image_id
    return doc


def dump(manifest: Manifest) -> bytes:
    """Serialise deterministically: sorted keys, two-space indent, trailing newline."""
    text = json.dumps(to_document(manifest), indent=2, sort_keys=True, ensure_ascii=False)
    return (text + "\n").encode("utf-8")
