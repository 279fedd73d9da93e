"""Comparison rules (artifactcheck/judge/compare.py) that no row of test_compare pinned.

Each was broken once on purpose to see it fail: which verdict wins when one instance
has a file missing on the CDN and another differing there, and what a names-only
release source allows a drifted instance to claim.
"""

from __future__ import annotations

from compare_support import A2, CLEAN, NAMES, R1, R2, K, fetched, obs, serving

from artifactcheck.judge.compare import CdnView, HashIndex, judge_instance
from artifactcheck.model.values import Expectation, InstanceResult, Verdict

INDEX = HashIndex({"1.0": R1, "2.0": R2})


def judged(
    *, cdn: CdnView | None = None, desired: str | None = None, expectation: Expectation
) -> InstanceResult:
    return judge_instance(
        obs("i1", "1.0", serving(CLEAN)),
        expectation=expectation,
        index=INDEX,
        cdn=cdn,
        desired_version=desired,
    )


def test_missing_on_the_cdn_wins_over_differing_there() -> None:
    """a.js is gone from the CDN, b.css differs there: browsers get a 404 for one file
    (a broken page) and wrong bytes for the other; the verdict is cdn-missing, the
    stronger, stated with the missing file, and both files are findings."""
    cdn = CdnView(
        "http://cdn/",
        {
            "assets/a.js": fetched("assets/a.js", status=404),
            "assets/b.css": fetched("assets/b.css", A2),
        },
    )
    result = judged(cdn=cdn, expectation=Expectation("1.0", R1))
    assert result.verdict is Verdict.CDN_MISSING, result.reason
    assert result.reason == "missing on the CDN: assets/a.js"
    assert {
        (f.kind, f.path) for f in result.findings if f.kind in (K.CDN_MISSING, K.CDN_DIFFERS)
    } == {
        (K.CDN_MISSING, "assets/a.js"),
        (K.CDN_DIFFERS, "assets/b.css"),
    }


def test_names_only_with_drift_stays_drift_and_claims_no_bytes() -> None:
    """Release 1.0's source has names only; the instance is on 1.0, 2.0 is desired.
    The verdict is drift (the version is the news), its reason says the bytes were not
    verified, and it is not verified: a gate may not open, nor a quarantine be undone,
    on names alone."""
    result = judged(desired="2.0", expectation=Expectation("1.0", NAMES))
    assert result.verdict is Verdict.DRIFT, result.reason
    assert result.reason.startswith("consistent with 1.0, desired is 2.0"), result.reason
    assert "file names only" in result.reason and "bytes not verified" in result.reason
    assert result.verified is False
    assert K.DRIFT in {f.kind for f in result.findings}
    assert K.NAMES_ONLY in {f.kind for f in result.findings}


def test_drift_with_hashes_is_verified() -> None:
    """The control: the same drift against a release with hashes is verified."""
    result = judged(desired="2.0", expectation=Expectation("1.0", R1))
    assert result.verdict is Verdict.DRIFT and result.verified is True
    assert "file names only" not in result.reason
