"""The CI recipe of artifactcheck's own release
(k8s/integrations/ci/github-actions-artifactcheck-release.yml): it runs
scripts/release.sh with the tag's version, gives it only variables the script reads,
keeps workflow expressions out of shell text, and publishes what the script wrote."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "k8s" / "integrations" / "ci" / "github-actions-artifactcheck-release.yml"
SCRIPT = ROOT / "scripts" / "release.sh"


def steps() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = doc["jobs"]["release"]["steps"]
    return found


def read_by_script() -> set[str]:
    """The variables scripts/release.sh reads (``${NAME``, ``$NAME``) and those its
    header documents for the commands it runs (the key's passphrase, read by
    ``manifest sign``)."""
    code = SCRIPT.read_text(encoding="utf-8")
    documented = re.findall(r"^#   ([A-Z][A-Z0-9_]+)", code, flags=re.M)
    return {*re.findall(r"\$\{?([A-Z][A-Z0-9_]+)", code), *documented}


def test_the_release_step_runs_the_script_with_the_tags_version() -> None:
    (step,) = [s for s in steps() if "scripts/release.sh" in s.get("run", "")]
    assert 'scripts/release.sh "${TAG#v}"' in step["run"]
    given = {k for k in step["env"] if k != "RELEASE_PUBLIC_KEY"}
    given |= set(re.findall(r"^\s*([A-Z_]+)=", step["run"], flags=re.M))
    unknown = given - read_by_script()
    assert not unknown, f"the recipe sets variables release.sh never reads: {unknown}"
    assert {"ARTIFACTCHECK_RELEASE_KEY", "ARTIFACTCHECK_RELEASE_PUBLIC_KEY"} <= given


def test_no_workflow_expression_is_pasted_into_shell_text() -> None:
    for step in steps():
        assert "${{" not in step.get("run", ""), step.get("name")


def test_what_is_published_is_what_the_script_wrote() -> None:
    (upload,) = [s for s in steps() if str(s.get("uses", "")).startswith("actions/upload")]
    assert upload["with"]["path"] == "dist/"
    assert "out=${OUT:-dist}" in SCRIPT.read_text(encoding="utf-8")
