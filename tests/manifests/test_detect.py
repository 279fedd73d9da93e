"""Format detection: by shape first, by file name only to break a tie, never a guess."""

from __future__ import annotations

import json
from typing import Any

import pytest

from artifactcheck.manifests import (
    FORMATS,
    WELL_KNOWN_PATHS,
    detect_format,
    formats_for_name,
    native,
    parse_manifest,
)
from artifactcheck.model.errors import ManifestFormatError

from .builds import BUILDS, REAL, real_manifest

FLAT = {"main.js": "/static/js/main.1234abcd.js", "index.html": "/index.html"}
PWA = {
    "name": "Fixture App",
    "short_name": "Fixture",
    "start_url": "/",
    "display": "standalone",
    "theme_color": "#000000",
    "background_color": "#ffffff",
    "icons": [{"src": "/icons/icon-192.png", "sizes": "192x192", "type": "image/png"}],
}
PWA_STRINGS_ONLY = {"name": "App", "short_name": "A", "start_url": "/index.html", "display": "x.y"}
EXTENSION = {"manifest_version": 3, "name": "Ext", "version": "1.0", "background": {"x": "a.js"}}


@pytest.mark.parametrize(("fmt", "release"), REAL, ids=[f"{f}-{r}" for f, r in REAL])
def test_every_real_manifest_is_detected_with_its_file_name(fmt: str, release: str) -> None:
    real = real_manifest(fmt, release)
    doc = json.loads(real.file.read_bytes())
    assert detect_format(doc, path_hint=real.location) == fmt
    assert detect_format(doc, path_hint=f"https://pod:8080/x/{real.location}?v=1") == fmt


@pytest.mark.parametrize(
    "fmt", ["vite", "cra", "webpack-assets", "django", "ngsw", "sprockets", "propshaft"]
)
def test_unique_shapes_need_no_file_name(fmt: str) -> None:
    doc = json.loads(real_manifest(fmt, "r1").file.read_bytes())
    assert detect_format(doc) == fmt
    assert detect_format(doc, path_hint="something-else.json") == fmt


def test_native_is_detected_by_its_schema(tmp_path: Any) -> None:
    doc = native.to_document(native.build(BUILDS / "vite-r1", version="1"))
    assert detect_format(doc) == "native"
    assert detect_format(doc, path_hint="manifest.json") == "native"


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        ("manifest.json", "webpack-manifest"),
        ("assets-manifest.json", "webpack-assets"),
        ("assets/.manifest.json", "propshaft"),
        ("https://cdn.example/app/manifest.json?x=1", "webpack-manifest"),
    ],
)
def test_a_flat_map_is_settled_by_its_file_name(hint: str, expected: str) -> None:
    assert detect_format(FLAT, path_hint=hint) == expected


@pytest.mark.parametrize("hint", [None, "", "asset-manifest.json", "unknown.json"])
def test_a_flat_map_without_a_deciding_name_is_ambiguous(hint: str | None) -> None:
    with pytest.raises(ManifestFormatError, match="ambiguous") as info:
        detect_format(FLAT, path_hint=hint)
    for candidate in ("webpack-manifest", "webpack-assets", "propshaft"):
        assert candidate in str(info.value)


@pytest.mark.parametrize("doc", [PWA, PWA_STRINGS_ONLY, EXTENSION], ids=["pwa", "pwa-str", "ext"])
@pytest.mark.parametrize("hint", [None, "manifest.json"])
def test_web_app_manifests_are_never_asset_manifests(doc: dict[str, Any], hint: str | None) -> None:
    with pytest.raises(ManifestFormatError, match="web app or browser-extension"):
        detect_format(doc, path_hint=hint)
    with pytest.raises(ManifestFormatError):
        parse_manifest(json.dumps(doc), path_hint=hint)
    for fmt in FORMATS:
        if fmt != "native":
            with pytest.raises(ManifestFormatError, match="web app"):
                parse_manifest(json.dumps(doc), format=fmt)


