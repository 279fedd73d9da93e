"""Fixtures for the page tests: the nginx and raw-socket helpers of tests/layouts and
tests/fetch, importable when this folder runs alone."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
for _helpers in (_TESTS / "layouts", _TESTS / "fetch"):
    if str(_helpers) not in sys.path:
        sys.path.append(str(_helpers))
