"""Property tests: keep hypothesis's failure reports readable under ``-W error``.

When a property fails, hypothesis's report hook touches ``mypy_extensions.TypedDict``,
which warns; with warnings as errors that warning replaces the falsifying example with
an INTERNALERROR and ends the session. Ignoring that one warning, only for the items of
this directory, keeps every other warning an error.
"""

from __future__ import annotations

import pytest

_HYPOTHESIS_REPORT = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/property/" in item.nodeid:
            item.add_marker(_HYPOTHESIS_REPORT)
