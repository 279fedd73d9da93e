"""Format-specific rules that the real fixtures do not exercise on their own."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from artifactcheck.manifests import MD5_PREFIX, parse_manifest
from artifactcheck.manifests._collect import kind
from artifactcheck.manifests.django import name_hash
from artifactcheck.model.errors import ManifestFormatError

SHA = hashlib.sha256(b"x").hexdigest()
SRI = "sha256-" + base64.b64encode(hashlib.sha256(b"y").digest()).decode()


def read(doc: Any, fmt: str = "auto", **kwargs: Any) -> Any:
    return parse_manifest(json.dumps(doc), format=fmt, **kwargs)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"digest": SHA}, {"sha256": SHA}),
        ({"digest": SHA.upper()}, {"sha256": SHA}),
        ({"digest": "ab" * 16}, {}),  # Sprockets 2: 32 hex, not sha256
        ({"digest": SHA, "integrity": SRI}, {"sha256": hashlib.sha256(b"y").hexdigest()}),
        ({"digest": 7, "integrity": None}, {}),
    ],
)
def test_sprockets_hash_sources(meta: dict[str, Any], expected: dict[str, str]) -> None:
    doc = {"files": {"a-1.js": {"logical_path": "a.js", **meta}}, "assets": {"a.js": "a-1.js"}}
    assert read(doc).files["a-1.js"].hashes == expected


def test_sprockets_assets_only_and_disagreeing_sizes() -> None:
    manifest = read({"assets": {"application.js": "application-1.js"}})
    assert manifest.format == "sprockets"
    assert manifest.files["application-1.js"].entry
    doc = {
        "files": {
            "a-1.js": {"logical_path": "a.js", "size": 3},
            "./a-1.js": {"logical_path": "a.js", "size": 4},
        },
        "assets": {},
    }
    manifest = read(doc)
    assert manifest.files["a-1.js"].size == 3
    assert manifest.rejected and "size" in manifest.rejected[0][1]


def test_conflicting_hashes_for_one_file_keep_the_first_and_reject_the_second() -> None:
    other = "sha256-" + base64.b64encode(hashlib.sha256(b"z").digest()).decode()
    doc = {"a.js": {"src": "a.js", "integrity": SRI}, "b.js": {"src": "./a.js", "integrity": other}}
    manifest = read(doc, path_hint="assets-manifest.json")
    assert manifest.files["a.js"].hashes == {"sha256": hashlib.sha256(b"y").hexdigest()}
    assert manifest.rejected == (
        ("./a.js", "declares another sha256 for a.js than an earlier entry"),
    )


@pytest.mark.parametrize(
    ("original", "hashed", "expected"),
    [
        ("css/site.css", "css/site.668e1ced1b32.css", "668e1ced1b32"),
        ("js/app.min.js", "js/app.min.02c42967d45c.js", "02c42967d45c"),
        ("LICENSE", "LICENSE.02c42967d45c", "02c42967d45c"),
        (".htaccess", ".htaccess.02c42967d45c", "02c42967d45c"),
        ("a.css", "a.668E1CED1B32.css", None),
        ("a.css", "a.668e1ced1b3.css", None),
        ("a.css", "b.668e1ced1b32.css", None),
        ("a.css", "a.css", None),
        ("x/a.css", "y/a.668e1ced1b32.css", None),
    ],
)
def test_django_name_hash(original: str, hashed: str, expected: str | None) -> None:
    assert name_hash(original, hashed) == expected


def test_django_entries_without_the_name_shape_carry_no_hash() -> None:
    doc = {"paths": {"a.css": "a.668e1ced1b32.css", "b.css": "custom/b-xyz.css"}, "version": "1.0"}
    manifest = read(doc)
    assert manifest.files["a.668e1ced1b32.css"].hashes == {MD5_PREFIX: "668e1ced1b32"}
    assert manifest.files["custom/b-xyz.css"].hashes == {}


@pytest.mark.parametrize("version", ["2.0", "1", "", None, 1.1])
def test_django_unknown_manifest_versions(version: Any) -> None:
    with pytest.raises(ManifestFormatError, match="django"):
        read({"paths": {"a.css": "a.668e1ced1b32.css"}, "version": version}, "django")


def test_ngsw_strips_the_base_href_and_rejects_urls_outside_it() -> None:
    doc = {
        "configVersion": 1,
        "index": "/app/index.html",
        "assetGroups": [{"name": "a", "urls": ["/app/main.js", "/other/x.js", "//evil.com/y"]}],
        "hashTable": {"/app/main.js": "a" * 40, "/app/index.html": "B" * 40},
    }
    manifest = read(doc)
    assert set(manifest.files) == {"main.js", "index.html"}
    assert manifest.files["index.html"].entry
    assert manifest.files["index.html"].hashes == {"sha1": "b" * 40}
    assert {raw for raw, _ in manifest.rejected} == {"/other/x.js", "//evil.com/y"}


@pytest.mark.parametrize(
    "index", [None, 3, "//evil.com/index.html", "index.html", "/../x/index.html"]
)
def test_ngsw_odd_index_falls_back_to_the_root(index: Any) -> None:
    doc = {"configVersion": 1, "index": index, "hashTable": {"/main.js": "a" * 40}}
    assert "main.js" in read(doc, "ngsw").files


def test_propshaft_legacy_flat_manifest_is_read_by_its_name() -> None:
    doc = {"application.js": "application-1a2b3c4d.js", "logo.png": "logo-5e6f7a8b.png"}
    manifest = read(doc, path_hint="assets/.manifest.json")
    assert manifest.format == "propshaft"
    assert manifest.files["application-1a2b3c4d.js"].entry
    assert not manifest.has_hashes


def test_propshaft_app_key_is_ignored() -> None:
    doc = {"application.js": {"digested_path": "application-1.js", "integrity": SRI, "app": True}}
    manifest = read(doc)
    assert manifest.format == "propshaft"
    assert manifest.files["application-1.js"].hashes == {"sha256": hashlib.sha256(b"y").hexdigest()}


def test_vite_4_manifest_at_the_root_is_vite_by_shape() -> None:
    doc = {"index.html": {"file": "assets/index.4f2a.js", "isEntry": True, "css": ["assets/i.css"]}}
    manifest = read(doc, path_hint="manifest.json")
    assert manifest.format == "vite"
    assert {p for p, e in manifest.files.items() if e.entry} == {
        "assets/index.4f2a.js",
        "assets/i.css",
        "index.html",
    }


def test_vite_html_entries_in_subdirectories() -> None:
    doc = {
        "pages/about.html": {"file": "assets/about-1.js", "isEntry": True},
        "src/lazy.js": {"file": "assets/lazy-2.js", "isDynamicEntry": True, "isEntry": "yes"},
    }
    manifest = read(doc)
    assert manifest.files["pages/about.html"].entry
    assert not manifest.files["assets/lazy-2.js"].entry


def test_cra_entrypoints_match_files_under_a_public_url() -> None:
    doc = {
        "files": {"main.js": "/app/static/js/main.1.js", "index.html": "/app/index.html"},
        "entrypoints": ["static/js/main.1.js", "static/css/missing.css"],
    }
    manifest = read(doc)
    assert manifest.files["app/static/js/main.1.js"].entry
    assert manifest.files["static/css/missing.css"].entry  # listed only there: kept


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),  # a bool is an int to Python, never a number to JSON
        (0, "number"),
        (1.5, "number"),
        ("x", "string"),
        ([], "array"),
        ({}, "object"),
        (b"x", "bytes"),
    ],
)
def test_messages_name_json_types_as_json_does(value: Any, name: str) -> None:
    assert kind(value) == name
