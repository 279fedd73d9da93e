"""Where the expected release comes from: which manifest judges which version.

Real files on disk and a real loopback server for URL sources; the pipeline is not
involved, so each rule of the release source is pinned on its own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests import native
from artifactcheck.manifests.limits import DEFAULT_LIMITS
from artifactcheck.model.errors import ConfigError, ExpectationUnavailable
from artifactcheck.model.settings import CheckSpec, HttpSettings, RetrySettings, load_spec
from artifactcheck.model.values import Manifest
from artifactcheck.release.sources import (
    Expectations,
    ReleaseSet,
    TemplateSource,
    expand,
    is_template,
    plan_release_manifests,
)
from artifactcheck.release.wiring import build_expectations
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Site, Status, WebFleet

R1, R2 = "1.4.1", "1.4.2"


def release_bytes(version: str, build: str = R1) -> bytes:
    return native.dump(native.build(RELEASES[build], version=version))


@pytest.fixture
def releases(tmp_path: Path) -> Path:
    """releases/1.4.1.json and releases/1.4.2.json, native, each declaring its version."""
    d = tmp_path / "releases"
    d.mkdir()
    (d / f"{R1}.json").write_bytes(release_bytes(R1, R1))
    (d / f"{R2}.json").write_bytes(release_bytes(R2, R2))
    return d


@pytest.fixture
def web() -> Iterator[WebFleet]:
    with WebFleet(name="test-expect") as fleet:
        yield fleet


def spec(*sources: str, **extra: Any) -> CheckSpec:
    return load_spec({"release": {"manifests": list(sources)}, **extra})


def expectations(s: CheckSpec, fetcher: Fetcher | None = None) -> Expectations:
    built = build_expectations(s, fetcher)  # type: ignore[arg-type]
    assert built is not None
    return built


def get(exp: Expectations, version: str):
    return asyncio.run(exp.get(version))


async def with_fetcher(s: CheckSpec, versions: list[str]) -> list[Any]:
    async with Fetcher(http=HttpSettings(), retry=RetrySettings(attempts=1)) as fetcher:
        exp = expectations(s, fetcher)
        return [await exp.get(v) for v in versions]


# --------------------------------------------------------------------- concrete files


def test_concrete_files_are_indexed_by_their_declared_versions(releases: Path) -> None:
    exp = expectations(spec(str(releases / f"{R2}.json"), str(releases / f"{R1}.json")))
    one, two = get(exp, R1), get(exp, R2)
    assert one.manifest is not None and one.manifest.version == R1
    assert two.manifest is not None and two.manifest.version == R2
    assert one.manifest.fingerprint() != two.manifest.fingerprint()


def test_the_file_name_does_not_choose_the_version(releases: Path, tmp_path: Path) -> None:
    """A file called 1.4.2.json that declares 1.4.1 is 1.4.1's manifest, nothing else."""
    misnamed = tmp_path / f"{R2}.json"
    shutil.copy(releases / f"{R1}.json", misnamed)
    exp = expectations(spec(str(misnamed)))
    assert get(exp, R1).manifest is not None
    missing = get(exp, R2)
    assert missing.manifest is None
    assert missing.error is not None
    assert f"no release manifest declares version {R2}" in missing.error
    assert f"declares {R1}" in missing.error


