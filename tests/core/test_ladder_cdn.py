"""The CDN rungs of the verdict ladder (judge/ladder.py): cdn-missing, then cdn-mismatch.

Below the instance's own evidence, the CDN's: a file missing there outranks a file
differing there (a 404 breaks the page; wrong bytes may still load), and both files are
findings whichever verdict is said.
"""

from __future__ import annotations

import pytest
from compare_support import A1, A2, B1, CLEAN, R1, R2, K, fetched, obs, serving

from artifactcheck.judge.compare import CdnView, HashIndex, judge_instance
from artifactcheck.model.values import Expectation, Fetched, Verdict

JS, CSS = "assets/a.js", "assets/b.css"
GONE, DIFFERS = fetched(JS, status=404), fetched(CSS, A2)


@pytest.mark.parametrize(
    ("on_cdn", "verdict", "reason", "findings"),
    [
        pytest.param(
            {JS: GONE, CSS: DIFFERS},
            Verdict.CDN_MISSING,
            "missing on the CDN: assets/a.js",
            {(K.CDN_MISSING, JS), (K.CDN_DIFFERS, CSS)},
            id="missing-outranks-differing",
        ),
        pytest.param(
            {JS: fetched(JS, A1), CSS: DIFFERS},
            Verdict.CDN_MISMATCH,
            "differs on the CDN: assets/b.css",
            {(K.CDN_DIFFERS, CSS)},
            id="differing",
        ),
        pytest.param(
            {JS: GONE, CSS: fetched(CSS, B1)},
            Verdict.CDN_MISSING,
            "missing on the CDN: assets/a.js",
            {(K.CDN_MISSING, JS)},
            id="missing",
        ),
    ],
)
def test_the_cdn_rungs(
    on_cdn: dict[str, Fetched],
    verdict: Verdict,
    reason: str,
    findings: set[tuple[K, str]],
) -> None:
    """Browsers get a 404 for one file (a broken page) and wrong bytes for the other:
    the stronger is the verdict, stated with its file; every file is a finding."""
    result = judge_instance(
        obs("i1", "1.0", serving(CLEAN)),
        expectation=Expectation("1.0", R1),
        index=HashIndex({"1.0": R1, "2.0": R2}),
        cdn=CdnView("http://cdn/", on_cdn),
    )
    assert (result.verdict, result.reason) == (verdict, reason)
    cdn_kinds = (K.CDN_MISSING, K.CDN_DIFFERS)
    assert {(f.kind, f.path) for f in result.findings if f.kind in cdn_kinds} == findings
