"""Precompressed siblings in the native format: an encoding of their file, not a file.

``manifest build`` records ``x.css.gz`` (``.br``, ``.zst``) beside ``x.css`` under
``files["x.css"].encodings``; read back, each sibling is also a file under its own
name (asked for by name, its stored bytes are judged). A manifest without
``encodings`` reads as before; a malformed one fails, as the rest of our own format.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from artifactcheck.manifests import native, parse_manifest
from artifactcheck.model.errors import ManifestFormatError

CSS = b"body { color: #333 }\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree(root: Path) -> dict[str, bytes]:
    files = {
        "assets/x.css": CSS,
        "assets/x.css.gz": gzip.compress(CSS, mtime=0),
        "assets/x.css.br": b"(brotli)",
        "assets/y.js": b"let y = 1;\n",
        "assets/y.js.zst": b"(zstd)",
        "downloads/data.tar.gz": b"(a tarball: no data.tar beside it)",
        "index.html": b"<html></html>",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def test_build_records_siblings_under_their_file(tmp_path: Path) -> None:
    files = _tree(tmp_path)
    doc = json.loads(native.dump(native.build(tmp_path, version="1.0.0")))
    assert sorted(doc["files"]) == [
        "assets/x.css",
        "assets/y.js",
        "downloads/data.tar.gz",
        "index.html",
    ]
    css = doc["files"]["assets/x.css"]
    assert css["sha256"] == _sha(CSS)
    assert css["encodings"] == {
        "br": {"sha256": _sha(files["assets/x.css.br"]), "size": len(files["assets/x.css.br"])},
        "gzip": {"sha256": _sha(files["assets/x.css.gz"]), "size": len(files["assets/x.css.gz"])},
    }
    assert set(doc["files"]["assets/y.js"]["encodings"]) == {"zstd"}
    assert "encodings" not in doc["files"]["downloads/data.tar.gz"]


def test_read_back_each_sibling_is_also_a_file(tmp_path: Path) -> None:
    files = _tree(tmp_path)
    built = native.build(tmp_path, version="1.0.0")
    data = native.dump(built)
    parsed = parse_manifest(data, path_hint="artifactcheck.json")
    assert sorted(parsed.files) == sorted(files)
    gz = parsed.files["assets/x.css.gz"]
    assert gz.hashes["sha256"] == _sha(files["assets/x.css.gz"])
    assert parsed.files["assets/x.css"].encodings["gzip"] == gz
    assert native.dump(parsed) == data
    assert parsed.files == built.files


def test_a_manifest_without_encodings_reads_as_before() -> None:
    """Written before encodings were recorded: the .gz is a file, nothing is attached."""
    gz = gzip.compress(CSS, mtime=0)
    doc = {
        "schema": native.SCHEMA,
        "version": "1.0.0",
        "files": {
            "x.css": {"sha256": _sha(CSS), "size": len(CSS)},
            "x.css.gz": {"sha256": _sha(gz), "size": len(gz)},
        },
    }
    parsed = parse_manifest(json.dumps(doc).encode())
    assert sorted(parsed.files) == ["x.css", "x.css.gz"]
    assert all(not e.encodings for e in parsed.files.values())
    assert json.loads(native.dump(parsed)) == doc


@pytest.mark.parametrize(
    "encodings",
    [
        [],
        {"gzip": "abc"},
        {"gzip": {"sha256": "0" * 63, "size": 3}},
        {"gzip": {"sha256": "0" * 64, "size": -1}},
        {"gzip": {"sha256": "0" * 64, "size": True}},
        {"deflate": {"sha256": "0" * 64, "size": 3}},
    ],
)
def test_malformed_encodings_fail_the_document(encodings: object) -> None:
    doc = {
        "schema": native.SCHEMA,
        "version": "1.0.0",
        "files": {"x.css": {"sha256": _sha(CSS), "size": len(CSS), "encodings": encodings}},
    }
    with pytest.raises(ManifestFormatError, match=r"x\.css.*encodings"):
        parse_manifest(json.dumps(doc).encode())
