"""A release that vouches by SHA-1 (Angular's ngsw.json): compared by SHA-1, said so.

Served bytes are compared in the release's own hash; a SHA-1 that was not computed
for an answer vouches for nothing (names only), never for a difference.
"""

from __future__ import annotations

import pytest

from artifactcheck.judge.compare import HashIndex, judge_instance
from artifactcheck.model.values import (
    Expectation,
    Fetched,
    FindingKind,
    Instance,
    Manifest,
    ManifestEntry,
    Observation,
    Verdict,
    VersionSignal,
)

SHA1 = {"index.html": "1" * 40, "main.js": "2" * 40}
NGSW = Manifest(
    format="ngsw",
    version="1.0",
    files={p: ManifestEntry(path=p, hashes={"sha1": h}) for p, h in SHA1.items()},
)


def answer(path: str, sha1: str | None) -> Fetched:
    hashes = {"sha256": path[0] * 64} | ({"sha1": sha1} if sha1 else {})
    return Fetched(url=f"http://i/{path}", path=path, status=200, hashes=hashes, size=3)


def judged(assets: dict[str, Fetched]):
    obs = Observation(
        instance=Instance(name="i", base_url="http://i/", signals=(VersionSignal("t", "1.0"),)),
        manifest_path="ngsw.json",
        assets=assets,
    )
    return judge_instance(obs, expectation=Expectation("1.0", NGSW), index=HashIndex({"1.0": NGSW}))


@pytest.mark.parametrize(
    ("main_sha1", "verdict", "verified"),
    [
        pytest.param("2" * 40, Verdict.CONSISTENT, True, id="same-sha1"),
        pytest.param("9" * 40, Verdict.MISMATCH, False, id="other-sha1"),
        pytest.param(None, Verdict.INCONCLUSIVE, False, id="sha1-not-computed"),
    ],
)
def test_sha1_release(main_sha1: str | None, verdict: Verdict, verified: bool) -> None:
    r = judged(
        {"index.html": answer("index.html", "1" * 40), "main.js": answer("main.js", main_sha1)}
    )
    assert r.verdict is verdict, r.reason
    assert r.verified is verified
    assert r.coverage is not None and r.coverage.hashes == ("sha1",)
    differs = [f for f in r.findings if f.kind is FindingKind.CONTENT_DIFFERS]
    if verdict is Verdict.MISMATCH:
        (f,) = differs
        assert f.message == "main.js differs from release 1.0 (sha1)"
        assert (f.expected, f.actual) == ("2" * 40, "9" * 40)
    else:
        assert not differs
