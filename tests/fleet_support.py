"""The simulated fleets of the loopback suites, and the one table of their addresses.

Three suites start fleets of real loopback servers (``SimFleet``: instances, a CDN,
release manifests) and must never share an address, or one test's server answers for
another's. Their ranges live in :data:`RANGES`, side by side, so a new suite takes a
range the table shows free (tests/test_fleet_support.py proves the rows disjoint),
and the ``web`` and ``make_fleet`` fixtures each suite's conftest declares are made
here from its row.

A subnet is a third octet handed out once per process. In a suite whose fleets share
their test's subnet (the fault suite, which puts its own servers at .100 and above in
the test's subnet), a test's k-th fleet follows the (k-1)-th, and its CDN is at
``cdn_last + k``; elsewhere each fleet takes a subnet of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import WebFleet


@dataclass(frozen=True)
class LoopbackRange:
    """Where one suite's fleets live: 127.<instances>.N.x, the CDNs on 127.<cdn>.N.x."""

    suite: str
    instances: int  # second octet of the instances (and of the suite's own servers)
    cdn: int  # second octet of the CDNs
    cdn_last: int  # fourth octet of a subnet's first CDN
    first_subnet: int  # third octet of the first subnet handed out
    max_instances: int  # instances one fleet may have
    fleets_per_subnet: int = 1  # above 1: a test's fleets share the test's subnet

    @property
    def shared_subnet(self) -> bool:
        return self.fleets_per_subnet > 1

    def hosts(self, subnet: int, k: int = 0) -> tuple[str, str]:
        """The first instance's and the CDN's address of fleet ``k`` in ``subnet``."""
        first = (self.max_instances + 1) * k + 1
        return (
            f"127.{self.instances}.{subnet}.{first}",
            f"127.{self.cdn}.{subnet}.{self.cdn_last + k}",
        )

    def taken(self, subnet: int, k: int = 0) -> set[str]:
        """Every address fleet ``k`` in ``subnet`` may take: instances and its CDN."""
        first, cdn = self.hosts(subnet, k)
        head, last = first.rsplit(".", 1)
        return {cdn} | {f"{head}.{int(last) + i}" for i in range(self.max_instances)}


#: Every suite's range. The fault suite's fleets share a test's subnet below .100,
#: where its tests put their own servers (release sources, CDNs, hostile sites).
RANGES = {
    r.suite: r
    for r in (
        LoopbackRange("e2e", 88, 89, cdn_last=1, first_subnet=10, max_instances=20),
        LoopbackRange("investigate", 96, 96, cdn_last=250, first_subnet=10, max_instances=20),
        LoopbackRange(
            "faults", 97, 98, cdn_last=1, first_subnet=1, max_instances=9, fleets_per_subnet=9
        ),
    )
}

_subnets = {suite: itertools.count(r.first_subnet) for suite, r in RANGES.items()}


def next_subnet(suite: str) -> int:
    """A third octet of ``suite``'s range no other test of this process has used."""
    n = next(_subnets[suite])
    r = RANGES[suite]
    assert n < 255, f"the {suite} suite ran out of 127.{r.instances}.N.x subnets"
    return n


def web_fixture(suite: str) -> Callable[..., Iterator[WebFleet]]:
    """The ``web`` fixture: one server loop for the test's fleets and servers."""

    @pytest.fixture
    def web() -> Iterator[WebFleet]:
        with WebFleet(name=f"test-{suite}") as fleet:
            yield fleet

    return web


def fleet_fixture(
    suite: str, *, instances: int, version: str
) -> Callable[..., Iterator[Callable[..., SimFleet]]]:
    """The ``make_fleet`` fixture of ``suite``: a factory of started SimFleets on the
    suite's range, all stopped at the end of the test. A suite with shared subnets
    asks for its ``subnet`` fixture, the one its test puts its own servers in."""
    r = RANGES[suite]
    default_instances, default_version = instances, version

    @pytest.fixture
    def make_fleet(
        web: WebFleet, request: pytest.FixtureRequest
    ) -> Iterator[Callable[..., SimFleet]]:
        shared = request.getfixturevalue("subnet") if r.shared_subnet else None
        made: list[SimFleet] = []

        def make(instances: int = default_instances, version: str = default_version) -> SimFleet:
            assert instances <= r.max_instances, f"{suite} fleets have {r.max_instances} at most"
            if shared is not None:
                assert len(made) < r.fleets_per_subnet, f"{suite}: too many fleets in one test"
                first, cdn = r.hosts(shared, len(made))
            else:
                first, cdn = r.hosts(next_subnet(suite))
            fleet = SimFleet(
                instances=instances, version=version, first_host=first, cdn_host=cdn, web=web
            )
            made.append(fleet.start())
            return fleet

        yield make
        for fleet in made:
            fleet.stop()

    return make_fleet