def test_two_concrete_files_declaring_one_version_is_a_config_error(
    releases: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.json"
    shutil.copy(releases / f"{R1}.json", copy)
    with pytest.raises(ConfigError, match=f"both declare version {R1}") as caught:
        expectations(spec(str(releases / f"{R1}.json"), str(copy)))
    assert caught.value.field == "release.manifests"


def test_a_missing_local_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothere.json: cannot read") as caught:
        plan_release_manifests(
            spec(str(tmp_path / "nothere.json")), fetcher=None, limits=DEFAULT_LIMITS
        )
    assert str(caught.value).startswith("release.manifests: ")


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "release.json"
    bad.write_text("{not json", "utf-8")
    with pytest.raises(ConfigError, match=r"release\.json: not a usable release manifest"):
        expectations(spec(str(bad)))


def test_a_concrete_manifest_declaring_no_version_is_refused(tmp_path: Path) -> None:
    doc = json.loads(release_bytes(R1))
    del doc["version"]
    unversioned = tmp_path / "release.json"
    unversioned.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(ConfigError, match="declares no version"):
        expectations(spec(str(unversioned)))


def test_a_hashless_local_manifest_is_refused_unless_allowed() -> None:
    vite = str(RELEASES[R1] / ".vite" / "manifest.json")
    with pytest.raises(ConfigError, match="manifest build") as caught:
        expectations(spec(vite))
    assert "--allow-names-only" in str(caught.value)
    # allowed: accepted, but a Vite manifest declares no version, so a template is needed
    with pytest.raises(ConfigError, match="declares no version"):
        expectations(spec(vite, allow_names_only=True))


def test_a_partly_hashed_manifest_is_names_only(tmp_path: Path) -> None:
    """One file without sha256 is one file whose bytes nobody vouches for."""
    doc = json.loads(release_bytes(R1))
    doc["files"]["index.html"] = {"sha256": "a" * 64, "size": 1}
    webpack = {"main.js": "main.0f1e2d.js", "index.html": "index.html"}
    (tmp_path / "ok.json").write_text(json.dumps(doc), "utf-8")
    (tmp_path / "assets-manifest.json").write_text(json.dumps(webpack), "utf-8")
    assert expectations(spec(str(tmp_path / "ok.json"))).names_only is False
    with pytest.raises(ConfigError, match="no content hash for"):
        expectations(spec(str(tmp_path / "assets-manifest.json")))


# --------------------------------------------------------------------- templates


def test_a_template_expansion_must_declare_its_version(releases: Path) -> None:
    shutil.copy(releases / f"{R1}.json", releases / "2.0.0.json")
    exp = expectations(spec(str(releases / "{version}.json")))
    assert get(exp, R1).manifest is not None
    wrong = get(exp, "2.0.0")
    assert wrong.manifest is None
    assert wrong.error is not None and f"declares version {R1}, not 2.0.0" in wrong.error


def test_a_template_expansion_may_declare_none(tmp_path: Path) -> None:
    """Only the native format carries a version: a names-only template file is for the
    version its path names (and only when names-only is allowed)."""
    (tmp_path / R1 / ".vite").mkdir(parents=True)
    shutil.copy(RELEASES[R1] / ".vite" / "manifest.json", tmp_path / R1 / ".vite" / "manifest.json")
    template = str(tmp_path / "{version}" / ".vite" / "manifest.json")
    refused = get(expectations(spec(template)), R1)
    assert refused.manifest is None and "cannot vouch for the bytes" in (refused.error or "")
    allowed = expectations(spec(template, allow_names_only=True))
    assert allowed.names_only is False
    got = get(allowed, R1)
    assert got.manifest is not None and got.manifest.format == "vite"
    assert allowed.names_only is True


def test_concrete_files_first_then_the_template(releases: Path, tmp_path: Path) -> None:
    pinned = tmp_path / "pinned.json"
    (pinned).write_bytes(release_bytes("9.9.9", R2))
    exp = expectations(spec(str(releases / "{version}.json"), str(pinned)))
    assert get(exp, "9.9.9").manifest is not None
    assert get(exp, R1).manifest is not None
    assert "no such file" in (get(exp, "3.0.0").error or "").lower()


def test_at_most_one_template() -> None:
    with pytest.raises(ConfigError, match="at most one '\\{version\\}' template"):
        spec("/a/{version}.json", "/b/{version}.json")


def test_a_template_whose_directory_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        expectations(spec(str(tmp_path / "nope" / "{version}.json")))


def test_a_template_without_the_placeholder_is_a_concrete_file(releases: Path) -> None:
    assert is_template("/r/{version}.json") and not is_template(str(releases / f"{R1}.json"))
    exp = expectations(spec(str(releases / f"{R1}.json")))
    assert get(exp, R2).manifest is None


# --------------------------------------------------------------------- hostile versions


@pytest.mark.parametrize(
    "version",
    ["../release-1.4.1", "1.4.1?a", "1.4.1#x", "a/b", "a\\b", "1.4.1%2f", "..", " 1", "1\n2", ""],
)
def test_an_invalid_version_is_never_looked_up(releases: Path, version: str) -> None:
    exp = expectations(spec(str(releases / "{version}.json")))
    got = get(exp, version)
    assert got.manifest is None
    assert got.error is not None and got.error.startswith("reported version ")
    assert exp.loads == 0, "the source was asked for a hostile version"
    assert exp.known() == {}


class Recording:
    description = "recording"

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def load(self, version: str) -> Manifest:
        self.asked.append(version)
        return Manifest(format="native", files={}, version=version)


def test_no_source_is_asked_for_an_invalid_version() -> None:
    source = Recording()
    exp = Expectations(source)
    assert asyncio.run(exp.get("../x")).error is not None
    assert asyncio.run(exp.get("1.0.0")).manifest is not None
    assert source.asked == ["1.0.0"]


def test_url_expansion_escapes_the_version() -> None:
    assert expand("https://r.example/m/{version}.json", "1.0+b.7") == (
        "https://r.example/m/1.0%2Bb.7.json"
    )
    with pytest.raises(ExpectationUnavailable, match="not a version"):
        expand("https://r.example/m/{version}.json", "1.0.0?a")


def test_file_expansion_stays_in_the_template_directory(tmp_path: Path) -> None:
    inside = tmp_path / "releases"
    inside.mkdir()
    (tmp_path / "secret.json").write_text("{}", "utf-8")
    (inside / "1.0.json").symlink_to(tmp_path / "secret.json")
    (inside / "2.0.json").write_text("{}", "utf-8")
    template = str(inside / "{version}.json")
    assert expand(template, "2.0") == str(inside / "2.0.json")
    with pytest.raises(ExpectationUnavailable, match="outside the template's directory"):
        expand(template, "1.0")
    nested = str(inside / "{version}" / "m.json")
    assert expand(nested, "2.0") == str(inside / "2.0" / "m.json")


def test_a_relative_template_is_anchored_at_its_own_directory(
    releases: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(releases)
    exp = expectations(spec("{version}.json"))
    assert get(exp, R1).manifest is not None


def test_an_image_source_refuses_an_invalid_version() -> None:
    asked: list[str] = []

    def read_image(image: str, site: str, version: str) -> Manifest:
        asked.append(image)
        return Manifest(format="native", files={}, version=version)

    s = load_spec({"release": {"image": {"reference": "web:{version}"}}})
    exp = build_expectations(s, None, read_image=read_image)  # type: ignore[arg-type]
    assert exp is not None
    assert asyncio.run(exp.get("../x")).manifest is None
    with pytest.raises(ExpectationUnavailable, match="not a version"):  # the source too
        asyncio.run(exp.source.load("../x"))
    assert asyncio.run(exp.get("1.0")).manifest is not None
    assert asked == ["web:1.0"]


# --------------------------------------------------------------------- URL sources


def test_concrete_urls_are_read_once_and_indexed(web: WebFleet) -> None:
    base = web.add(
        Site(overrides={"one.json": release_bytes(R1, R1), "two.json": release_bytes(R2, R2)}),
        "127.94.0.1",
    )
    s = spec(base + "one.json", base + "two.json")
    one, two, three = asyncio.run(with_fetcher(s, [R1, R2, "3.0"]))
    assert one.manifest is not None and one.manifest.version == R1
    assert two.manifest is not None and two.manifest.version == R2
    assert three.manifest is None and f"{base}one.json declares {R1}" in (three.error or "")
    assert sorted(r.path for r in web.server(base).received) == ["/one.json", "/two.json"]


def test_an_unreachable_concrete_url_says_so(web: WebFleet) -> None:
    base = web.add(Site(overrides={"one.json": Status(503)}), "127.94.1.1")
    (got,) = asyncio.run(with_fetcher(spec(base + "one.json"), [R1]))
    assert got.manifest is None
    assert "could not be read" in (got.error or "") and "503" in (got.error or "")


def test_two_urls_declaring_one_version_are_unavailable(web: WebFleet) -> None:
    data = release_bytes(R1)
    base = web.add(Site(overrides={"a.json": data, "b.json": data}), "127.94.2.1")
    (got,) = asyncio.run(with_fetcher(spec(base + "a.json", base + "b.json"), [R1]))
    assert got.manifest is None and "all declare version" in (got.error or "")


def test_invalid_json_at_a_url_names_it(web: WebFleet) -> None:
    base = web.add(Site(overrides={"r/1.4.1.json": b"{oops"}), "127.94.3.1")
    (got,) = asyncio.run(with_fetcher(spec(base + "r/{version}.json"), [R1]))
    assert got.manifest is None
    assert f"{base}r/1.4.1.json: not a usable release manifest" in (got.error or "")


def test_template_source_direct_use_checks_the_declared_version(releases: Path) -> None:
    shutil.copy(releases / f"{R1}.json", releases / "5.json")
    source = TemplateSource(str(releases / "{version}.json"), fetcher=None, limits=DEFAULT_LIMITS)
    with pytest.raises(ExpectationUnavailable, match="declares version"):
        asyncio.run(source.load("5"))


def test_release_set_reports_what_it_holds(releases: Path) -> None:
    plan = plan_release_manifests(
        spec(str(releases / f"{R1}.json"), str(releases / "x{version}.json")),
        fetcher=None,
        limits=DEFAULT_LIMITS,
    )
    assert isinstance(plan, ReleaseSet)
    assert plan.description == f"{releases / f'{R1}.json'}, {releases / 'x{version}.json'}"


def test_a_concrete_url_declaring_no_version_is_not_used(web: WebFleet) -> None:
    doc = json.loads(release_bytes(R1))
    del doc["version"]
    base = web.add(Site(overrides={"r.json": json.dumps(doc).encode()}), "127.94.4.1")
    (got,) = asyncio.run(with_fetcher(spec(base + "r.json"), [R1]))
    assert got.manifest is None and "declares no version" in (got.error or "")


def test_the_release_set_itself_refuses_an_invalid_version(releases: Path) -> None:
    """Defence in depth: the set checks the version even when called directly."""
    plan = plan_release_manifests(
        spec(str(releases / f"{R1}.json")), fetcher=None, limits=DEFAULT_LIMITS
    )
    assert plan is not None
    with pytest.raises(ExpectationUnavailable, match="not a version"):
        asyncio.run(plan.load("../1.4.1"))


@pytest.mark.parametrize(
    "template", ["https://{version}.example/m.json", "http://r.example:{version}/m.json"]
)
def test_the_version_never_chooses_the_host(template: str) -> None:
    with pytest.raises(ConfigError, match="not in the host"):
        expectations(spec(template))


def _release_doc(version: str, files: dict[str, str]) -> bytes:
    doc = {
        "schema": native.SCHEMA,
        "version": version,
        "files": {p: {"sha256": h, "size": len(p)} for p, h in files.items()},
    }
    return json.dumps(doc).encode()


async def test_cached_versions_hold_their_unchanged_entries_once(tmp_path: Path) -> None:
    """Consecutive releases share the entries of unchanged files (memory: the cache holds
    each once); every version still reads exactly as its own file says."""
    h = [f"{i:064x}" for i in range(5)]
    docs = {
        "1.0.0": {"a.js": h[0], "b.js": h[1], "index.html": h[2]},
        "1.1.0": {"a.js": h[0], "b.js": h[3], "index.html": h[2], "c.js": h[4]},
        "1.2.0": {"a.js": h[0], "c.js": h[4]},
    }
    for version, files in docs.items():
        (tmp_path / f"{version}.json").write_bytes(_release_doc(version, files))
    cache = Expectations(
        TemplateSource(str(tmp_path / "{version}.json"), fetcher=None, limits=DEFAULT_LIMITS)
    )
    got = {v: (await cache.get(v)).manifest for v in docs}
    for version, manifest in got.items():
        alone = native.parse(
            json.loads(_release_doc(version, docs[version])), limits=DEFAULT_LIMITS
        )
        assert manifest is not None and manifest.files == alone.files
        assert list(manifest.files) == list(alone.files) and manifest.version == version
        assert cache.known()[version] is manifest
    one, two, three = (got[v].files for v in docs)  # type: ignore[union-attr]
    assert one["a.js"] is two["a.js"] is three["a.js"]
    assert one["index.html"] is two["index.html"]
    assert two["c.js"] is three["c.js"]
    assert one["b.js"] is not two["b.js"] and one["b.js"] != two["b.js"]


async def test_a_reloaded_version_shares_only_what_is_still_equal(tmp_path: Path) -> None:
    path = tmp_path / "1.0.0.json"
    old, new = "a" * 64, "b" * 64
    path.write_bytes(_release_doc("1.0.0", {"a.js": old, "b.js": old}))
    now = [0.0]
    cache = Expectations(
        TemplateSource(str(tmp_path / "{version}.json"), fetcher=None, limits=DEFAULT_LIMITS),
        refresh_after=10,
        clock=lambda: now[0],
    )
    first = (await cache.get("1.0.0")).manifest
    path.write_bytes(_release_doc("1.0.0", {"a.js": old, "b.js": new}))
    now[0] = 11
    second = (await cache.get("1.0.0")).manifest
    assert first is not None and second is not None and second is not first
    assert second.files["a.js"] is first.files["a.js"]
    assert second.files["b.js"].hashes == {"sha256": new} != first.files["b.js"].hashes
