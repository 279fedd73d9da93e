"""One version, read at run time from the installed distribution's metadata, and the
commit it was built from: ``artifactcheck --version``, the wheel, the simulator's and
the image's labels all say the same."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import artifactcheck
from artifactcheck import _build_info, _checkout_commit
from artifactcheck.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def declared(project: Path) -> str:
    with project.open("rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    assert isinstance(version, str)
    return version


def test_the_product_the_simulator_and_the_image_declare_one_version() -> None:
    version = declared(ROOT / "pyproject.toml")
    assert version == "0.2.0"
    assert declared(ROOT / "sim" / "pyproject.toml") == version
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.findall(r"^ARG VERSION=(\S+)$", dockerfile, flags=re.M) == [version]


def test_the_version_comes_from_the_installed_metadata() -> None:
    from importlib.metadata import version

    assert (
        artifactcheck.__version__ == version("artifactcheck") == declared(ROOT / "pyproject.toml")
    )


def test_version_from_a_git_checkout_names_its_head() -> None:
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(rf"artifactcheck 0\.2\.0 \(commit {head}(\+dirty)?\)\n", result.output), (
        result.output
    )


def test_a_commit_recorded_at_build_time_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_build_info, "COMMIT", "0123456789abcdef0123456789abcdef01234567")
    result = CliRunner().invoke(main, ["--version"])
    assert result.output == (
        "artifactcheck 0.2.0 (commit 0123456789abcdef0123456789abcdef01234567)\n"
    )


def test_outside_a_checkout_no_commit_is_made_up(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    assert _checkout_commit(tmp_path) is None
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert _checkout_commit(tmp_path) is None  # a repository with no commit yet


def test_the_file_in_git_records_no_commit() -> None:
    """Only a build writes the commit (scripts/release.sh, the Dockerfile); the source
    says None, so a checkout asks git and never shows a stale commit."""
    text = (ROOT / "artifactcheck" / "_build_info.py").read_text(encoding="utf-8")
    assert re.findall(r"^COMMIT.*$", text, flags=re.M) == ["COMMIT: str | None = None"]


def test_the_version_is_never_a_copy_in_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the installed metadata says is what is printed: bumping pyproject.toml
    (and reinstalling) is the whole of changing the version."""
    import importlib.metadata

    asked: list[str] = []

    def metadata_version(name: str) -> str:
        asked.append(name)
        return "9.8.7"

    monkeypatch.setattr(importlib.metadata, "version", metadata_version)
    assert artifactcheck.__version__ == "9.8.7" and asked == ["artifactcheck"]

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert artifactcheck.version() == "0+unknown"
