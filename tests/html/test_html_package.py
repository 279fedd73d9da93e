"""The page's template ships in the wheel: package data covers every file it needs."""

from __future__ import annotations

import fnmatch
import tomllib

from conftest import ROOT
from markupsafe import escape

from artifactcheck.present import html_report


def test_every_template_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["artifactcheck"]
    package = ROOT / "artifactcheck"
    templates = sorted((package / "present" / "templates").iterdir())
    assert [t.name for t in templates] == [html_report.TEMPLATE]
    for path in templates:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative


def test_the_page_renders_from_an_empty_report() -> None:
    doc = {"schema": "artifactcheck/report/v3", "exit_code": 0, "results": [], "findings": []}
    html = html_report.render_html(doc)
    assert "No instance was checked" in html
    assert f'content="{escape(html_report.CSP)}"' in html  # the browser reads it unescaped
