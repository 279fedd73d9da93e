"""CHANGELOG.md in the form of Keep a Changelog: one section per version, with its date.

Why: a team adopting the tool looks up the version it pins and the one it moves to, and
reads what changed between them; a section named by anything but a version (a batch of
work, a date alone) cannot be matched to a release, and sections out of order hide one.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest

CHANGELOG = Path(__file__).resolve().parents[2] / "CHANGELOG.md"

VERSION = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
UNRELEASED = "## [Unreleased]"
#: Keep a Changelog's kinds of change.
KINDS = frozenset({"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"})


def problems(text: str) -> list[str]:
    """What breaks the form, each with its line number; [] when none does."""
    found: list[str] = []
    versions: list[tuple[tuple[int, int, int], str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("## "):
            match = VERSION.match(line)
            if line == UNRELEASED and not versions:
                continue
            if match is None:
                found.append(f"{number}: not `## [X.Y.Z] - YYYY-MM-DD`: {line}")
                continue
            major, minor, patch, day = match.groups()
            versions.append(((int(major), int(minor), int(patch)), day, number))
        elif line.startswith("### ") and line[4:] not in KINDS:
            found.append(f"{number}: not one of {', '.join(sorted(KINDS))}: {line}")
    if not versions:
        found.append("no version section")
    for (newer, newer_day, _), (older, older_day, number) in pairwise(versions):
        if not (newer > older and newer_day >= older_day):
            found.append(f"{number}: not older than the section above it")
    return found


def test_the_changelog_has_one_dated_section_per_version_newest_first() -> None:
    assert problems(CHANGELOG.read_text(encoding="utf-8")) == []


GOOD = "\n".join(
    [
        "# Changelog",
        "",
        "## [Unreleased]",
        "",
        "### Added",
        "",
        "- x",
        "",
        "## [0.2.0] - 2026-12-06",
        "",
        "## [0.1.0] - 2026-12-05",
        "",
        "### Fixed",
        "",
    ]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD, []),
        (GOOD.replace("## [0.2.0] - 2026-12-06", "## [nightly] - 2026-12-03"), ["9"]),
        (GOOD.replace("## [0.2.0] - 2026-12-06", "## [0.2.0]"), ["9"]),
        (GOOD.replace("### Fixed", "### Fixed (encodings)"), ["13"]),
        (GOOD.replace("[0.2.0] - 2026-12-06", "[0.0.9] - 2026-12-06"), ["11"]),
        (GOOD.replace("[0.2.0] - 2026-12-06", "[0.2.0] - 2026-12-04"), ["11"]),
        (GOOD + "\n## [Unreleased]\n", ["15"]),
    ],
)
def test_a_section_out_of_form_is_named_by_its_line(text: str, expected: list[str]) -> None:
    assert [problem.split(":")[0] for problem in problems(text)] == expected
