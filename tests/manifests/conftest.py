"""Fixtures for the manifest reader tests: one real manifest per format and release."""

from __future__ import annotations

import pytest

from .builds import REAL, RealManifest, real_manifest


@pytest.fixture(params=REAL, ids=[f"{f}-{r}" for f, r in REAL])
def real(request: pytest.FixtureRequest) -> RealManifest:
    fmt, release = request.param
    return real_manifest(fmt, release)
