"""A 1,000-instance HTML report: at most 2 MB, and Chromium lays it out in under 2 s.

The worst case of bench/html_report.py: every one of 1,000 pods drifted, 3 of its 8
files differing, so every instance carries its findings and hash rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from selenium.webdriver.common.by import By

from artifactcheck.present import report as report_module
from artifactcheck.present.html_report import MAX_CARDS, render_html
from bench.html_report import LOAD_MS, build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def worst() -> dict[str, Any]:
    doc = report_module.to_json(build(instances=1000, files=8, drift_every=1))
    schema = json.loads(report_module.schema_path().read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    return doc


def test_a_thousand_drifted_instances_fit_in_two_megabytes(worst: dict[str, Any]) -> None:
    html = render_html(worst)
    assert len(html.encode()) <= 2_000_000
    bad = [r for r in worst["results"] if r["verdict"] == "mismatch"]
    assert len(bad) == 990  # and 10 unreachable
    assert html.count('class="instance bad"') == 990
    differ = sum(len(r["findings"]) for r in worst["results"])
    assert differ >= 2970
    assert html.count("<tr><td><code>") == differ  # every file that differs, with hashes


def test_chromium_lays_it_out_in_under_two_seconds(
    browser: Any, worst: dict[str, Any], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(worst), encoding="utf-8")
    browser.get("about:blank")
    browser.get(page.as_uri())
    load_ms, shown = browser.execute_script(LOAD_MS)
    assert shown == 1000
    assert load_ms < 2000, f"Chromium took {load_ms:.0f} ms"
    # folded past the first screen: summaries, not 3,000 file rows, are laid out
    assert browser.find_elements(By.CSS_SELECTOR, "details[open]") == []
    assert len(browser.find_elements(By.CSS_SELECTOR, "#attention .card")) == MAX_CARDS
