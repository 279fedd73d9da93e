"""The native format: build -> dump -> parse is lossless and byte-for-byte stable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from artifactcheck.manifests import native, parse_manifest
from artifactcheck.model.errors import ManifestError, ManifestFormatError
from artifactcheck.model.records import replace

from .builds import BUILDS

BUILD_DIRS = sorted(p.name for p in BUILDS.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", BUILD_DIRS)
def test_build_dump_parse_round_trip_on_real_builds(name: str) -> None:
    built = native.build(BUILDS / name, version="1.4.2")
    data = native.dump(built)
    parsed = parse_manifest(data, path_hint="artifactcheck.json")
    assert parsed.format == "native"
    assert replace(parsed, source=built.source) == built
    assert native.dump(parsed) == data
    assert parsed.rejected == ()


def test_dump_is_deterministic(tmp_path: Path) -> None:
    for name in ("b.js", "a/index.html", "a/c.css", "z/y/x.svg"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(name.encode() * 3)
    first = native.dump(native.build(tmp_path, version="7"))
    os.utime(tmp_path / "b.js", (0, 0))
    second = native.dump(native.build(tmp_path, version="7"))
    assert first == second
    assert first.endswith(b"\n")
    doc = json.loads(first)
    assert list(doc["files"]) == sorted(doc["files"])
    assert first == (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()
    assert parse_manifest(first).files["a/index.html"].entry


def test_two_releases_have_different_fingerprints() -> None:
    one = native.build(BUILDS / "vite-r1", version="1")
    two = native.build(BUILDS / "vite-r2", version="2")
    assert one.fingerprint() != two.fingerprint()
    assert one.fingerprint() == native.build(BUILDS / "vite-r1", version="x").fingerprint()


def doc(files: object, **extra: object) -> str:
    return json.dumps({"schema": native.SCHEMA, "version": "1", "files": files, **extra})


@pytest.mark.parametrize(
    "sha",
    ["0x" + "a" * 62, "a" * 31 + "_" + "a" * 32, " " + "a" * 63, "g" * 64, "a" * 63, 5, None],
)
def test_a_malformed_sha256_fails_the_native_manifest(sha: object) -> None:
    with pytest.raises(ManifestFormatError, match="sha256"):
        parse_manifest(doc({"a.js": {"sha256": sha, "size": 1}}))


@pytest.mark.parametrize("size", [-1, True, 1.5, "1", None])
def test_a_malformed_size_fails_the_native_manifest(size: object) -> None:
    with pytest.raises(ManifestFormatError, match="size"):
        parse_manifest(doc({"a.js": {"sha256": "a" * 64, "size": size}}))


def test_hex_is_lowercased_and_unsafe_paths_only_rejected() -> None:
    files = {
        "a.js": {"sha256": "A" * 64, "size": 1},
        "../etc/passwd": {"sha256": "b" * 64, "size": 1},
        "https://evil.com/x": {"sha256": "c" * 64, "size": 1},
    }
    manifest = parse_manifest(doc(files))
    assert manifest.files["a.js"].hashes == {"sha256": "a" * 64}
    assert {raw for raw, _ in manifest.rejected} == {"../etc/passwd", "https://evil.com/x"}


@pytest.mark.parametrize(
    "entrypoints", [None, 3, "a.js", [{"x": 1}, ["a.js"]], {"a.js": 1}, ["a.js"]]
)
def test_entrypoints_of_any_shape(entrypoints: object) -> None:
    manifest = parse_manifest(
        doc({"a.js": {"sha256": "a" * 64, "size": 1}}, entrypoints=entrypoints)
    )
    assert manifest.files["a.js"].entry == (entrypoints == ["a.js"])


def test_version_and_image_id() -> None:
    manifest = parse_manifest(doc({}, image_id="sha256:abc"))
    assert (manifest.version, manifest.image_id, manifest.files) == ("1", "sha256:abc", {})
    with pytest.raises(ManifestFormatError, match="version"):
        parse_manifest(json.dumps({"schema": native.SCHEMA, "version": 1, "files": {}}))


def test_build_refuses_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        native.build(tmp_path / "nope", version="1")


def test_build_refuses_an_empty_directory(tmp_path: Path) -> None:
    """An empty release manifest vouches for nothing; it is almost always a wrong path."""
    (tmp_path / "dist" / "sub").mkdir(parents=True)
    with pytest.raises(ManifestError, match="no files to hash"):
        native.build(tmp_path / "dist", version="1")


@pytest.mark.parametrize("version", ["../1", "1.0?a", "", "a/b", "1..2"])
def test_build_refuses_a_version_outside_the_grammar(tmp_path: Path, version: str) -> None:
    (tmp_path / "index.html").write_text("x", "utf-8")
    with pytest.raises(ManifestError, match="version"):
        native.build(tmp_path, version=version)


def test_a_declared_version_is_never_overwritten() -> None:
    """What lets a release source refuse a manifest written for another release."""
    data = doc({"a.js": {"sha256": "a" * 64, "size": 1}})  # declares "1"
    assert parse_manifest(data, version="2").version == "1"
    assert parse_manifest(data).version == "1"


def test_a_version_is_recorded_only_when_none_is_declared() -> None:
    undeclared = json.dumps({"schema": native.SCHEMA, "files": {}})
    assert parse_manifest(undeclared).version is None
    assert parse_manifest(undeclared, version="2").version == "2"
