"""Every reader against real build output, both releases.

The hash checks here are the proof that SRI, SHA-1, ``digest`` and Django's MD5
prefix are decoded right: each hash a manifest declares is checked against the bytes
of the file the real tool wrote next to it.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from artifactcheck.manifests import (
    MD5_PREFIX,
    algorithms_needed,
    parse_manifest,
    verify_integrity,
)
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.records import replace

from .builds import REAL_FORMATS, RealManifest, digests, disk_files, real_manifest

#: The hashes each real format carries, and what a fetcher must compute for them.
HASHES = {
    "vite": set(),
    "webpack-manifest": set(),
    "cra": set(),
    "webpack-assets": {"sha256", "sha384"},
    "django": {"md5"},
    "ngsw": {"sha1"},
    "sprockets": {"sha256"},
    "propshaft": {"sha256"},
}


def test_reads_every_file_it_lists_from_the_build(real: RealManifest) -> None:
    manifest = real.read()
    on_disk = disk_files(real.root)
    assert manifest.format == real.format
    assert manifest.rejected == ()
    assert len(manifest.files) >= 3
    for path, entry in manifest.files.items():
        assert entry.path == path == normalise_path(path)
        assert path in on_disk, f"{real}: {path} is listed but was not built"


def test_detected_without_being_told(real: RealManifest) -> None:
    manifest = parse_manifest(real.file.read_bytes(), path_hint=real.location)
    assert manifest.format == real.format
    assert manifest == replace(real.read(), source=None)


def test_declared_hashes_match_the_bytes_on_disk(real: RealManifest) -> None:
    manifest = real.read()
    assert algorithms_needed(manifest) == HASHES[real.format]
    checked = 0
    for path, entry in manifest.files.items():
        if not entry.hashes:
            continue
        computed = digests(real.root / path, manifest)
        assert verify_integrity(entry, computed) == [], f"{real}: {path}"
        if entry.size is not None:
            assert entry.size == (real.root / path).stat().st_size
        checked += 1
    if HASHES[real.format]:
        assert checked >= 3
        assert manifest.has_hashes


def test_tampered_bytes_fail_every_declared_hash(real: RealManifest) -> None:
    manifest = real.read()
    for path, entry in manifest.files.items():
        if not entry.hashes:
            continue
        data = (real.root / path).read_bytes() + b"\n/* injected */"
        computed = {a: hashlib.new(a, data).hexdigest() for a in algorithms_needed(manifest)}
        assert verify_integrity(entry, computed) == sorted(entry.hashes)


@pytest.mark.parametrize("fmt", REAL_FORMATS)
def test_two_releases_differ_in_names_or_bytes(fmt: str) -> None:
    one, two = real_manifest(fmt, "r1"), real_manifest(fmt, "r2")
    m1, m2 = one.read(), two.read()
    assert m1.fingerprint() != m2.fingerprint()
    assert set(m1.files) != set(m2.files) or any(
        m1.files[p].hashes != m2.files[p].hashes for p in m1.files
    )
    for path in set(m1.files) & set(m2.files):
        same_bytes = (one.root / path).read_bytes() == (two.root / path).read_bytes()
        if m1.files[path].hashes:
            assert (m1.files[path].hashes == m2.files[path].hashes) == same_bytes, path


def test_a_release_s_hashes_catch_the_other_release_s_bytes() -> None:
    """ngsw keeps ``index.html`` under one name: only the hash tells the releases apart."""
    one, two = real_manifest("ngsw", "r1"), real_manifest("ngsw", "r2")
    m1 = one.read()
    entry = m1.files["index.html"]
    assert entry.entry
    assert verify_integrity(entry, digests(two.root / "index.html", m1)) == ["sha1"]


def test_vite_lists_every_built_file_but_public_ones() -> None:
    for release in ("r1", "r2"):
        real = real_manifest("vite", release)
        manifest = real.read()
        unlisted = disk_files(real.root) - set(manifest.files)
        assert unlisted == {".vite/manifest.json", "robots.txt"}
        entries = {p for p, e in manifest.files.items() if e.entry}
        assert "index.html" in entries
        assert any(p.endswith(".js") for p in entries)
        assert any(p.endswith(".css") for p in entries)
        js_entry = next(p for p in entries if p.endswith(".js"))
        assert manifest.files[js_entry].logical == "index.html"
        lazy = [e for e in manifest.files.values() if e.logical == "src/report.js"]
        assert len(lazy) == 1 and not lazy[0].entry


def test_webpack_manifests_agree_on_the_file_list() -> None:
    for release in ("r1", "r2"):
        plain = real_manifest("webpack-manifest", release).read()
        cra = real_manifest("cra", release).read()
        sri = real_manifest("webpack-assets", release).read()
        assert set(plain.files) == set(cra.files)
        assert set(sri.files) <= set(plain.files)
        declared = json.loads(real_manifest("cra", release).file.read_text())["entrypoints"]
        assert len(declared) == 2
        assert {p for p, e in cra.files.items() if e.entry} == {*declared, "index.html"}
        maps = [p for p in cra.files if p.endswith(".map")]
        assert maps and not any(cra.files[p].entry for p in maps)
        for path in ("index.html",):
            assert plain.files[path].entry and sri.files[path].entry


def test_webpack_assets_asset_modules_carry_no_integrity() -> None:
    """The plugin writes ``"integrity": ""`` for asset modules; listed, just unhashed."""
    manifest = real_manifest("webpack-assets", "r1").read()
    unhashed = [p for p, e in manifest.files.items() if not e.hashes]
    assert unhashed and all(p.startswith("static/media/") for p in unhashed)


def test_django_md5_prefix_is_of_the_served_bytes_even_for_rewritten_css() -> None:
    for release in ("r1", "r2"):
        real = real_manifest("django", release)
        manifest = real.read()
        for path, entry in manifest.files.items():
            assert entry.logical is not None
            served = (real.root / path).read_bytes()
            assert entry.hashes[MD5_PREFIX] == hashlib.md5(served).hexdigest()[:12]
        css = next(e for e in manifest.files.values() if e.path.endswith(".css"))
        source = (real.root / str(css.logical)).read_bytes()
        # collectstatic rewrote the url() references: the source hashes differently
        assert hashlib.md5(source).hexdigest()[:12] != css.hashes[MD5_PREFIX]


def test_sprockets_digest_is_the_sha256_of_the_file() -> None:
    real = real_manifest("sprockets", "r1")
    manifest = real.read()
    entries = {p for p, e in manifest.files.items() if e.entry}
    assert {manifest.files[p].logical for p in entries} == {"application.js", "application.css"}
    for path, entry in manifest.files.items():
        assert entry.size is not None
        assert entry.hashes["sha256"] == hashlib.sha256((real.root / path).read_bytes()).hexdigest()
    assert not any(p.endswith(".gz") for p in manifest.files)


def test_propshaft_name_digest_is_not_a_content_hash() -> None:
    """Why the reader never uses the 8 hex digits in a Propshaft name as a hash."""
    real = real_manifest("propshaft", "r1")
    for path in real.read().files:
        name_digest = path.rsplit("-", 1)[1].split(".")[0]
        data = (real.root / path).read_bytes()
        assert not hashlib.sha1(data).hexdigest().startswith(name_digest)
        assert not hashlib.sha256(data).hexdigest().startswith(name_digest)


@pytest.mark.parametrize(
    ("fmt", "location", "prefix"),
    [
        ("django", "static/staticfiles.json", "static/"),
        ("propshaft", "assets/.manifest.json", "assets/"),
        ("sprockets", "assets/{name}", "assets/"),
        ("vite", "app/.vite/manifest.json", "app/"),
        ("vite", ".vite/manifest.json", ""),
        ("webpack-assets", "build/assets-manifest.json", "build/"),
        ("ngsw", "app/ngsw.json", "app/"),
    ],
)
def test_location_rebases_relative_paths_onto_the_base_url(
    fmt: str, location: str, prefix: str
) -> None:
    real = real_manifest(fmt, "r1")
    location = location.format(name=real.location)
    moved = parse_manifest(real.file.read_bytes(), location=location)
    assert moved.format == fmt
    assert set(moved.files) == {prefix + p for p in real.read().files}


@pytest.mark.parametrize("fmt", ["webpack-manifest", "cra"])
def test_root_absolute_paths_are_not_rebased(fmt: str) -> None:
    real = real_manifest(fmt, "r1")
    moved = parse_manifest(real.file.read_bytes(), location=f"sub/{real.location}")
    assert set(moved.files) == set(real.read().files)
