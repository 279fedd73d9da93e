"""Which release a rollout replaced, and whether the skew window still holds (pure)."""

from __future__ import annotations

import pytest

from artifactcheck.control.release_pins import StatusPins
from artifactcheck.control.skew_window import first_seen, previous_version
from artifactcheck.control.state import CheckState
from artifactcheck.model.settings import CheckSpec
from artifactcheck.release.pins import PinsDoc, Seen, VersionPins

HOUR = 3600.0


@pytest.mark.parametrize(
    ("seen", "desired", "now", "expect"),
    [
        ({}, None, 0.0, None),
        ({"1.0.0": 0.0}, None, 10.0, None),  # nothing came before
        ({"1.0.0": 0.0, "1.1.0": 100.0}, None, 200.0, "1.0.0"),  # the latest is current
        ({"1.0.0": 0.0, "1.1.0": 100.0}, "1.1.0", 100.0 + HOUR, "1.0.0"),  # last second
        ({"1.0.0": 0.0, "1.1.0": 100.0}, "1.1.0", 101.0 + HOUR, None),  # window over
        ({"1.0.0": 0.0, "1.1.0": 100.0, "1.2.0": 200.0}, "1.1.0", 150.0, "1.0.0"),  # rollback
        ({"1.0.0": 0.0, "1.1.0": 100.0, "1.2.0": 200.0}, None, 250.0, "1.1.0"),
        ({"1.0.0": 0.0, "1.1.0": 100.0}, "2.0.0", 150.0, "1.0.0"),  # desired unseen yet
        ({"1.10.0": 5.0, "1.9.0": 5.0}, None, 6.0, "1.9.0"),  # seen together: by number
    ],
)
def test_previous_version(
    seen: dict[str, float], desired: str | None, now: float, expect: str | None
) -> None:
    assert previous_version(seen, desired, now=now, window=HOUR) == expect


def test_pins_remember_what_ran_before_a_restart() -> None:
    def pinned(at: str) -> VersionPins:
        return VersionPins(pinned=Seen(sha256="a" * 64, source="r.json", at=at))

    doc = PinsDoc(
        versions={"1.0.0": pinned("2026-01-01T10:00:00Z"), "1.1.0": pinned("2026-01-01T11:00:00Z")}
    )
    state = CheckState(key="shop/web", namespace="shop", name="web", spec=CheckSpec(), generation=1)
    state.pins = StatusPins(doc)
    state.versions_seen = {"1.1.0": 1.0e12}  # this controller saw it only much later
    seen = first_seen(state)
    assert seen["1.0.0"] < seen["1.1.0"] < 1.0e12
    assert previous_version(seen, "1.1.0", now=seen["1.1.0"] + 60, window=HOUR) == "1.0.0"
