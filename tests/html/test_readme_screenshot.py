"""The README's screenshot is the page ``verify -o html=FILE`` writes for the demo today.

The script that made it (scripts/html_screenshot.py) runs again into a temporary
directory; the image it writes must have the committed one's name and size. Pixels are
not compared: ports and timings differ from run to run; a change of layout that moves
the page's first screen shows as a new image to commit.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, helpers

COMMITTED = ROOT / "docs" / "images" / helpers.IMAGE


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_readme_shows_the_committed_screenshot() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"(docs/images/{helpers.IMAGE})" in readme
    assert COMMITTED.is_file()


@pytest.mark.slow
def test_the_screenshot_is_current(tmp_path: Path) -> None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "html_screenshot.py"), str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == [COMMITTED.name]
    assert png_size(tmp_path / COMMITTED.name) == png_size(COMMITTED)
    assert png_size(COMMITTED)[0] == helpers.WINDOW[0]  # the window the script sets
