"""``artifactcheck verify ... | head`` or ``| grep -q consistent``: the reader goes away
before the report is written. Nothing about the fleet changed, so neither does the
verdict: a consistent fleet never exits 1 ("something served is wrong") because its
standard output was closed.

Today (found while writing these tests): exit 1, silently, whatever the verdict was;
click turns EPIPE into ``sys.exit(1)``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from layout_cli import build, no_pages, release, serve_fleet, targets
from layout_nginx import Nginx


def _closed_stdout(*args: str) -> int:
    """Run the CLI with its standard output already closed by the reader."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "artifactcheck", "verify", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    return proc.wait(timeout=120)


def _open_stdout(*args: str) -> int:
    return subprocess.run(
        [sys.executable, "-m", "artifactcheck", "verify", *args], capture_output=True
    ).returncode


def test_a_closed_pipe_never_turns_a_verdict_into_exit_1(nginx: Nginx, tmp_path: Path) -> None:
    urls = serve_fleet(nginx, "127.73.0", "spa", [build("vue/v1")] * 2)
    nginx.start()
    consistent = [*targets(urls, "1.0.0")]
    consistent += ["--release-manifest", str(release(build("vue/v1"), "1.0.0", tmp_path))]
    assert _open_stdout(*consistent) == 0  # the same run, read to the end
    assert _closed_stdout(*consistent) == 0
    # no release, no served manifest, no page read: exit 3
    unjudged = [*targets(urls, "1.0.0"), *no_pages(tmp_path)]
    assert _open_stdout(*unjudged) == 3
    assert _closed_stdout(*unjudged) == 3
