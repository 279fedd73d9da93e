"""The loopback table (tests/fleet_support.py): no two fleets ever share an address."""

from __future__ import annotations

import itertools

import pytest
from fleet_support import RANGES, LoopbackRange


def _everywhere(r: LoopbackRange) -> set[str]:
    """Every address the range's fleets may take, in every subnet it hands out."""
    return {
        address
        for n, k in itertools.product(range(r.first_subnet, 255), range(r.fleets_per_subnet))
        for address in r.taken(n, k)
    }


PAIRS = list(itertools.combinations(sorted(RANGES), 2))


@pytest.mark.parametrize(("one", "other"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_no_two_suites_share_an_address(one: str, other: str) -> None:
    assert not _everywhere(RANGES[one]) & _everywhere(RANGES[other])


@pytest.mark.parametrize("suite", sorted(RANGES))
def test_the_fleets_of_one_subnet_share_no_address(suite: str) -> None:
    r = RANGES[suite]
    taken = [r.taken(r.first_subnet, k) for k in range(r.fleets_per_subnet)]
    assert (
        sum(map(len, taken))
        == len(set().union(*taken))
        == r.fleets_per_subnet * (r.max_instances + 1)
    )


def test_the_fault_suites_fleets_stay_below_its_own_servers() -> None:
    """Its tests put release sources and hostile sites at .100 and above."""
    r = RANGES["faults"]
    last = max(int(a.rsplit(".", 1)[1]) for a in _everywhere(r) if a.startswith("127.97."))
    assert last < 100
