"""The drift rung of the verdict ladder (judge/ladder.py): right content, not the
desired version.

Drift is said only when every file compared is right for the reported version; its
reason claims no more than was compared (with a names-only release source, no bytes),
and only hashes make it verified: a gate may not open, nor a quarantine be undone, on
file names alone.
"""

from __future__ import annotations

import pytest
from compare_support import CLEAN, NAMES, R1, R2, K, obs, serving

from artifactcheck.judge.compare import HashIndex, judge_instance
from artifactcheck.model.values import Expectation, Manifest, Verdict


@pytest.mark.parametrize(
    ("release", "verified", "names_only"),
    [
        pytest.param(NAMES, False, True, id="names-only-stays-drift-and-claims-no-bytes"),
        pytest.param(R1, True, False, id="with-hashes-verified"),
    ],
)
def test_drift(release: Manifest, verified: bool, names_only: bool) -> None:
    """The instance is on 1.0, 2.0 is desired: the version is the news."""
    result = judge_instance(
        obs("i1", "1.0", serving(CLEAN)),
        expectation=Expectation("1.0", release),
        index=HashIndex({"1.0": R1, "2.0": R2}),
        desired_version="2.0",
    )
    assert result.verdict is Verdict.DRIFT, result.reason
    assert result.reason.startswith("consistent with 1.0, desired is 2.0"), result.reason
    assert result.verified is verified
    assert ("file names only" in result.reason) is names_only, result.reason
    assert ("bytes not verified" in result.reason) is names_only, result.reason
    kinds = {f.kind for f in result.findings}
    assert K.DRIFT in kinds
    assert (K.NAMES_ONLY in kinds) is names_only
