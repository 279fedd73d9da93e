"""``--output html``: always to a file, refused before any request otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main

#: A target nobody listens on: a refused --output must exit before it is contacted.
TARGET = ["-t", "http://127.97.2.1:9/=1.4.2", "--release-manifest", "release.json"]


@pytest.mark.parametrize("value", ["html", "html=-", "html="])
def test_html_to_standard_output_is_a_usage_error(value: str) -> None:
    r = CliRunner().invoke(main, ["verify", *TARGET, "-o", value])
    assert r.exit_code == 2, r.output
    assert f"--output {value!r}" in r.output
    assert "html=FILE" in r.output


def test_html_to_a_file_that_cannot_be_written_is_a_usage_error(tmp_path: Path) -> None:
    dest = tmp_path / "no-such-dir" / "report.html"
    r = CliRunner().invoke(main, ["verify", *TARGET, "-o", f"html={dest}"])
    assert r.exit_code == 2, r.output
    assert f"--output {dest}" in r.output


def test_help_says_html_goes_to_a_file() -> None:
    r = CliRunner().invoke(main, ["verify", "--help"], terminal_width=200)
    assert r.exit_code == 0
    assert "html=FILE" in " ".join(r.output.split())


@pytest.mark.parametrize("value", ["html", "html=-"])
def test_fleet_html_to_standard_output_is_a_usage_error(value: str) -> None:
    r = CliRunner().invoke(main, ["fleet", *TARGET, "-o", value])
    assert r.exit_code == 2, r.output
    assert "html=FILE" in r.output


def test_investigate_has_no_html_output(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["investigate", "web-1", *TARGET, "-o", f"html={tmp_path / 'x.html'}"]
    )
    assert r.exit_code == 2, r.output
    assert "expected table, json or json=FILE" in r.output
    assert not (tmp_path / "x.html").exists()
