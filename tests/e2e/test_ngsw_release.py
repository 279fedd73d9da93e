"""Angular's ``ngsw.json`` as the release manifest: its SHA-1s vouch for the bytes.

The service worker refuses a file whose SHA-1 differs from ``hashTable``, so an
``ngsw.json`` is a release source like a native manifest, compared by SHA-1 and named
so ("sha1") in the coverage and the findings. It has no application version: a
concrete file declares ``appData.version`` (Angular's place for it, copied from
``ngsw-config.json``) or is refused with how to give one; a ``{version}`` template
names the version by the operator's choice. Never is it applied to every version.

The builds are the real ``ngsw-config`` outputs of tests/fixtures (README.md there).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck_sim.web import Site

BUILDS = Path(__file__).parents[1] / "fixtures" / "builds"
R1, R2 = BUILDS / "ngsw-r1", BUILDS / "ngsw-r2"
CHANGED = "assets/report-50WvgzG_.js"  # in R1's hashTable


def verify(*args: str) -> Any:
    return CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)


def releases(tmp_path: Path, app_version: str | None = None) -> dict[str, Path]:
    """releases/1.0.0/ngsw.json and releases/2.0.0/ngsw.json, optionally with appData."""
    out = {}
    for version, build in (("1.0.0", R1), ("2.0.0", R2)):
        doc = json.loads((build / "ngsw.json").read_text())
        if app_version is not None:
            doc["appData"] = {"version": app_version if version == "1.0.0" else version}
        folder = tmp_path / "releases" / version
        folder.mkdir(parents=True)
        (folder / "ngsw.json").write_text(json.dumps(doc, indent=2))
        out[version] = folder / "ngsw.json"
    return out


def serve(web: Any, host: str, build: Path = R1, **overrides: bytes) -> str:
    return web.add(Site(root=build, overrides=dict(overrides)), host)


def test_a_template_of_ngsw_manifests_vouches_by_sha1(tmp_path: Path, web: Any) -> None:
    releases(tmp_path)
    url = serve(web, "127.93.60.1")
    template = str(tmp_path / "releases" / "{version}" / "ngsw.json")
    table = verify("--target", f"{url}=1.0.0", "--release-manifest", template)
    assert table.exit_code == 0, table.output
    assert "6 of 6 files, sha1" in table.output
    out = verify("--target", f"{url}=1.0.0", "--release-manifest", template, "-o", "json")
    (r,) = json.loads(out.stdout)["results"]
    assert r["verdict"] == "consistent" and r["verified"] is True
    assert r["coverage"]["hashes"] == ["sha1"] and r["coverage"]["complete"] is True
    assert json.loads(out.stdout)["names_only"] is False


def test_a_file_whose_sha1_differs_is_a_mismatch_named_sha1(tmp_path: Path, web: Any) -> None:
    releases(tmp_path)
    url = serve(web, "127.93.60.2", **{CHANGED: b"console.log('rebuilt under 1.0.0')\n"})
    template = str(tmp_path / "releases" / "{version}" / "ngsw.json")
    table = verify("--target", f"{url}=1.0.0", "--release-manifest", template)
    assert table.exit_code == 1, table.output
    assert f"{CHANGED} differs from release 1.0.0 (sha1)" in table.output


def test_an_instance_serving_the_other_release_is_named(tmp_path: Path, web: Any) -> None:
    """Both releases indexed by SHA-1: serving 2.0.0's build while reporting 1.0.0."""
    releases(tmp_path)
    url = serve(web, "127.93.60.3", build=R2)
    template = str(tmp_path / "releases" / "{version}" / "ngsw.json")
    out = verify(
        "--target",
        f"{url}=1.0.0",
        "--release-manifest",
        template,
        "--known-version",
        "2.0.0",
        "-o",
        "json",
    )
    assert out.exit_code == 1, out.output
    (r,) = json.loads(out.stdout)["results"]
    assert r["verdict"] == "mismatch", r["reason"]
    assert r["serves_version"] == "2.0.0" and "serves 2.0.0's content" in r["reason"]


def test_a_concrete_ngsw_without_a_version_is_refused_saying_how_to_give_one(
    tmp_path: Path, web: Any
) -> None:
    url = serve(web, "127.93.60.4")
    plain = tmp_path / "ngsw.json"
    shutil.copy(R1 / "ngsw.json", plain)
    r = verify("--target", f"{url}=1.0.0", "--release-manifest", str(plain))
    assert r.exit_code == 2, r.output
    assert "declares no version" in r.output
    assert "appData" in r.output and "{version}" in r.output


def test_a_concrete_ngsw_declaring_app_data_version_is_used_for_that_version_only(
    tmp_path: Path, web: Any
) -> None:
    made = releases(tmp_path, app_version="1.0.0")
    one = serve(web, "127.93.60.5")
    other = serve(web, "127.93.60.6")
    args = ["--target", f"{one}=1.0.0", "--target", f"{other}=3.0.0"]
    out = verify(*args, "--release-manifest", str(made["1.0.0"]), "-o", "json")
    assert out.exit_code == 3, out.output  # 3.0.0 has no release: inconclusive, not mismatch
    results = {r["url"]: r for r in json.loads(out.stdout)["results"]}
    assert results[one]["verdict"] == "consistent"
    assert results[one]["coverage"]["hashes"] == ["sha1"]
    assert results[other]["verdict"] == "inconclusive", results[other]["reason"]
    assert (
        "declares version" in results[other]["reason"] or "no release" in (results[other]["reason"])
    )


@pytest.mark.parametrize("bad", [None, 7, "1.0.0/..", ""])
def test_an_app_data_version_outside_the_grammar_declares_nothing(tmp_path: Path, bad: Any) -> None:
    from artifactcheck.manifests import parse_manifest

    doc = json.loads((R1 / "ngsw.json").read_text())
    doc["appData"] = {"version": bad}
    assert parse_manifest(json.dumps(doc), path_hint="ngsw.json").version is None
    doc["appData"] = {"version": "1.0.0"}
    assert parse_manifest(json.dumps(doc), path_hint="ngsw.json").version == "1.0.0"


def test_without_a_served_ngsw_the_release_files_are_still_hashed_by_sha1(
    tmp_path: Path, web: Any
) -> None:
    """The SHA-1 is computed because the *release* needs it, not only when the instance
    serves an ngsw.json of its own (here it serves none: judged by the release's list)."""
    from artifactcheck_sim.web import Status

    releases(tmp_path)
    url = web.add(Site(root=R1, overrides={"ngsw.json": Status(404)}), "127.93.60.7")
    template = str(tmp_path / "releases" / "{version}" / "ngsw.json")
    out = verify("--target", f"{url}=1.0.0", "--release-manifest", template, "-o", "json")
    (r,) = json.loads(out.stdout)["results"]
    assert r["manifest"]["format"] is None  # nothing served at ngsw.json
    assert r["coverage"]["compared"] == 6 and r["coverage"]["hashes"] == ["sha1"], r["reason"]
    assert r["verdict"] == "consistent" and r["verified"] is True, r["reason"]
    assert out.exit_code == 0, out.output
