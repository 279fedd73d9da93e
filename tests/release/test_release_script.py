"""``scripts/release.sh VERSION``: one command builds the release from the committed
HEAD, signs it with the releaser's key, and the suite checks it as a user would: the
envelope with the verify-side code (``release/dsse.py``) and the public key, every
artifact against the signed manifest, the wheel installed in a fresh virtual
environment saying 0.2.0 and the commit, the install manifests pinned to the version.
The image is built by the same script where a Docker engine runs (tests/image builds
it with the engine the tests start); here DOCKER_IMAGE=no."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from ci_support import hermetic_environment
from release_keys import KeyPair, make_key

from artifactcheck.manifests import parse_manifest
from artifactcheck.release import dsse

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "release.sh"
VERSION = "0.2.0"
PYTHON = Path(sys.executable)

pytestmark = pytest.mark.slow


def head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def release_sh(version: str, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(SCRIPT), version],
        env={
            **hermetic_environment(),
            "PYTHON": str(PYTHON),
            "OUT": str(out),
            "DOCKER_IMAGE": "no",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, KeyPair]]:
    """The release of HEAD, signed with a key made for this test only."""
    folder = tmp_path_factory.mktemp("release")
    key = make_key("ed25519", folder, name="test-only-release")
    out = folder / "dist"
    done = release_sh(VERSION, out, ARTIFACTCHECK_RELEASE_KEY_FILE=str(key.private_pem))
    assert done.returncode == 0, done.stderr[-4000:]
    yield out, key
    shutil.rmtree(folder, ignore_errors=True)


def test_the_release_has_every_artifact_and_only_them(release: tuple[Path, KeyPair]) -> None:
    out, key = release
    found = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert found == [
        "artifactcheck-0.2.0-install.yaml",
        "artifactcheck-0.2.0-py3-none-any.whl",
        "artifactcheck-0.2.0.cdx.json",
        "artifactcheck-0.2.0.release.json",
        "artifactcheck-0.2.0.release.json.intoto.jsonl",
        "artifactcheck-0.2.0.tar.gz",
        "sim/artifactcheck_sim-0.2.0-py3-none-any.whl",
        "sim/artifactcheck_sim-0.2.0.tar.gz",
    ]
    assert key.private_pem.read_bytes() not in b"".join(p.read_bytes() for p in out.rglob("*.*"))


def test_the_signed_manifest_vouches_for_every_artifact(release: tuple[Path, KeyPair]) -> None:
    out, key = release
    data = (out / "artifactcheck-0.2.0.release.json").read_bytes()
    envelope = (out / "artifactcheck-0.2.0.release.json.intoto.jsonl").read_bytes()
    keys = dsse.load_public_keys(key.public_pem.read_bytes(), str(key.public_pem))
    verified = dsse.verify_release(envelope, keys=keys, data=data, version=VERSION)
    assert verified.predicate["version"] == VERSION
    assert verified.predicate["build"]["commit"] == head()
    manifest = parse_manifest(data, format="native")
    assert manifest.version == VERSION
    artifacts = {
        p.relative_to(out).as_posix(): p
        for p in out.rglob("*")
        if p.is_file() and not p.name.startswith("artifactcheck-0.2.0.release.json")
    }
    assert set(manifest.files) == set(artifacts)
    import hashlib

    for name, path in artifacts.items():
        assert (
            manifest.files[name].hashes.get("sha256")
            == hashlib.sha256(path.read_bytes()).hexdigest()
        ), name


def test_a_tampered_artifact_fails_manifest_verify(
    release: tuple[Path, KeyPair], tmp_path: Path
) -> None:
    out, key = release
    wheel = tmp_path / "artifactcheck-0.2.0-py3-none-any.whl"
    wheel.write_bytes((out / wheel.name).read_bytes() + b"\0")
    done = subprocess.run(
        [PYTHON, "-m", "artifactcheck", "manifest", "verify", str(wheel),
         "--manifest", str(out / "artifactcheck-0.2.0.release.json"),
         "--key", str(key.public_pem)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIFFERS" in done.stdout


def test_the_wheel_in_a_fresh_venv_says_its_version_and_commit(
    release: tuple[Path, KeyPair], tmp_path: Path
) -> None:
    """Installed as a user installs it (no source tree, no .git near it); its
    dependencies are this environment's, reached through a .pth line, so no index is
    asked: the commit can only come from the wheel itself."""
    out, _ = release
    venv = tmp_path / "venv"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # a plain path line: the dependencies, but not the editable checkout's finder
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [PYTHON, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
         "--no-index", str(out / "artifactcheck-0.2.0-py3-none-any.whl")],
        check=True, capture_output=True,
    )  # fmt: skip
    done = subprocess.run(
        [venv / "bin" / "artifactcheck", "--version"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"artifactcheck 0.2.0 (commit {head()})\n"
    where = subprocess.run(
        [python, "-c", "import artifactcheck; print(artifactcheck.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv)), where


def test_the_install_manifests_run_the_released_image(release: tuple[Path, KeyPair]) -> None:
    out, _ = release
    docs = list(yaml.safe_load_all((out / "artifactcheck-0.2.0-install.yaml").read_text()))
    images = [
        c["image"]
        for d in docs
        if d and d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    ]
    assert images == ["artifactcheck:0.2.0"]
    assert {d["kind"] for d in docs} >= {"CustomResourceDefinition", "Namespace", "Deployment"}
    unchanged = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "--", "k8s"])
    assert unchanged.returncode == 0, "the release edited k8s/ in place"


def test_the_sbom_lists_the_image_environment(release: tuple[Path, KeyPair]) -> None:
    out, _ = release
    bom = json.loads((out / "artifactcheck-0.2.0.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX"
    root = bom["metadata"]["component"]
    assert (root["name"], root["version"]) == ("artifactcheck", VERSION)
    names = {c["name"].lower().replace("_", "-") for c in bom["components"]}
    assert {"httpx", "pydantic", "kubernetes", "cryptography", "click"} <= names
    assert not names & {"pip", "setuptools", "pytest", "artifactcheck-sim"}, names


@pytest.mark.parametrize(
    ("version", "env", "says"),
    [
        ("0.2.1", {"UNSIGNED": "1"}, "VERSION 0.2.1: pyproject.toml says 0.2.0"),
        (VERSION, {}, "no signing key"),
        (VERSION, {"ARTIFACTCHECK_RELEASE_KEY_FILE": "/nonexistent"}, "cannot read"),
    ],
    ids=["other-version", "no-key", "unreadable-key"],
)
def test_a_misconfigured_release_exits_2_before_building(
    version: str, env: dict[str, str], says: str, tmp_path: Path
) -> None:
    done = release_sh(version, tmp_path / "dist", **env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert not (tmp_path / "dist").exists()


def test_an_old_file_in_the_output_is_never_signed_along(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "artifactcheck-0.1.0.tar.gz").write_bytes(b"old")
    done = release_sh(VERSION, tmp_path / "dist", UNSIGNED="1")
    assert done.returncode == 2 and "not empty" in done.stderr, done.stderr
