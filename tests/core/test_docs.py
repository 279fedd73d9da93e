"""Generated documentation stays in step with the code that generates it."""

from __future__ import annotations

from pathlib import Path

from artifactcheck.settings import markdown_reference

ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == markdown_reference(), (
        "docs/configuration.md is stale: python -m artifactcheck.settings > docs/configuration.md"
    )


def test_readme_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "artifactcheck demo" in readme
    assert "bash .ci/run" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python3 -m pytest -q" in ci and "python3 -m pytest -q" in readme
