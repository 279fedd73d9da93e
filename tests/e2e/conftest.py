"""Fixtures for end-to-end checks: a simulated fleet of real loopback servers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from artifactcheck.sim.fleet import SimFleet
from artifactcheck.sim.web import WebFleet

_subnet = itertools.count(10)


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
