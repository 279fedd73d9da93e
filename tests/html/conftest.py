"""Fixtures for the HTML report: Debian's headless Chromium driven by selenium.

The browser helpers (flags, a new empty profile per browser) are the screenshot
script's, scripts/html_screenshot.py, loaded from its file: one list of flags for the
suite, the README's screenshot and the benchmark.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_helpers() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "html_screenshot", ROOT / "scripts" / "html_screenshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helpers = _load_helpers()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a test module, quit (profile removed) at its end."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")
    with helpers.chromium() as driver:
        yield driver


def keep_screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    """Save the browser's screen under the test's tmp dir and, with CI_ARTIFACTS set,
    copy it there: what CI keeps of a browser test is a picture a person can look at."""
    image = tmp_path / name
    assert driver.save_screenshot(str(image)), "Chromium took no screenshot"
    kept = os.environ.get("CI_ARTIFACTS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        shutil.copy(image, Path(kept) / name)
    return image
