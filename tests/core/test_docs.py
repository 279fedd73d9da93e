"""Generated documentation stays in step with the code that generates it."""

from __future__ import annotations

from pathlib import Path

from artifactcheck.model.settings import markdown_reference

ROOT = Path(__file__).resolve().parents[2]


def test_configuration_reference_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == markdown_reference(), (
        "docs/configuration.md is stale: "
        "python -m artifactcheck.model.settings > docs/configuration.md"
    )


def test_readme_commands_exist() -> None:
    """The README's two commands exist, and CI runs the README's test command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert "sh scripts/setup.sh demo" in readme and "sh scripts/setup.sh test" in readme
    assert '"$venv/bin/artifactcheck" demo' in setup
    assert '"$venv/bin/python" -m pytest -q' in setup
    assert "bash .ci/run" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "sh scripts/setup.sh test" in ci
