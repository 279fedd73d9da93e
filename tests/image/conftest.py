"""The controller image: base images made here, the project's Dockerfile, a real engine.

The engine is the Docker suite's (``tests/docker_engine.py``: ``DOCKER_HOST`` when it
answers, else a private dockerd on its own socket, data root, exec root and pidfile,
stopped and cleaned up at the end of the session); its fixtures are reused here, not
copied. The image is built with the ``docker`` CLI because only the CLI speaks
BuildKit's session protocol (build secrets): the docker.io 20.10 CLI with
``DOCKER_BUILDKIT=1``, or a newer one with the buildx plugin.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SUITE_ENV = "ARTIFACTCHECK_IMAGE_SUITE"


def _load(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


import docker_engine as _docker  # noqa: E402 - the session plugin (tests/conftest.py)

baseimage = _load("artifactcheck_tests_baseimage", HERE / "baseimage.py")

# The session's Docker engine (docker_daemon, docker_client) comes from the plugin.
RUN_ID: str = _docker.RUN_ID
TEST_LABEL: str = _docker.TEST_LABEL
NOTES: list[str] = _docker._NOTES


def head_commit() -> str:
    """The checkout's HEAD: the image's ``REVISION``, as scripts/release.sh passes it."""
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _version_of(cli: str) -> tuple[int, ...]:
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"version (\d+)\.(\d+)", out.stdout)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def buildkit_cli() -> str | None:
    """A docker CLI that can build with BuildKit against any engine: buildx, or < 23."""
    for cli in dict.fromkeys(filter(None, (shutil.which("docker"), "/usr/bin/docker"))):
        if not os.access(cli, os.X_OK):
            continue
        if subprocess.run([cli, "buildx", "version"], capture_output=True).returncode == 0:
            return cli
        if (0, 0) < _version_of(cli) < (23, 0):  # the classic CLI with built-in BuildKit
            return cli
    return None


def pyproject_version() -> str:
    text = (REPO / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    assert match, "no version in pyproject.toml"
    return match.group(1)


@dataclass(frozen=True)
class Built:
    """The controller image built from the project's Dockerfile."""

    tag: str
    cli: str
    env: dict[str, str]
    base: Any  # baseimage.BaseImages
    build_seconds: float
    log: str


@pytest.fixture(scope="session")
def docker_cli_env(docker_daemon: Any) -> tuple[str, dict[str, str]]:
    cli = buildkit_cli()
    if cli is None:
        _docker._unavailable("no docker CLI with BuildKit (docker.io 20.10, or docker-buildx)")
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "DOCKER_HOST": docker_daemon.base_url,
        "DOCKER_BUILDKIT": "1",
    }
    return cli, env


@pytest.fixture(scope="session")
def base_images(docker_cli_env: tuple[str, dict[str, str]], tmp_path_factory: Any) -> Any:
    """The build and runtime base images (mmdebstrap → docker import), cached by tag."""
    cli, env = docker_cli_env
    if os.geteuid() != 0 or shutil.which("mmdebstrap") is None:
        _docker._unavailable("making the base image needs root and mmdebstrap (.ci/docker.sh)")
    suite = os.environ.get(SUITE_ENV, baseimage.DEFAULT_SUITE)
    log = tmp_path_factory.mktemp("mmdebstrap") / "mmdebstrap.log"
    t0 = time.monotonic()
    images = baseimage.ensure(cli, suite, env=env, log=log)
    NOTES.append(
        f"image tests: base images {images.runtime} / {images.build} ready in "
        f"{time.monotonic() - t0:.1f}s (mmdebstrap {images.made_in:.1f}s)"
    )
    return images


@pytest.fixture(scope="session")
def controller_image(
    docker_cli_env: tuple[str, dict[str, str]], base_images: Any, docker_client: Any
) -> Iterator[Built]:
    """``docker build`` of the repository's Dockerfile, nothing pulled; removed at the end."""
    cli, env = docker_cli_env
    tag = f"artifactcheck-test/controller:{RUN_ID}"
    argv = [
        cli, "build", "--pull=false", "--network", "host",
        "--build-arg", f"BASE={base_images.runtime}",
        "--build-arg", f"BUILD_BASE={base_images.build}",
        "--build-arg", f"REVISION={head_commit()}",
        "--label", f"{TEST_LABEL}={RUN_ID}",
        "-t", tag,
    ]  # fmt: skip
    if CA_BUNDLE.is_file():  # the package index may sit behind a CA only this host trusts
        argv += ["--secret", f"id=ca,src={CA_BUNDLE}"]
    t0 = time.monotonic()
    result = subprocess.run(
        [*argv, str(REPO)], env=env, capture_output=True, text=True, timeout=1200, check=False
    )
    seconds = time.monotonic() - t0
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"docker build failed:\n{log[-4000:]}"
    NOTES.append(f"image tests: {tag} built in {seconds:.1f}s")
    try:
        yield Built(tag, cli, env, base_images, seconds, log)
    finally:
        subprocess.run([cli, "image", "rm", "-f", tag], env=env, capture_output=True, check=False)
