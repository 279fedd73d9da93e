"""The HTML report in a real browser: what an on-call engineer sees, and what a
hostile instance cannot do to the page.

The demo's fleet on loopback (14 instances of release 1.4.2; web-5 and web-10 serve
release 1.4.1's bytes under 1.4.2's names; the CDN answers 403 for the logo) plus one
hostile instance whose name, URL and version endpoint carry markup, checked by
``artifactcheck verify -o html=FILE`` as a user runs it. Chromium (Debian's, headless)
opens the file from a ``file://`` URL and the test reads the DOM.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import keep_screenshot
from selenium.webdriver.common.by import By

from artifactcheck.present.html_report import CSP, render_html
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import Site

LOGO = "assets/logo-m9-UFto3.svg"
#: Each would set window.pwned or the title if the page ever ran it.
SCRIPT = "<script>window.pwned=1;document.title='pwned'</script>"
IMG = '"><img src=x onerror="window.pwned=2;document.title=\'pwned\'">'
SVG = '\'><svg onload="window.pwned=3"></svg>'
HOSTILE = SCRIPT + IMG + SVG
#: What the hostile instance's /version says: short enough to be quoted in the finding
#: (a version is at most 128 characters), so the page shows it.
VERSION = '1<script>window.pwned=4</script>"><img src=x onerror="window.pwned=5">'
#: Elements and attributes nothing on the page needs; each would be markup from outside.
ACTIVE = "script, img, svg, iframe, object, embed, [onerror], [onload], [onclick]"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``verify -o html=... -o json=...`` over the demo fleet plus a hostile instance."""
    tmp = tmp_path_factory.mktemp("html")
    with SimFleet(
        instances=14, version="1.4.2", first_host="127.97.0.1", cdn_host="127.97.1.1"
    ) as fleet:
        fleet.drift(4, serves="1.4.1")
        fleet.drift(9, serves="1.4.1")
        fleet.cdn_missing(LOGO, status=403)
        evil = fleet.web.add(Site(root=fleet.releases["1.4.2"], version=VERSION), "127.97.0.99")
        targets = [*fleet.targets(), {"url": evil + "?" + SCRIPT, "name": "evil" + HOSTILE}]
        config = tmp / "check.yaml"
        config.write_text(
            yaml.safe_dump(fleet.spec(targets=targets, version_endpoint="/version#/version")),
            encoding="utf-8",
        )
        page, doc = tmp / "report.html", tmp / "report.json"
        run = subprocess.run(
            [sys.executable, "-m", "artifactcheck", "verify", "-c", str(config),
             "-o", f"html={page}", "-o", f"json={doc}"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        fleet_page = tmp / "fleet.html"
        fleet_run = subprocess.run(
            [sys.executable, "-m", "artifactcheck", "fleet", "-c", str(config),
             "-o", f"html={fleet_page}"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
    assert page.is_file(), run.stderr
    assert fleet_page.is_file(), fleet_run.stderr
    yield {
        "page": page,
        "doc": json.loads(doc.read_text()),
        "code": run.returncode,
        "fleet": fleet_page,
        "fleet_code": fleet_run.returncode,
    }


def open_page(browser: Any, page: Path) -> Any:
    browser.get("about:blank")
    browser.get(page.resolve().as_uri())
    return browser


def test_the_drifted_instances_are_the_first_thing_shown(
    browser: Any, demo: dict[str, Any], tmp_path: Path
) -> None:
    b = open_page(browser, demo["page"])
    keep_screenshot(b, tmp_path, "html-report-demo.png")
    assert demo["code"] == 1
    headline = b.find_element(By.ID, "headline").text
    assert headline == "2 of 15 instances serve wrong content"
    assert b.find_element(By.ID, "exit-code").text == "1"
    cards = b.find_elements(By.CSS_SELECTOR, "#attention .card")
    assert sorted(c.find_element(By.CSS_SELECTOR, ".name").text for c in cards) == [
        "web-10",
        "web-5",
    ]
    assert {c.get_attribute("data-verdict") for c in cards} == {"mismatch"}
    # the first card is on the first screen, not below it
    assert cards[0].location["y"] + cards[0].size["height"] < b.execute_script(
        "return window.innerHeight"
    )
    # the grid sets web-5 and web-10 apart from the rest of 1.4.2
    odd = b.find_elements(By.CSS_SELECTOR, "#fleet tr.odd")
    assert len(odd) == 1
    squares = odd[0].find_elements(By.CSS_SELECTOR, "a.sq")
    assert sorted(s.get_attribute("title") for s in squares) == [
        "web-10: mismatch",
        "web-5: mismatch",
    ]
    assert odd[0].get_attribute("data-version") == "1.4.2"


def test_the_cdn_finding_is_shown(browser: Any, demo: dict[str, Any]) -> None:
    b = open_page(browser, demo["page"])
    findings = b.find_elements(By.CSS_SELECTOR, "#cdn li.finding")
    assert [f.get_attribute("data-kind") for f in findings] == ["cdn-missing"]
    assert LOGO in findings[0].text and "403" in findings[0].text
    assert demo["doc"]["cdn"] in b.find_element(By.CSS_SELECTOR, "#cdn h2").text


def test_each_drifted_instance_lists_the_files_that_differ_with_their_hashes(
    browser: Any, demo: dict[str, Any]
) -> None:
    b = open_page(browser, demo["page"])
    by_name = {r["instance"]: r for r in demo["doc"]["results"]}
    expected = {
        (f["path"], f.get("expected"), f.get("actual"))
        for f in by_name["web-5"]["findings"]
        if f["kind"] == "content-differs"
    }
    assert len(expected) == 3
    anchor = b.find_element(By.XPATH, "//div[@class='card b-mismatch'][.//a[text()='web-5']]//a")
    details = b.find_element(By.ID, anchor.get_attribute("href").rpartition("#")[2])
    assert details.get_attribute("open") is not None  # a bad instance is shown open
    rows = details.find_elements(By.CSS_SELECTOR, "table.files tbody tr")
    shown = set()
    for row in rows:
        path, _kind, want, got = (td.text for td in row.find_elements(By.TAG_NAME, "td"))
        shown.add((path, want, got))
    assert shown == expected


def test_the_page_fetches_nothing_and_allows_no_script(browser: Any, demo: dict[str, Any]) -> None:
    b = open_page(browser, demo["page"])
    assert b.execute_script("return performance.getEntriesByType('resource').length") == 0
    csp = b.find_element(By.CSS_SELECTOR, "meta[http-equiv='Content-Security-Policy']")
    assert csp.get_attribute("content") == CSP
    assert "default-src 'none'" in CSP and "script-src" not in CSP


def assert_not_scripted(b: Any) -> None:
    """Nothing from outside ran or became markup: no global, no title, no element."""
    assert b.execute_script("return typeof window.pwned") == "undefined"
    assert "pwned" not in b.title
    assert b.execute_script(f"return document.querySelectorAll({ACTIVE!r}).length") == 0


def test_a_hostile_instance_cannot_script_the_page(
    browser: Any, demo: dict[str, Any], tmp_path: Path
) -> None:
    b = open_page(browser, demo["page"])
    evil = b.find_element(By.XPATH, "//details[.//b[starts-with(text(), 'evil')]]")
    b.execute_script("arguments[0].open = true; arguments[0].scrollIntoView()", evil)
    keep_screenshot(b, tmp_path, "html-report-hostile.png")
    assert_not_scripted(b)
    text = b.find_element(By.ID, "instances").text
    # shown as the text it is: its name, its URL and what its version endpoint said
    assert "evil" + SCRIPT in text
    assert "?" + SCRIPT in text
    assert IMG in text
    # what its version endpoint said, quoted in the note on why no version was read
    notes = [n.text for n in evil.find_elements(By.CSS_SELECTOR, ".note")]
    assert any(VERSION in n for n in notes), notes


def poisoned(value: Any) -> Any:
    """Every string of a report document with the hostile markup added."""
    if isinstance(value, str):
        return value + HOSTILE
    if isinstance(value, list):
        return [poisoned(v) for v in value]
    if isinstance(value, dict):
        return {
            k: v if k in ("verdict", "kind", "severity", "headers_ref") else poisoned(v)
            for k, v in value.items()
        }
    return value


def test_no_value_of_the_report_can_script_the_page(
    browser: Any, demo: dict[str, Any], tmp_path: Path
) -> None:
    doc = dict(demo["doc"])
    for key in ("results", "findings", "actions", "cdn", "desired_version", "started_at"):
        doc[key] = poisoned(doc[key])
    page = tmp_path / "poisoned.html"
    page.write_text(render_html(doc), encoding="utf-8")
    b = open_page(browser, page)
    assert_not_scripted(b)
    body = b.find_element(By.TAG_NAME, "body").text
    assert body.count(SCRIPT) > 100  # the values are on the page, as text


def test_fleet_writes_the_page_too(browser: Any, demo: dict[str, Any], tmp_path: Path) -> None:
    b = open_page(browser, demo["fleet"])
    keep_screenshot(b, tmp_path, "html-report-fleet.png")
    assert demo["fleet_code"] == 1
    assert b.find_element(By.ID, "headline").text == "2 of 15 instances serve wrong content"
    cards = b.find_elements(By.CSS_SELECTOR, "#attention .card .name")
    assert sorted(c.text for c in cards) == ["web-10", "web-5"]
    assert LOGO in b.find_element(By.ID, "cdn").text
    assert_not_scripted(b)
