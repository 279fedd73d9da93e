"""Fixtures for end-to-end checks: a simulated fleet of real loopback servers
(``make_fleet``, on the e2e row of tests/fleet_support.py).

Every ``--output json`` report produced here is validated against the shipped JSON
Schema (``artifactcheck/report/v3``), so the schema and the code cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fleet_support import fleet_fixture, web_fixture
from report_support import validate_report

from artifactcheck.present import report as report_module


@pytest.fixture(autouse=True)
def _reports_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict]]:
    """Validate every JSON report rendered during the test."""
    produced: list[dict] = []
    real = report_module.to_json

    def checked(report: Any) -> dict[str, Any]:
        doc = real(report)
        validate_report(doc)
        produced.append(doc)
        return doc

    monkeypatch.setattr(report_module, "to_json", checked)
    yield produced


web = web_fixture("e2e")
make_fleet = fleet_fixture("e2e", instances=4, version="1.4.1")
