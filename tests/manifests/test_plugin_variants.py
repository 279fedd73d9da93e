"""Option variants of the webpack plugins, from the real plugins' output (see data/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from artifactcheck.manifests import parse_manifest, verify_integrity
from artifactcheck.model.errors import ManifestFormatError

from .builds import digests, real_manifest

DATA = Path(__file__).parent / "data"
ENTRIES = {"index.html", "static/css/main.138366f0.css", "static/js/main.ca16dfb6.js"}


@pytest.mark.parametrize(
    "name",
    [
        "webpack-assets-entrypoints-publicpath.json",
        "webpack-assets-entrypoints-useassets.json",
        "webpack-assets-entrypoints-nointegrity.json",
    ],
)
def test_entrypoints_mark_entries_and_are_not_assets(name: str) -> None:
    data = (DATA / name).read_bytes()
    manifest = parse_manifest(data)  # the entrypoints object alone settles the shape
    assert manifest.format == "webpack-assets"
    assert manifest.rejected == ()
    assert {p for p, e in manifest.files.items() if e.entry} == ENTRIES
    assert not any(
        "entrypoints" in p or e.logical == "entrypoints" for p, e in manifest.files.items()
    )
    build = real_manifest("webpack-assets", "r1")
    assert set(manifest.files) == set(build.read().files)
    checked = 0
    for path, entry in manifest.files.items():
        if entry.hashes:
            assert verify_integrity(entry, digests(build.root / path, manifest)) == [], path
            checked += 1
    assert checked == (0 if "nointegrity" in name else 8)  # all but the asset module


def test_public_path_true_makes_paths_root_absolute() -> None:
    doc = json.loads((DATA / "webpack-assets-entrypoints-publicpath.json").read_bytes())
    assert doc["main.js"]["src"].startswith("/")
    moved = parse_manifest(json.dumps(doc), location="sub/assets-manifest.json")
    assert "static/js/main.ca16dfb6.js" in moved.files  # root-absolute: not rebased


@pytest.mark.parametrize(
    ("name", "hint", "fmt"),
    [
        ("webpack-manifest-publicpath-auto.json", "manifest.json", "webpack-manifest"),
        ("cra-publicpath-auto.json", "asset-manifest.json", "cra"),
    ],
)
def test_public_path_auto_writes_paths_relative_to_the_output_directory(
    name: str, hint: str, fmt: str
) -> None:
    data = (DATA / name).read_bytes()
    manifest = parse_manifest(data, path_hint=hint)
    assert manifest.format == fmt
    assert all(not p.startswith("auto/") for p in manifest.files)
    assert "index.html" in manifest.files
    moved = parse_manifest(data, location=f"app/{hint}")
    assert set(moved.files) == {f"app/{p}" for p in manifest.files}


def test_a_legacy_literal_auto_prefix_is_stripped() -> None:
    doc = {"main.js": "auto/static/js/main.1a2b.js", "index.html": "auto/index.html"}
    manifest = parse_manifest(json.dumps(doc), path_hint="manifest.json")
    assert set(manifest.files) == {"static/js/main.1a2b.js", "index.html"}


def test_flat_webpack_manifest_needs_its_file_name() -> None:
    data = (DATA / "webpack-manifest-publicpath-auto.json").read_bytes()
    with pytest.raises(ManifestFormatError, match="ambiguous"):
        parse_manifest(data)


def test_a_cdn_public_path_is_rejected_not_fetched() -> None:
    doc = json.loads(real_manifest("webpack-manifest", "r1").file.read_bytes())
    cdn = {k: "https://cdn.example.com" + v for k, v in doc.items()}
    cdn["index.html"] = doc["index.html"]
    manifest = parse_manifest(json.dumps(cdn), path_hint="manifest.json")
    assert set(manifest.files) == {"index.html"}
    assert len(manifest.rejected) == len(doc) - 1
    assert all(raw.startswith("https://cdn.example.com/") for raw, _ in manifest.rejected)
