"""The previous release's files, judged from what one place answered (pure)."""

from __future__ import annotations

import pytest

from artifactcheck.judge.skew_check import judge_previous, loaded_by_pages, previous_findings
from artifactcheck.model.skew import ON_CDN, PreviousServed
from artifactcheck.model.values import (
    Fetched,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    ManifestEntry,
    Report,
    Verdict,
)

A, B, PAGE, OTHER = "a" * 64, "b" * 64, "c" * 64, "d" * 64
PREVIOUS = Manifest(
    format="native",
    version="1.0.0",
    files={
        "assets/app-1.js": ManifestEntry("assets/app-1.js", {"sha256": A}),
        "favicon.ico": ManifestEntry("favicon.ico", {"sha256": A}),
        "index.html": ManifestEntry("index.html", {"sha256": PAGE}),
        "names-only.js": ManifestEntry("names-only.js"),
    },
)
CURRENT = Manifest(
    format="native",
    version="2.0.0",
    files={"favicon.ico": ManifestEntry("favicon.ico", {"sha256": B})},
)


def answer(path: str, status: int | None = 200, sha: str | None = A, **kw: object) -> Fetched:
    hashes = {"sha256": sha} if sha is not None and status is not None else {}
    return Fetched(url=f"http://cdn/{path}", path=path, status=status, hashes=hashes, **kw)  # type: ignore[arg-type]


HTML = {"content-type": "text/html"}


@pytest.mark.parametrize(
    ("path", "got", "expect"),
    [
        ("assets/app-1.js", answer("assets/app-1.js"), None),
        ("assets/app-1.js", answer("assets/app-1.js", 404), "missing"),
        ("assets/app-1.js", answer("assets/app-1.js", 410), "missing"),
        ("assets/app-1.js", answer("assets/app-1.js", 403), "missing"),
        ("assets/app-1.js", answer("assets/app-1.js", sha=PAGE), "missing"),  # the fallback page
        (
            "assets/app-1.js",
            answer("assets/app-1.js", sha=OTHER, headers=HTML),
            "missing",
        ),  # a login page a redirect led to
        ("assets/app-1.js", answer("assets/app-1.js", sha=OTHER), "differs"),
        ("assets/app-1.js", answer("assets/app-1.js", 503), "unchecked"),
        (
            "assets/app-1.js",
            answer("assets/app-1.js", None, error="connection refused"),
            "unchecked",
        ),
        ("favicon.ico", answer("favicon.ico", sha=B), None),  # the current release's bytes
        ("favicon.ico", answer("favicon.ico", sha=OTHER), "differs"),
        ("names-only.js", answer("names-only.js", sha=OTHER), None),  # no hash: presence only
        ("names-only.js", answer("names-only.js", 404), "missing"),
    ],
)
def test_one_file(path: str, got: Fetched, expect: str | None) -> None:
    check = judge_previous(
        PREVIOUS,
        {path: got},
        version="1.0.0",
        where=ON_CDN,
        base_url="http://cdn/",
        required=[path],
        current=[CURRENT],
        pages=PREVIOUS.page_hashes,
    )
    found = {
        "missing": check.missing,
        "differs": check.differs,
        "unchecked": check.unchecked,
    }
    assert {k for k, v in found.items() if v} == ({expect} if expect else set())
    assert all(v in ((), (path,)) for v in found.values())


def test_a_file_not_answered_at_all_is_unchecked_never_served() -> None:
    check = judge_previous(
        PREVIOUS,
        {},
        version="1.0.0",
        where=ON_CDN,
        base_url="http://cdn/",
        required=["assets/app-1.js"],
    )
    assert check.unchecked == ("assets/app-1.js",) and check.unknown and not check.wrong


def test_a_stale_coding_is_a_difference() -> None:
    plain, gz = answer("assets/app-1.js"), answer("assets/app-1.js", sha=OTHER)
    got = Fetched(
        url=gz.url,
        path=gz.path,
        status=200,
        hashes=gz.hashes,
        codings={"identity": plain, "gzip": gz},
    )
    check = judge_previous(
        PREVIOUS,
        {"assets/app-1.js": got},
        version="1.0.0",
        where="pod-a",
        base_url="http://a/",
        required=["assets/app-1.js"],
    )
    assert check.differs == ("assets/app-1.js",)


