"""ReleaseSet, built entry by entry from ``release.manifests`` (release.sources)."""

from __future__ import annotations

from pathlib import Path

import pytest

from artifactcheck.manifests.limits import DEFAULT_LIMITS
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import Manifest, ManifestEntry
from artifactcheck.release import sources
from artifactcheck.release.sources import ReleaseSet, plan_release_manifests


def _hashless(where: str, limits: object) -> Manifest:
    """A manifest that declares its version but vouches for no bytes."""
    entry = ManifestEntry(path="main.js")
    return Manifest(format="webpack", files={"main.js": entry}, version="1.0.0", source=where)


def test_a_hashless_local_manifest_makes_the_set_names_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "_read_local", _hashless)
    where = str(tmp_path / "release.json")
    allowed = load_spec({"release": {"manifests": [where]}, "allow_names_only": True})
    releases = plan_release_manifests(allowed, fetcher=None, limits=DEFAULT_LIMITS)
    assert releases is not None and releases.names_only is True
    refused = load_spec({"release": {"manifests": [where]}})
    with pytest.raises(ConfigError, match="no content hash"):
        plan_release_manifests(refused, fetcher=None, limits=DEFAULT_LIMITS)


def test_the_description_names_local_files_then_urls_then_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "_read_local", _hashless)
    local, url = str(tmp_path / "release.json"), "https://releases.example/1.json"
    template = str(tmp_path / "{version}.json")
    spec = load_spec({"release": {"manifests": [template, url, local]}, "allow_names_only": True})
    releases = plan_release_manifests(spec, fetcher=None, limits=DEFAULT_LIMITS)
    assert releases is not None
    assert releases.description == f"{local}, {url}, {template}"
    assert releases.template is not None and releases.template.allow_names_only is True


def test_a_second_template_is_refused(tmp_path: Path) -> None:
    releases = ReleaseSet(fetcher=None, limits=DEFAULT_LIMITS)
    releases.add(str(tmp_path / "{version}.json"))
    with pytest.raises(ConfigError, match="both '{version}' templates"):
        releases.add(str(tmp_path / "{version}" / "m.json"))
