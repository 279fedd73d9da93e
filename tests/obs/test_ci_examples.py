"""The CI examples (k8s/integrations/ci/): they parse, wire the reports where each CI
system reads them, and their `artifactcheck verify` command lines work: each is taken
out of its YAML, its variables filled in for the simulated cluster, and run, so a
renamed flag or a report path that differs from the published one fails here."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner
from markdown_it import MarkdownIt
from obs_support import ROOT

from artifactcheck.cli.main import main
from artifactcheck_sim.cluster import SimCluster

CI = ROOT / "k8s" / "integrations" / "ci"
GITHUB, GITLAB = CI / "github-actions.yml", CI / "gitlab-ci.yml"


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc


def commands(script: str) -> list[str]:
    """The `artifactcheck` command lines of a shell script (continuations joined)."""
    joined = re.sub(r"\\\n", " ", script)
    return [
        line.strip() for line in joined.splitlines() if line.strip().startswith("artifactcheck ")
    ]


def github_commands() -> list[tuple[str, dict[str, str]]]:
    doc = load(GITHUB)
    out = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            for line in commands(step.get("run", "")):
                env = {**doc.get("env", {}), **job.get("env", {}), **step.get("env", {})}
                out.append((line, env))
    return out


def gitlab_commands() -> list[tuple[str, dict[str, str]]]:
    doc = load(GITLAB)
    out = []
    for job in doc.values():
        if not isinstance(job, dict) or "script" not in job:
            continue
        for item in job["script"]:
            for line in commands(item):
                out.append((line, {**doc.get("variables", {}), **job.get("variables", {})}))
    return out


def argv(line: str, values: dict[str, str]) -> list[str]:
    """The arguments the shell would pass: words split, ``$VAR``/``${VAR}`` replaced
    (an unknown variable fails the test: the example relies on something unset)."""

    def one(match: re.Match[str]) -> str:
        return values[match.group(1) or match.group(2)]

    words = shlex.split(line)
    assert words[0] == "artifactcheck"
    return [re.sub(r"\$\{(\w+)\}|\$(\w+)", one, w) for w in words[1:]]


def output_files(args: list[str]) -> dict[str, str]:
    found = {}
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("-o", "--output") and "=" in value:
            kind, dest = value.split("=", 1)
            found[kind] = dest
    return found


def test_the_github_workflow_verifies_after_the_deploy_and_publishes_the_reports() -> None:
    doc = load(GITHUB)
    assert doc.get("on", doc.get(True))  # PyYAML reads the key `on` as True
    verify = doc["jobs"]["verify"]
    assert verify["needs"] == "deploy"
    assert verify["permissions"]["checks"] == "write"
    ((line, _),) = github_commands()
    outputs = output_files(argv(line, {**_any_values(), "GITHUB_STEP_SUMMARY": "S"}))
    assert outputs["markdown"] == "S"  # the job summary
    steps = verify["steps"]
    junit = next(s for s in steps if "junit-report" in s.get("uses", ""))
    assert junit["with"]["report_paths"] == outputs["junit"]
    assert "cancelled()" in junit["if"]  # published when verify failed too
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert outputs["junit"] in upload["with"]["path"] and outputs["json"] in upload["with"]["path"]
    for job in doc["jobs"].values():
        for step in job["steps"]:
            # workflow expressions only through env: pasted into a script they are code
            assert "${{" not in step.get("run", ""), step


def test_the_gitlab_pipeline_verifies_after_the_deploy_and_publishes_the_reports() -> None:
    doc = load(GITLAB)
    assert doc["stages"].index("deploy") < doc["stages"].index("verify")
    verify = doc["verify"]
    assert verify["needs"] == ["deploy"]
    ((line, _),) = gitlab_commands()
    outputs = output_files(argv(line, _any_values()))
    assert verify["artifacts"]["reports"]["junit"] == outputs["junit"]
    assert verify["artifacts"]["when"] == "always"
    assert {outputs["json"], outputs["markdown"]} <= set(verify["artifacts"]["paths"])
    # VERSION comes from the deploy job's dotenv report
    assert doc["deploy"]["artifacts"]["reports"]["dotenv"] == "deploy.env"


def _any_values() -> dict[str, str]:
    names = "NAMESPACE SELECTOR POD_PORT RELEASE_MANIFEST CDN_URL VERSION".split()
    return {n: f"<{n}>" for n in names}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SimCluster]:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with SimCluster(first_host="127.83.0.1", cdn_host="127.83.255.1") as c:
        monkeypatch.setenv("KUBECONFIG", c.api.write_kubeconfig(str(tmp_path / "kubeconfig")))
        yield c


def _values(cluster: SimCluster, summary: Path) -> dict[str, str]:
    """The examples' variables for the simulated cluster (its pods are labelled app=web)."""
    return {
        "NAMESPACE": cluster.namespace,
        "SELECTOR": "app=web",
        "POD_PORT": str(cluster.port),
        "RELEASE_MANIFEST": cluster.release_template,
        "CDN_URL": cluster.cdn_url,
        "VERSION": "1.4.2",
        "ARTIFACTCHECK_PACKAGE": "unused",
        "GITHUB_STEP_SUMMARY": str(summary),
    }


@pytest.mark.parametrize("example", ["github", "gitlab"])
def test_the_command_line_runs_and_fails_the_job_on_a_bad_pod(
    example: str, cluster: SimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods = [cluster.add_pod(gated=False) for _ in range(3)]
    cluster.kubelet_sync()
    monkeypatch.chdir(tmp_path)
    ((line, env),) = github_commands() if example == "github" else gitlab_commands()
    summary = tmp_path / "step-summary.md"
    values = {**env, **_values(cluster, summary)}
    args = argv(line, values)
    outputs = output_files(args)

    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    suite = ET.parse(tmp_path / outputs["junit"]).getroot()
    assert suite.get("tests") == str(len(pods)) and suite.get("failures") == "0"
    markdown = Path(outputs["markdown"]).read_text(encoding="utf-8")
    assert markdown.startswith("### artifactcheck: exit 0")
    assert "table_open" in {
        t.type for t in MarkdownIt("commonmark").enable("table").parse(markdown)
    }
    assert (tmp_path / outputs["json"]).exists()

    cluster.add_pod(serves="1.4.1", gated=False)
    cluster.kubelet_sync()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.output  # the job fails
    suite = ET.parse(tmp_path / outputs["junit"]).getroot()
    assert suite.get("failures") == "1"
    assert "**mismatch**" in Path(outputs["markdown"]).read_text(encoding="utf-8")
