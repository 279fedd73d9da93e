"""``verify --previous-version``: the usage errors, found before any request (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.model.settings import CheckSpec

BUILDS = Path(__file__).resolve().parents[1] / "fixtures" / "builds"
#: Nothing listens there: a usage error must come before any request.
TARGET = ["-t", "http://127.0.0.1:9/=2.0.0"]


@pytest.fixture
def release_file(tmp_path: Path) -> str:
    out = tmp_path / "release-2.0.0.json"
    r = CliRunner().invoke(
        main, ["manifest", "build", str(BUILDS / "vite-r2"), "--version", "2.0.0", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    return str(out)


def verify(*args: str) -> tuple[int, str]:
    r = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["verify", *TARGET, *args])
    return r.exit_code, r.output


def test_nowhere_to_check_names_both_flags(release_file: str) -> None:
    code, out = verify("--release-manifest", release_file, "--previous-version", "1.0.0")
    assert code == 2, out
    assert "--previous-version" in out and "--cdn" in out and "--previous-on-instances" in out


def test_a_previous_version_that_is_the_desired_one_is_a_usage_error(release_file: str) -> None:
    code, out = verify(
        "--release-manifest",
        release_file,
        "--cdn",
        "http://127.0.0.1:9/",
        "--desired-version",
        "2.0.0",
        "--previous-version",
        "2.0.0",
    )
    assert code == 2, out
    assert "--previous-version" in out and "2.0.0 is the desired" in out


def test_no_release_source_is_a_usage_error() -> None:
    code, out = verify("--cdn", "http://127.0.0.1:9/", "--previous-version", "1.0.0")
    assert code == 2, out
    assert "--previous-version" in out and "--release-manifest" in out


def test_an_invalid_previous_version_is_a_usage_error(release_file: str) -> None:
    code, out = verify(
        "--release-manifest",
        release_file,
        "--cdn",
        "http://127.0.0.1:9/",
        "--previous-version",
        "../1.0.0",
    )
    assert code == 2, out
    assert "--previous-version" in out


def test_the_same_previous_version_twice_is_refused(release_file: str) -> None:
    code, out = verify(
        "--release-manifest",
        release_file,
        "--cdn",
        "http://127.0.0.1:9/",
        "--previous-version",
        "1.0.0",
        "--previous-version",
        "1.0.0",
    )
    assert code == 2 and "twice" in out, out


def test_yaml_and_crd_spelling() -> None:
    spec = CheckSpec.model_validate(
        {
            "release": {"manifests": ["r-{version}.json"]},
            "previousVersions": ["1.0.0", "0.9.0"],
            "previousOnInstances": True,
            "skewWindow": 600,
        }
    )
    assert spec.previous_versions == ["1.0.0", "0.9.0"] and spec.previous_on_instances
    assert spec.skew_window == 600