def test_a_few_non_string_values_are_skipped_not_fatal() -> None:
    doc = {**FLAT, "x.js": None, "y.js": {"nested": "z.js"}, "z.js": "/static/js/z.9f.js"}
    assert detect_format(doc, path_hint="manifest.json") == "webpack-manifest"
    manifest = parse_manifest(json.dumps(doc), path_hint="manifest.json")
    assert set(manifest.files) == {"index.html", "static/js/main.1234abcd.js", "static/js/z.9f.js"}


def test_mostly_non_string_values_are_not_a_flat_map() -> None:
    doc = {"main.js": "/static/js/main.js", "a": None, "b": 1, "c": [1]}
    with pytest.raises(ManifestFormatError, match="unknown"):
        detect_format(doc, path_hint="manifest.json")


@pytest.mark.parametrize(
    "doc",
    [{}, [], "manifest", 3, None, {"a": 1}, {"files": 3}, {"paths": {}}, {"hashTable": {}}],
    ids=repr,
)
def test_unknown_documents_are_refused_listing_the_formats_tried(doc: Any) -> None:
    with pytest.raises(ManifestFormatError) as info:
        detect_format(doc)
    message = str(info.value)
    assert "tried" in message or "every format is an object" in message
    if "tried" in message:
        assert all(fmt in message for fmt in FORMATS)


@pytest.mark.parametrize(
    ("fmt", "requested"),
    [
        ("vite", "webpack-assets"),
        ("vite", "django"),
        ("django", "vite"),
        ("ngsw", "cra"),
        ("sprockets", "cra"),
        ("cra", "webpack-manifest"),
        ("propshaft", "vite"),
        ("webpack-manifest", "vite"),
        ("webpack-assets", "native"),
    ],
)
def test_an_explicit_format_that_does_not_fit_names_both(fmt: str, requested: str) -> None:
    data = real_manifest(fmt, "r1").file.read_bytes()
    with pytest.raises(ManifestFormatError) as info:
        parse_manifest(data, format=requested)
    assert requested in str(info.value)


def test_an_explicit_format_overrides_the_file_name() -> None:
    real = real_manifest("webpack-manifest", "r1")
    as_sri = parse_manifest(
        real.file.read_bytes(), format="webpack-assets", path_hint="manifest.json"
    )
    assert as_sri.format == "webpack-assets"
    assert set(as_sri.files) == set(real.read().files)


def test_an_unknown_format_name_is_a_manifest_error() -> None:
    with pytest.raises(ManifestFormatError, match="unknown manifest format 'yarn'"):
        parse_manifest(b"{}", format="yarn")


def test_version_overrides_and_source_is_kept() -> None:
    real = real_manifest("vite", "r1")
    manifest = parse_manifest(real.file.read_bytes(), version="1.4.2", source="http://pod/x")
    assert (manifest.version, manifest.source) == ("1.4.2", "http://pod/x")


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (".vite/manifest.json", {"vite"}),
        ("dist/.vite/manifest.json", {"vite"}),
        ("manifest.json", {"webpack-manifest", "vite"}),
        ("asset-manifest.json", {"cra"}),
        ("assets-manifest.json", {"webpack-assets"}),
        ("static/staticfiles.json", {"django"}),
        ("ngsw.json", {"ngsw"}),
        ("assets/.sprockets-manifest-0123abcd.json", {"sprockets"}),
        ("assets/manifest-0123456789abcdef0123456789abcdef.json", {"sprockets"}),
        ("assets/.manifest.json", {"propshaft"}),
        ("artifactcheck.json", {"native"}),
        ("site.webmanifest", set()),
    ],
)
def test_file_names(hint: str, expected: set[str]) -> None:
    assert formats_for_name(hint) == expected


def test_well_known_paths_probe_ours_first_and_the_ambiguous_name_late() -> None:
    assert WELL_KNOWN_PATHS[:7] == (
        "artifactcheck.json",
        ".vite/manifest.json",
        "asset-manifest.json",
        "assets-manifest.json",
        "manifest.json",
        "ngsw.json",
        "staticfiles.json",
    )
    assert len(set(WELL_KNOWN_PATHS)) == len(WELL_KNOWN_PATHS)
    for path in WELL_KNOWN_PATHS:
        assert formats_for_name(path), path
