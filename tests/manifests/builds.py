"""Real build outputs under ``tests/fixtures/builds`` and how to read each one.

Every reader is tested against what the real tool wrote, two releases each, because
the formats' details (path prefixes, SRI encodings, which hash means what) are only
known for sure from real output.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from artifactcheck.manifests import algorithms_needed, native, parse_manifest
from artifactcheck.model.values import Manifest

BUILDS = Path(__file__).resolve().parents[1] / "fixtures" / "builds"
RELEASES = ("r1", "r2")


@dataclass(frozen=True)
class RealManifest:
    """One real manifest: its format, the build root its paths resolve against, its path."""

    format: str
    release: str
    root: Path
    location: str  # relative to root

    @property
    def file(self) -> Path:
        return self.root / self.location

    def read(self) -> Manifest:
        return parse_manifest(self.file.read_bytes(), location=self.location, source=str(self.file))

    def __str__(self) -> str:
        return f"{self.format}-{self.release}"


def _sprockets_location(root: Path) -> str:
    found = sorted(root.glob(".sprockets-manifest-*.json"))
    assert len(found) == 1, f"expected one Sprockets manifest in {root}, found {found}"
    return found[0].name


def real_manifest(fmt: str, release: str) -> RealManifest:
    """The real manifest of one format and release (fails loudly if the fixture is gone)."""
    layout = {
        "vite": ("vite", ".vite/manifest.json"),
        "webpack-manifest": ("webpack", "manifest.json"),
        "cra": ("webpack", "asset-manifest.json"),
        "webpack-assets": ("webpack", "assets-manifest.json"),
        "django": ("django", "staticfiles.json"),
        "ngsw": ("ngsw", "ngsw.json"),
        "sprockets": ("sprockets", ""),
        "propshaft": ("propshaft", ".manifest.json"),
    }
    directory, location = layout[fmt]
    root = BUILDS / f"{directory}-{release}"
    if fmt == "sprockets":
        location = _sprockets_location(root)
    assert (root / location).is_file(), f"missing fixture {root / location}"
    return RealManifest(fmt, release, root, location)


REAL_FORMATS = (
    "vite",
    "webpack-manifest",
    "cra",
    "webpack-assets",
    "django",
    "ngsw",
    "sprockets",
    "propshaft",
)
REAL = [(fmt, release) for fmt in REAL_FORMATS for release in RELEASES]


def digests(path: Path, manifest: Manifest) -> dict[str, str]:
    """The hex digests of a file on disk for every algorithm the manifest needs."""
    data = path.read_bytes()
    return {algo: hashlib.new(algo, data).hexdigest() for algo in algorithms_needed(manifest)}


def disk_files(root: Path) -> set[str]:
    """Every regular file under a build root, as posix paths relative to it."""
    return {rel for rel, _ in native.walk_files(root)}
