#!/usr/bin/env python3
"""Base images for the controller image, made here: no registry is reachable.

One ``mmdebstrap`` run makes two root file systems of one Debian suite, imported with
``docker import``:

* the **build** base: python3, python3-venv, ca-certificates (``BUILD_BASE``);
* the **runtime** base: the same, with python3-venv and the wheels of pip/setuptools
  removed again, so the image has no way to install anything (``BASE``).

Both are tagged ``artifactcheck-base:<suite>-{build,runtime}-<key>``, ``key`` a hash of
how they are made; an engine that already has the tag is not asked again, and the tars
are cached in ``$ARTIFACTCHECK_CACHE`` (default ``~/.cache/artifactcheck``) so a fresh
engine (the tests' private dockerd) only imports them. By hand, on any engine::

    python3 tests/image/baseimage.py [--suite bookworm]     # prints BASE and BUILD_BASE
    DOCKER_BUILDKIT=1 docker build --pull=false --network host \\
        --build-arg BASE=... --build-arg BUILD_BASE=... -t artifactcheck:0.2.0 .
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
#: Run in the chroot after the build tar is taken: what makes the runtime base.
_STRIP = """#!/bin/sh
set -eu
pkgs=$(chroot "$1" dpkg-query -W -f '${Package}\\n' \
    | grep -E '^python3(\\.[0-9]+)?-venv$|^python3-(pip|setuptools|wheel)-whl$' || true)
[ -z "$pkgs" ] || chroot "$1" dpkg --purge $pkgs
"""
_TAR_BUILD = (
    'tar -C "$1" --one-file-system --numeric-owner --exclude="./var/cache/apt/archives/*.deb" '
    '--exclude="./var/lib/apt/lists/*" -cf {out} .'
)
#: Docs, man pages and translations are not needed in an image.
_DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
)
IMPORT_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
)


@dataclass(frozen=True)
class BaseImages:
    suite: str
    build: str  # tag of the build base (python3-venv)
    runtime: str  # tag of the runtime base (python3 only)
    made_in: float = 0.0  # seconds spent in mmdebstrap (0: cached)


def key(suite: str) -> str:
    text = "\n".join([suite, *PACKAGES, _STRIP, _TAR_BUILD, *_DPKG_EXCLUDES, *IMPORT_CHANGES])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_dir() -> Path:
    root = os.environ.get("ARTIFACTCHECK_CACHE") or Path.home() / ".cache" / "artifactcheck"
    return Path(root) / "base-images"


def tags(suite: str) -> tuple[str, str]:
    k = key(suite)
    return f"artifactcheck-base:{suite}-build-{k}", f"artifactcheck-base:{suite}-runtime-{k}"


#: One mmdebstrap at a time in this process: a call waits for one started early.
_MAKING = threading.Lock()


def start_making_tars(suite: str, log: Path | None = None) -> threading.Thread:
    """Make the tars in the cache on a thread of their own (about 75 s of downloads and
    unpacking) while other work goes on; :func:`make_tars` then waits for it. Errors are
    left for that later call to raise, with its own log."""

    def run() -> None:
        try:
            make_tars(suite, cache_dir(), log=log)
        except (OSError, RuntimeError, subprocess.SubprocessError):
            pass  # raised again, and reported, by the fixture's own call

    thread = threading.Thread(target=run, name="base-image-tars", daemon=True)
    thread.start()
    return thread


def make_tars(suite: str, out: Path, *, log: Path | None = None) -> tuple[Path, Path]:
    """Run mmdebstrap (as root) once; return (build tar, runtime tar) in ``out``."""
    with _MAKING:
        return _make_tars(suite, out, log=log)


def _make_tars(suite: str, out: Path, *, log: Path | None) -> tuple[Path, Path]:
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap not installed (apt-get install mmdebstrap; .ci/docker.sh)")
    out.mkdir(parents=True, exist_ok=True)
    k = key(suite)
    build, runtime = out / f"{suite}-build-{k}.tar", out / f"{suite}-runtime-{k}.tar"
    if build.is_file() and runtime.is_file():
        return build, runtime
    with tempfile.TemporaryDirectory(prefix="acbase-", dir=out) as tmp:
        strip = Path(tmp) / "strip.sh"
        strip.write_text(_STRIP)
        tmp_build, tmp_runtime = Path(tmp) / "build.tar", Path(tmp) / "runtime.tar"
        argv = [
            "mmdebstrap",
            "--variant=minbase",
            "--include=" + ",".join(PACKAGES),
            *(f"--dpkgopt={opt}" for opt in _DPKG_EXCLUDES),
            "--customize-hook=" + _TAR_BUILD.format(out=tmp_build),
            f'--customize-hook=sh {strip} "$1"',
            suite,
            str(tmp_runtime),
        ]
        with open(log or os.devnull, "wb") as fh:
            result = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"mmdebstrap {suite} failed ({result.returncode}), see {log}")
        tmp_build.rename(build)  # same directory: atomic, safe against a parallel run
        tmp_runtime.rename(runtime)
    return build, runtime


def ensure(
    docker_cli: str,
    suite: str = DEFAULT_SUITE,
    *,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> BaseImages:
    """Both base images present in the engine (``DOCKER_HOST`` in ``env``), by tag."""
    import time

    build_tag, runtime_tag = tags(suite)

    def present(tag: str) -> bool:
        argv = [docker_cli, "image", "inspect", tag]
        return subprocess.run(argv, env=env, capture_output=True, check=False).returncode == 0

    if present(build_tag) and present(runtime_tag):
        return BaseImages(suite, build_tag, runtime_tag)
    t0 = time.monotonic()
    build_tar, runtime_tar = make_tars(suite, cache_dir(), log=log)
    made_in = time.monotonic() - t0
    for tar, tag in ((build_tar, build_tag), (runtime_tar, runtime_tag)):
        changes = [arg for change in IMPORT_CHANGES for arg in ("--change", change)]
        argv = [docker_cli, "import", *changes, str(tar), tag]
        result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"docker import {tag}: {result.stderr.strip()}")
    return BaseImages(suite, build_tag, runtime_tag, made_in)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suite", default=DEFAULT_SUITE, help="Debian suite (bookworm, trixie)")
    parser.add_argument("--docker", default="docker", help="docker CLI to import with")
    args = parser.parse_args()
    images = ensure(args.docker, args.suite)
    print(f"BASE={images.runtime}\nBUILD_BASE={images.build}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
