"""``fleet --watch -o html=FILE``: the page is rewritten on every refresh."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from artifactcheck.cli.investigate import _watch, parse_outputs
from artifactcheck.present.oncall.builders import build_fleet
from artifactcheck.present.oncall.view_models import FleetView
from bench.html_report import build


def test_each_refresh_rewrites_the_page(tmp_path: Path) -> None:
    page = tmp_path / "fleet.html"
    sizes = iter([60, 50])  # 1 in 50 drifted: the second refresh has one more bad pod
    headlines: list[str] = []

    async def collect(_spec: object) -> FleetView:
        view = build_fleet(build(instances=next(sizes), files=2), release_source=None, now=NOW)
        headlines.append(page.read_text() if page.exists() else "")
        return view

    code = _watch(
        None,  # type: ignore[arg-type]  # the fake collect ignores the spec
        parse_outputs((f"html={page}",), html=True),
        seconds=0.1,
        iterations=2,
        console=Console(file=io.StringIO(), width=150),
        collect=collect,
    )
    assert code == 1
    assert "2 of 60 instances serve wrong content" in headlines[1]  # the first refresh's page
    assert "1 of 50 instances serves wrong content" in page.read_text()  # the last one's


NOW = datetime(2026, 12, 6, tzinfo=UTC)
