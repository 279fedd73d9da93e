"""The release CI recipes (k8s/integrations/ci/*-release.yml) run for real.

Each recipe's ``artifactcheck`` command lines are taken out of its YAML, its variables
filled in, and run in order on a real build with a real encrypted key: the envelope
they leave must verify with the public key, for the version built, with the CI
system's own build metadata. A renamed flag or a file written elsewhere fails here.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from release_keys import make_key

from artifactcheck.cli.main import main
from artifactcheck.release import dsse
from artifactcheck_sim.fleet import RELEASES

CI = Path(__file__).resolve().parents[2] / "k8s" / "integrations" / "ci"


def _lines(script: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", script)
    return [s.strip() for s in joined.splitlines() if s.strip().startswith("artifactcheck ")]


def github() -> list[str]:
    doc = yaml.safe_load((CI / "github-actions-release.yml").read_text())
    return [
        line for step in doc["jobs"]["release"]["steps"] for line in _lines(step.get("run", ""))
    ]


def gitlab() -> list[str]:
    doc = yaml.safe_load((CI / "gitlab-release.yml").read_text())
    return [line for item in doc["release"]["script"] for line in _lines(item)]


def argv(line: str, values: dict[str, str]) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "artifactcheck"
    return [re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], w) for w in words[1:]]


CASES: dict[str, tuple[Any, dict[str, str], dict[str, str]]] = {
    "github": (
        github,
        {
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "acme/shop",
            "GITHUB_SHA": "0123abc",
            "GITHUB_RUN_ID": "99",
        },
        {"commit": "0123abc", "builder": "https://github.com/acme/shop/actions/runs/99"},
    ),
    "gitlab": (
        gitlab,
        {
            "CI_PROJECT_URL": "https://gitlab.example/acme/shop",
            "CI_COMMIT_SHA": "4567def",
            "CI_JOB_URL": "https://gitlab.example/acme/shop/-/jobs/5",
        },
        {"commit": "4567def", "builder": "https://gitlab.example/acme/shop/-/jobs/5"},
    ),
}


@pytest.mark.parametrize("system", sorted(CASES))
def test_the_release_recipe_writes_a_manifest_and_an_envelope_that_verify(
    system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe, ci_env, expected = CASES[system]
    lines = recipe()
    assert [argv(line, _ANY)[:2] for line in lines] == [["manifest", "build"], ["manifest", "sign"]]
    shutil.copytree(RELEASES["1.4.2"], tmp_path / "dist")
    (tmp_path / "release").mkdir()
    pair = make_key("p256", tmp_path, passphrase=b"pw")
    monkeypatch.chdir(tmp_path)
    for name, value in {**ci_env, "ARTIFACTCHECK_KEY_PASSPHRASE": "pw"}.items():
        monkeypatch.setenv(name, value)
    values = {"VERSION": "1.4.2", "KEY": str(pair.private_pem)}
    values["RELEASE_SIGNING_KEY"] = str(pair.private_pem)
    for line in lines:
        result = CliRunner().invoke(main, argv(line, values))
        assert result.exit_code == 0, result.output
    manifest = (tmp_path / "release" / "1.4.2.json").read_bytes()
    envelope = (tmp_path / "release" / "1.4.2.json.intoto.jsonl").read_bytes()
    key = dsse.load_public_key(pair.public_pem.read_bytes(), "release.pub")
    got = dsse.verify_release(envelope, keys=[key], data=manifest, version="1.4.2")
    assert {k: got.predicate["build"][k] for k in expected} == expected
    assert json.loads(manifest)["version"] == "1.4.2"


_ANY = {n: f"<{n}>" for n in ("VERSION", "KEY", "RELEASE_SIGNING_KEY")}


@pytest.mark.parametrize("name", ["github-actions-release.yml", "gitlab-release.yml"])
def test_the_upload_never_replaces_a_published_version(name: str) -> None:
    text = (CI / name).read_text()
    assert "--if-none-match '*'" in text
    assert '"$VERSION.json" "$VERSION.json.intoto.jsonl"' in text  # both files go up
