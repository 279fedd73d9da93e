"""artifactcheck: do your instances serve what their version says?

The version has one source of truth, ``[project] version`` in pyproject.toml, read at
run time from the installed distribution's metadata (``importlib.metadata``), never
copied into the code. ``__version__`` and :func:`build_commit` are worked out only when
asked for: importing ``importlib.metadata`` and scanning the installed distributions
is a cost every command would otherwise pay at start-up for a line only ``--version``
prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DISTRIBUTION = "artifactcheck"


def version() -> str:
    """The installed distribution's version (pyproject.toml's, through its metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def build_commit() -> str | None:
    """The git commit this code was built from, or None when nothing records it.

    A wheel, an sdist and the image carry the commit in ``_build_info`` (written into
    the copy of the source they are built from: ``scripts/release.sh``, the
    Dockerfile's ``REVISION``); the file in git says None. Running from a git checkout
    (an editable install, ``python -m artifactcheck`` in the repository) the checkout
    itself is asked, since its HEAD moves with every commit and no file written once
    could follow it; ``+dirty`` marks uncommitted changes. An installed wheel has no
    ``.git`` above it, so git is never run for one.
    """
    from artifactcheck import _build_info

    if _build_info.COMMIT:
        return _build_info.COMMIT
    return _checkout_commit(Path(__file__).resolve().parent.parent)


def _checkout_commit(root: Path) -> str | None:
    """HEAD of the git checkout at ``root`` (``+dirty`` when changed), or None."""
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return None
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )

    try:
        head = git("rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):  # no git installed, or it hung
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def version_line() -> str:
    """What ``artifactcheck --version`` prints: the version, and the commit when known."""
    commit = build_commit()
    return f"artifactcheck {version()}" + (f" (commit {commit})" if commit else "")


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