def test_build_records_are_not_asked_for() -> None:
    paths = [".vite/manifest.json", "assets/.manifest.json", "assets/x.js", "manifest.json"]
    assert loaded_by_pages(paths) == ["assets/x.js", "manifest.json"]


def test_findings_name_the_place_the_version_and_the_files() -> None:
    checks = [
        PreviousServed("1.0.0", ON_CDN, "http://cdn/", missing=("a.js", "b.css")),
        PreviousServed("1.0.0", "pod-a", "http://a/", differs=("c.js",)),
        PreviousServed("0.9.0", "release", error="no release manifest declares version 0.9.0"),
    ]
    missing, differs, unavailable = previous_findings(checks)
    assert (missing.kind, missing.instance, missing.path) == (
        FindingKind.SKEW_MISSING,
        None,
        "a.js",
    )
    assert "the CDN http://cdn/" in missing.message and "1.0.0" in missing.message
    assert "a.js, b.css" in missing.message
    assert (differs.kind, differs.instance) == (FindingKind.SKEW_DIFFERS, "pod-a")
    assert unavailable.kind is FindingKind.EXPECTATION_UNAVAILABLE
    assert "0.9.0" in unavailable.message and "no release manifest" in unavailable.message


def _report(*previous: PreviousServed, verdict: Verdict = Verdict.CONSISTENT) -> Report:
    result = InstanceResult(Instance("a", "http://a/"), verdict, reason="")
    return Report(results=(result,), previous=previous)


@pytest.mark.parametrize(
    ("previous", "code"),
    [
        ((), 0),
        ((PreviousServed("1.0.0", ON_CDN, required=3),), 0),
        ((PreviousServed("1.0.0", ON_CDN, missing=("a.js",)),), 1),
        ((PreviousServed("1.0.0", "pod-a", differs=("a.js",)),), 1),
        ((PreviousServed("1.0.0", ON_CDN, unchecked=("a.js",)),), 3),
        ((PreviousServed("1.0.0", "release", error="no release"),), 3),
        (
            (
                PreviousServed("1.0.0", "release", error="no release"),
                PreviousServed("0.9.0", ON_CDN, missing=("a.js",)),
            ),
            1,
        ),
    ],
)
def test_exit_code(previous: tuple[PreviousServed, ...], code: int) -> None:
    assert _report(*previous).exit_code == code


def test_every_report_format_names_the_files_the_version_and_the_place() -> None:
    import io
    from xml.etree import ElementTree as ET

    from rich.console import Console

    from artifactcheck.present.report import render_junit, render_markdown, render_table, to_json

    gone = PreviousServed(
        "1.0.0", ON_CDN, "http://cdn/", required=2, total=3, missing=("a.js", "b.css")
    )
    report = Report(
        results=_report().results, findings=tuple(previous_findings([gone])), previous=(gone,)
    )
    (section,) = to_json(report)["previous_releases"]
    assert (section["version"], section["where"], section["missing"]) == (
        "1.0.0",
        "cdn",
        ["a.js", "b.css"],
    )
    markdown = render_markdown(report)
    assert "#### Previous releases" in markdown and "a.js, b.css" in markdown
    assert "CDN http://cdn/" in markdown
    buffer = io.StringIO()
    render_table(report, Console(file=buffer, width=200))
    table = buffer.getvalue()
    assert "previous releases" in table and "1.0.0 on CDN http://cdn/" in table
    assert "missing: a.js, b.css" in table
    junit = ET.fromstring(render_junit(report))
    (case,) = [c for c in junit.iter("testcase") if c.get("name") == "skew-missing"]
    failure = case.find("failure")
    assert failure is not None and "a.js" in failure.get("message", "")
    assert "1.0.0" in failure.get("message", "")
