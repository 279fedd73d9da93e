"""Render the demo fleet's HTML report and photograph it: docs/images/html-report.png.

Starts the demo's fleet on loopback (14 instances of release 1.4.2, a real Vite build;
web-5 and web-10 serve release 1.4.1's bytes under 1.4.2's file names; the CDN answers
403 for the logo, as docs/examples/record.sh does), runs
``artifactcheck verify -c check.yaml -o html=report.html``, opens the page in Debian's
headless Chromium and saves a screenshot of its first screen.

Usage, from the repository root:  .venv/bin/python scripts/html_screenshot.py [OUT_DIR]
(default docs/images; the suite writes into a temporary directory and compares the
image's name and size with the committed one, tests/html/test_readme_screenshot.py).

The browser helpers here are the suite's too (tests/html/conftest.py loads this file):
one list of Chromium flags, for a root user in a container with no network to reach.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The screenshot's name and the window it is taken in (CSS pixels).
IMAGE = "html-report.png"
WINDOW = (1280, 900)

#: Chromium as root in a container: no sandbox (root has none), no GPU, and nothing that
#: reaches for the network on its own (updates, sync, QUIC probes).
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


@contextmanager
def chromium(window: tuple[int, int] = WINDOW) -> Iterator[Any]:
    """A selenium WebDriver for Debian's chromium, with a new empty profile; quit after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="artifactcheck-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--window-size={window[0]},{window[1]}")
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            yield driver
        finally:
            driver.quit()


def demo_report(out: Path) -> int:
    """Run ``verify -o html=OUT`` against the demo fleet; the exit code."""
    import yaml

    from artifactcheck_sim.fleet import SimFleet

    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(name, None)
    with SimFleet(
        instances=14, version="1.4.2", first_host="127.95.4.1", cdn_host="127.95.5.1"
    ) as fleet:
        fleet.drift(4, serves="1.4.1")
        fleet.drift(9, serves="1.4.1")
        fleet.cdn_missing("assets/logo-m9-UFto3.svg", status=403)
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "check.yaml"
            config.write_text(yaml.safe_dump(fleet.spec()), encoding="utf-8")
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "artifactcheck",
                    "verify",
                    "-c",
                    str(config),
                    "-o",
                    f"html={out}",
                ],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
    if not out.is_file():
        raise RuntimeError(f"verify wrote no HTML (exit {run.returncode}): {run.stderr}")
    return run.returncode


def screenshot(page: Path, image: Path, window: tuple[int, int] = WINDOW) -> None:
    """Open ``page`` (a file) in Chromium and save the first screen as ``image``."""
    with chromium(window) as driver:
        driver.get(page.resolve().as_uri())
        driver.save_screenshot(str(image))


def main(argv: list[str]) -> None:
    out_dir = Path(argv[0] if argv else "docs/images")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        code = demo_report(page)
        screenshot(page, out_dir / IMAGE)
    print(f"wrote {out_dir / IMAGE} (verify exit {code})")


if __name__ == "__main__":
    main(sys.argv[1:])
