"""Fixtures for end-to-end checks: a simulated fleet of real loopback servers.

Every ``--output json`` report produced here is validated against the shipped JSON
Schema (``artifactcheck/report/v3``), so the schema and the code cannot drift apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from report_support import validate_report

from artifactcheck.present import report as report_module
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import WebFleet

_subnet = itertools.count(10)


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


@pytest.fixture
def web() -> Iterator[WebFleet]:
    with WebFleet(name="test-e2e") as fleet:
        yield fleet


@pytest.fixture
def make_fleet(web: WebFleet):
    """Factory for SimFleets on fresh 127.88.N.x addresses sharing one server loop."""
    made: list[SimFleet] = []

    def make(instances: int = 4, version: str = "1.4.1") -> SimFleet:
        n = next(_subnet)
        fleet = SimFleet(
            instances=instances,
            version=version,
            first_host=f"127.88.{n}.1",
            cdn_host=f"127.89.{n}.1",
            web=web,
        )
        made.append(fleet.start())
        return fleet

    yield make
    for fleet in made:
        fleet.stop()
