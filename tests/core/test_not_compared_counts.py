"""What an instance's coverage says was not compared, and which listed files the release
lacks: both are counted over hundreds of files per instance at scale, so each count is
pinned here on small tables (sampled out, other reasons, a mix; listed files fetched,
on the CDN, or neither)."""

from __future__ import annotations

import pytest
from compare_support import CLEAN, R1, K, obs, serving

from artifactcheck.judge.coverage import SAMPLED_OUT, coverage_findings
from artifactcheck.judge.release_check import against_release
from artifactcheck.model.values import Coverage, Manifest, ManifestEntry, Severity

GONE = "could not be fetched (HTTP 500)"


@pytest.mark.parametrize(
    ("rows", "sampled", "other"),
    [
        ((), None, None),
        ((("a.js", SAMPLED_OUT), ("b.js", SAMPLED_OUT)), "2 sampled out", None),
        ((("a.js", GONE), ("b.js", "not fetched")), None, ("2 file(s)", "a.js", GONE)),
        (
            (("a.js", SAMPLED_OUT), ("b.js", GONE), ("c.js", SAMPLED_OUT), ("d.js", "x")),
            "2 sampled out",
            ("2 file(s)", "b.js", GONE),
        ),
        (
            (("a.js", SAMPLED_OUT),) * 3 + (("z.js", GONE),),
            "3 sampled out",
            ("1 file(s)", "z.js", GONE),
        ),
    ],
)
def test_not_compared_rows_are_counted_by_reason(
    rows: tuple[tuple[str, str], ...],
    sampled: str | None,
    other: tuple[str, str, str] | None,
) -> None:
    coverage = Coverage(compared=1, total=1 + len(rows), not_compared=rows)
    found = coverage_findings(obs("i1", "1.0", {}), "1.0", coverage)
    info = [f for f in found if f.kind is K.SAMPLED]
    warn = [f for f in found if f.kind is K.NOT_COMPARED]
    assert len(found) == len(info) + len(warn)
    if sampled is None:
        assert info == []
    else:
        (s,) = info
        assert s.severity is Severity.INFO and s.message.endswith(sampled), s.message
        assert s.message.startswith(f"1 of {1 + len(rows)} files of release 1.0")
    if other is None:
        assert warn == []
    else:
        count, first, why = other
        (w,) = warn
        assert w.severity is Severity.WARNING and w.path == first
        assert w.message.startswith(f"{count} of release 1.0 not compared: {first}")
        assert w.message.endswith(f"({why})")


def _listed(*paths: str) -> Manifest:
    return Manifest("vite", {p: ManifestEntry(p) for p in paths})


@pytest.mark.parametrize(
    ("listed", "on_cdn", "unexpected"),
    [
        (_listed(*CLEAN), {}, None),  # the release's own files
        (_listed("index.html"), {}, None),  # fewer than the release
        (_listed(*CLEAN, "assets/y.js"), {}, "1 file(s) not in release 1.0: assets/y.js"),
        (
            _listed("assets/y.js", "assets/x.js"),
            {},
            "2 file(s) not in release 1.0: assets/x.js, assets/y.js",
        ),
        # a file the instance's pages load from the CDN is judged there, not listed here
        (_listed(*CLEAN, "assets/y.js"), {"assets/y.js": "https://cdn/y.js"}, None),
        (
            _listed("assets/y.js", "assets/x.js"),
            {"assets/y.js": "https://cdn/y.js"},
            "1 file(s) not in release 1.0: assets/x.js",
        ),
    ],
)
def test_listed_files_the_release_lacks(
    listed: Manifest, on_cdn: dict[str, str], unexpected: str | None
) -> None:
    seen = obs("i1", "1.0", serving(CLEAN), manifest=listed, on_cdn=on_cdn)
    check = against_release(seen, R1, "1.0", R1.page_hashes)
    found = [f for f in check.findings if f.kind is K.FILE_UNEXPECTED]
    if unexpected is None:
        assert found == [] and check.bad == []
    else:
        (f,) = found
        assert f.message.endswith(unexpected), f.message
        assert check.bad == [f.path] and f.path is not None and f.path in f.message


def test_a_listed_file_fetched_is_judged_by_its_answer_not_as_listed() -> None:
    seen = obs(
        "i1", "1.0", serving({**CLEAN, "assets/y.js": "9" * 64}), manifest=_listed("assets/y.js")
    )
    check = against_release(seen, R1, "1.0", R1.page_hashes)
    (f,) = [f for f in check.findings if f.kind is K.FILE_UNEXPECTED]
    assert f.path == "assets/y.js" and "is served but is not part of release" in f.message
