"""Each verdict on the HTML page in the colour of its row of the verdict table.

The template names no verdict: its colours, labels and card borders are written from
:data:`artifactcheck.model.verdicts.VERDICTS`. Chromium opens a page with one instance
of every verdict and the test reads the colour it paints each verdict's label and card.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from artifactcheck.model.values import Instance, InstanceResult, Report
from artifactcheck.model.verdicts import INSTANCE_WRONG, VERDICTS, Verdict
from artifactcheck.present.html_report import render_html
from artifactcheck.present.report import to_json


def _rgb(colour: str) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_every_verdict_is_painted_in_its_table_colour(browser: Any, tmp_path: Path) -> None:
    results = tuple(
        InstanceResult(
            instance=Instance(name=f"web-{v.value}", base_url=f"http://{v.value}.test/"),
            verdict=v,
            reason="judged by hand",
            reported_version="1.0.0",
        )
        for v in Verdict
    )
    page = tmp_path / "report.html"
    page.write_text(render_html(to_json(Report(results=results))), encoding="utf-8")
    browser.get("about:blank")
    browser.get(page.resolve().as_uri())

    def painted(element: Any, prop: str) -> str:
        return str(browser.execute_script(f"return getComputedStyle(arguments[0]).{prop}", element))

    legend = browser.find_element(By.CSS_SELECTOR, ".legend")
    for v in Verdict:
        label = legend.find_element(By.CSS_SELECTOR, f".v-{v.value}")
        assert label.text == v.value
        assert painted(label, "backgroundColor") == _rgb(VERDICTS[v].colour), v
    cards = browser.find_elements(By.CSS_SELECTOR, "#attention .card")
    assert {c.get_attribute("data-verdict") for c in cards} == {v.value for v in INSTANCE_WRONG}
    for card in cards:
        v = Verdict(card.get_attribute("data-verdict"))
        assert painted(card, "borderLeftColor") == _rgb(VERDICTS[v].colour), v
