"""Table-driven tests of the pure comparison rules.

Each row is one rule: the observation, what it is judged against, and what the
verdict, findings, reason, coverage and "verified" must be. A rule without a row here
is a rule nobody defends.
"""

from __future__ import annotations

from typing import Any

import pytest
from compare_support import (
    A1,
    A2,
    B1,
    B2,
    CLEAN,
    E1,
    IDX1,
    IDX2,
    MIX,
    NAMES,
    OLD,
    R1,
    R2,
    X9,
    K,
    fetched,
    obs,
    release,
    serving,
)

from artifactcheck.judge.compare import (
    Agreement,
    CdnView,
    HashIndex,
    cdn_paths,
    compare_fleet,
    consensus_findings,
    judge_instance,
    version_key,
)
from artifactcheck.model.records import replace
from artifactcheck.model.values import (
    Expectation,
    Fetched,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    ManifestEntry,
    Observation,
    Severity,
    Verdict,
    VersionSignal,
)

DOWN = Expectation("1.0", None, error="source down")
INDEX = HashIndex({"1.0": R1, "2.0": R2})


#: How loud each kind of finding is; any kind not listed is an error.
SEVERITY = {
    K.NOT_COMPARED: Severity.WARNING,
    K.MANIFEST_MISSING: Severity.WARNING,
    K.OBSERVATION_FAILED: Severity.WARNING,
    K.UNSAFE_REFERENCE: Severity.WARNING,
    K.NO_VERSION: Severity.WARNING,
    K.EXPECTATION_UNAVAILABLE: Severity.WARNING,
    K.NAMES_ONLY: Severity.WARNING,
    K.DRIFT: Severity.WARNING,
    K.NO_CONSENSUS: Severity.WARNING,
    K.IMAGE_DIVERGES: Severity.WARNING,
    K.TLS_EXPIRING: Severity.WARNING,
    K.LAYOUT: Severity.WARNING,
    K.EXPECTATION_STALE: Severity.INFO,
    K.SAMPLED: Severity.INFO,
}


def cdn_of(files: dict[str, Fetched], **kw: Any) -> CdnView:
    return CdnView("http://cdn/", files, **kw)


CDN_CLEAN = {"assets/a.js": fetched("assets/a.js", A1), "assets/b.css": fetched("assets/b.css", B1)}


def judge(
    assets: dict[str, Fetched],
    expectation: Expectation | None = E1,
    cdn: CdnView | None = None,
    desired: str | None = None,
    version: str | None = "1.0",
    index: HashIndex = INDEX,
    peers: int | None = None,
    agreement: Agreement | None = None,
    **kw: Any,
) -> InstanceResult:
    result = judge_instance(
        obs("i1", version, assets, **kw),
        expectation=expectation,
        index=index,
        cdn=cdn,
        desired_version=desired,
        peers=peers,
        agreement=agreement,
    )
    # every finding is about this instance, says something, and has its kind's severity
    for f in result.findings:
        assert f.instance == "i1" and isinstance(f.message, str) and f.message, f
        assert f.severity is SEVERITY.get(f.kind, Severity.ERROR), f
    if result.coverage is not None:
        assert result.coverage.encodings == kw.get("encodings", ("identity",))
    return result


def with_(files: dict[str, str], **changes: Fetched) -> dict[str, Fetched]:
    out = serving(files)
    for got in changes.values():
        out[got.path] = got
    return out


ROWS: list[Any] = [
    # (id, assets, judge keyword arguments, verdict, kinds present, kinds absent, reason part)
    (
        "clean",
        serving(CLEAN),
        {},
        Verdict.CONSISTENT,
        set(),
        {K.NOT_COMPARED},
        "serves release 1.0",
    ),
    (
        "serves-other-release",
        serving(OLD),
        {},
        Verdict.MISMATCH,
        {K.CONTENT_DIFFERS, K.SERVES_OTHER_RELEASE},
        set(),
        "reports 1.0 but serves 2.0's content",
    ),
    (
        "a-mix-is-a-mix",
        serving(MIX),
        {},
        Verdict.MISMATCH,
        {K.CONTENT_DIFFERS},
        {K.SERVES_OTHER_RELEASE},
        "reports 1.0 but serves a mix: 1 file(s) are release 2.0's, the rest release 1.0's: "
        "assets/a.js",
    ),
    (
        "file-404",
        with_(CLEAN, a=fetched("assets/a.js", status=404)),
        {},
        Verdict.MISMATCH,
        {K.FILE_MISSING},
        set(),
        "assets/a.js",
    ),
    (
        "file-410-gone-is-missing",
        with_(CLEAN, a=fetched("assets/a.js", status=410)),
        {},
        Verdict.MISMATCH,
        {K.FILE_MISSING},
        {K.OBSERVATION_FAILED},
        "assets/a.js",
    ),
    (
        "asset-503-inconclusive-never-mismatch",
        with_(CLEAN, a=fetched("assets/a.js", status=503)),
        {"manifest_fetch": fetched("artifactcheck.json", X9)},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        {K.FILE_MISSING, K.CONTENT_DIFFERS},
        "1 file(s) could not be fetched",
    ),
    (
        "asset-500-inconclusive",
        with_(CLEAN, a=fetched("assets/a.js", status=500)),
        {},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        {K.FILE_MISSING},
        "could not be fetched",
    ),
    (
        "asset-200-without-digest-inconclusive",
        with_(CLEAN, a=replace(fetched("assets/a.js", A1), hashes={})),
        {},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        {K.CONTENT_DIFFERS},
        "could not be fetched",
    ),
    (
        "asset-timeout-inconclusive",
        with_(CLEAN, b=fetched("assets/b.css", error="read timeout")),
        {},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        set(),
        "could not be fetched",
    ),
    (
        "asset-403-not-compared-not-missing",
        with_(CLEAN, a=fetched("assets/a.js", status=403)),
        {},
        Verdict.CONSISTENT,
        {K.NOT_COMPARED},
        {K.FILE_MISSING, K.OBSERVATION_FAILED},
        "2 of 3 files of release 1.0 checked, no difference found",
    ),
    (
        "fallback-page-by-hash-is-missing",
        with_(CLEAN, a=fetched("assets/a.js", IDX1)),
        {},
        Verdict.MISMATCH,
        {K.FALLBACK_PAGE},
        {K.CONTENT_DIFFERS},
        "reports 1.0 but 1 file(s) are missing: assets/a.js",
    ),
    (
        "fallback-page-of-other-release-index",
        {"assets/a.js": fetched("assets/a.js", IDX2), "index.html": fetched("index.html", IDX2)},
        {},
        Verdict.MISMATCH,
        {K.FALLBACK_PAGE},
        set(),
        "assets/a.js",
    ),
    (
        "fallback-page-by-content-type",
        with_(CLEAN, a=fetched("assets/a.js", X9, content_type="text/html; charset=utf-8")),
        {},
        Verdict.MISMATCH,
        {K.FALLBACK_PAGE},
        {K.CONTENT_DIFFERS},
        "assets/a.js",
    ),
    (
        "right-bytes-with-html-type-are-right",
        with_(CLEAN, a=fetched("assets/a.js", A1, content_type="text/html")),
        {},
        Verdict.CONSISTENT,
        set(),
        {K.FALLBACK_PAGE},
        "serves release 1.0",
    ),
    (
        "html-page-that-differs-is-content",
        with_(CLEAN, i=fetched("index.html", X9, content_type="text/html")),
        {},
        Verdict.MISMATCH,
        {K.CONTENT_DIFFERS},
        {K.FALLBACK_PAGE},
        "index.html",
    ),
    (
        "wrong-base-url-all-missing",
        {p: fetched(p, status=404) for p in CLEAN},
        {},
        Verdict.INCONCLUSIVE,
        {K.LAYOUT, K.FILE_MISSING},
        {K.CONTENT_DIFFERS},
        "no file of release 1.0 is served at the target itself (3 answer 404",
    ),
    (
        "unexpected-file",
        with_(CLEAN, x=fetched("assets/x.js", A1)),
        {},
        Verdict.MISMATCH,
        {K.FILE_UNEXPECTED},
        set(),
        "assets/x.js",
    ),
    (
        "unfetched-release-file-no-claim",
        serving({"index.html": IDX1, "assets/a.js": A1}),
        {},
        Verdict.CONSISTENT,
        {K.NOT_COMPARED},
        {K.SAMPLED},
        "2 of 3 files of release 1.0 checked, no difference found",
    ),
    (
        "sampled-says-so",
        serving({"index.html": IDX1, "assets/a.js": A1}),
        {"sampled": True},
        Verdict.CONSISTENT,
        {K.SAMPLED},
        {K.NOT_COMPARED},
        "2 of 3 files of release 1.0 checked, no difference found",
    ),
    (
        "no-expectation-inconclusive",
        serving(CLEAN),
        {"expectation": DOWN},
        Verdict.INCONCLUSIVE,
        {K.EXPECTATION_UNAVAILABLE},
        set(),
        "no expected release for 1.0: source down",
    ),
    (
        "no-expectation-never-mismatch",
        serving(OLD),
        {"expectation": DOWN},
        Verdict.INCONCLUSIVE,
        {K.EXPECTATION_UNAVAILABLE},
        {K.CONTENT_DIFFERS},
        "no expected release",
    ),
    (
        "stale-copy-still-judges",
        serving(CLEAN),
        {"expectation": Expectation("1.0", R1, stale=True, error="down")},
        Verdict.CONSISTENT,
        {K.EXPECTATION_STALE},
        set(),
        "serves release 1.0",
    ),
    (
        "drift",
        serving(CLEAN),
        {"desired": "2.0"},
        Verdict.DRIFT,
        {K.DRIFT},
        set(),
        "consistent with 1.0, desired is 2.0 (serves release 1.0)",
    ),
    (
        "drift-of-a-sample-claims-no-more",
        serving({"index.html": IDX1}),
        {"desired": "2.0", "sampled": True},
        Verdict.DRIFT,
        {K.DRIFT, K.SAMPLED},
        set(),
        "(1 of 3 files of release 1.0 checked",
    ),
    (
        "names-only-says-so",  # names agree, bytes unvouched: never consistent (exit 0)
        serving(CLEAN),
        {"expectation": Expectation("1.0", NAMES)},
        Verdict.INCONCLUSIVE,
        {K.NAMES_ONLY},
        set(),
        "file names match release 1.0 (file names only",
    ),
    (
        "names-only-sample-says-so",
        serving({"index.html": IDX1}),
        {"expectation": Expectation("1.0", NAMES), "sampled": True},
        Verdict.INCONCLUSIVE,
        {K.NAMES_ONLY, K.SAMPLED},
        set(),
        "1 of 3 files of release 1.0 checked, no difference found (file names only",
    ),
    (
        "names-only-fallback-page-is-missing",
        with_(CLEAN, a=fetched("assets/a.js", IDX1)),
        {"expectation": Expectation("1.0", NAMES)},
        Verdict.MISMATCH,
        {K.FALLBACK_PAGE},
        set(),
        "assets/a.js",
    ),
    (
        "invalid-version-no-lookup",
        serving(CLEAN),
        {"version": "../release-1.0"},
        Verdict.INCONCLUSIVE,
        {K.INVALID_VERSION},
        {K.CONTENT_DIFFERS, K.EXPECTATION_UNAVAILABLE},
        "reports an invalid version",
    ),
    (
        "no-version",
        serving(CLEAN),
        {"version": None, "expectation": None},
        Verdict.INCONCLUSIVE,
        {K.NO_VERSION},
        set(),
        "no reported version",
    ),
    (
        "nothing-fetched",
        {},
        {},
        Verdict.INCONCLUSIVE,
        set(),
        set(),
        "nothing was fetched",
    ),
    (
        "served-manifest-404-is-a-finding",
        serving(CLEAN),
        {"manifest_fetch": fetched("artifactcheck.json", status=404)},
        Verdict.CONSISTENT,
        {K.MANIFEST_MISSING},
        {K.MANIFEST_INVALID, K.FILE_MISSING},
        "serves release 1.0",
    ),
    (
        "served-manifest-404-with-error-text-is-missing-not-invalid",
        serving(CLEAN),
        {
            "manifest_fetch": fetched("artifactcheck.json", status=404),
            "manifest_error": "served manifest artifactcheck.json answers HTTP 404",
        },
        Verdict.CONSISTENT,
        {K.MANIFEST_MISSING},
        {K.MANIFEST_INVALID},
        "serves release 1.0",
    ),
    (
        "no-manifest-at-any-name-is-a-finding",
        serving(CLEAN),
        {"manifest_error": "no served manifest at any well-known name", "manifest_path": ""},
        Verdict.CONSISTENT,
        {K.MANIFEST_MISSING},
        {K.MANIFEST_INVALID},
        "serves release 1.0",
    ),
    (
        "served-manifest-unusable-is-evidence",
        serving(CLEAN),
        {
            "manifest_fetch": fetched("artifactcheck.json", X9),
            "manifest_error": "not JSON",
        },
        Verdict.MISMATCH,
        {K.MANIFEST_INVALID},
        {K.MANIFEST_MISSING},
        "artifactcheck.json",
    ),
    (
        "release-lists-the-manifest-404",
        serving(CLEAN),
        {
            "expectation": Expectation("1.0", release("1.0", {**CLEAN, "asset-manifest.json": X9})),
            "manifest_path": "asset-manifest.json",
            "manifest_fetch": fetched("asset-manifest.json", status=404),
        },
        Verdict.MISMATCH,
        {K.FILE_MISSING, K.MANIFEST_MISSING},
        set(),
        "asset-manifest.json",
    ),
    (
        "off-host-reference-is-not-compared-never-different",
        serving(CLEAN),
        {"unsafe_paths": ("http://cdn.example/app/480.ca20.chunk.js",)},
        Verdict.CONSISTENT,
        {K.NOT_COMPARED},
        {K.UNSAFE_REFERENCE, K.CONTENT_DIFFERS},
        "serves release 1.0",
    ),
    (
        "protocol-relative-reference-is-off-host",
        serving(CLEAN),
        {"unsafe_paths": ("//cdn.example/app/x.js",)},
        Verdict.CONSISTENT,
        {K.NOT_COMPARED},
        {K.UNSAFE_REFERENCE},
        "serves release 1.0",
    ),
    (
        "traversal-reference-is-evidence",
        serving(CLEAN),
        {"unsafe_paths": ("../../etc/passwd",)},
        Verdict.MISMATCH,
        {K.UNSAFE_REFERENCE},
        set(),
        "../../etc/passwd",
    ),
    (
        "signal-conflict",
        serving(CLEAN),
        {"endpoint_version": "0.9"},
        Verdict.SIGNAL_CONFLICT,
        {K.SIGNAL_CONFLICT},
        set(),
        "0.9",
    ),
    # ---------------------------------------------------------------- the CDN
    (
        "cdn-clean",
        serving(CLEAN),
        {"cdn": cdn_of(CDN_CLEAN)},
        Verdict.CONSISTENT,
        set(),
        {K.CDN_MISSING, K.OBSERVATION_FAILED},
        "serves release 1.0",
    ),
    (
        "cdn-html-not-required-by-default",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "index.html": fetched("index.html", status=404)})},
        Verdict.CONSISTENT,
        set(),
        {K.CDN_MISSING},
        "serves release 1.0",
    ),
    (
        "cdn-htm-not-required-by-default",
        {**serving(CLEAN), "about.htm": fetched("about.htm", X9)},
        {
            "expectation": Expectation("1.0", release("1.0", {**CLEAN, "about.htm": X9})),
            "cdn": cdn_of({**CDN_CLEAN, "about.htm": fetched("about.htm", status=404)}),
        },
        Verdict.CONSISTENT,
        set(),
        {K.CDN_MISSING},
        "serves release 1.0",
    ),
    (
        "cdn-include-globs",
        serving(CLEAN),
        {
            "cdn": cdn_of(
                {**CDN_CLEAN, "assets/b.css": fetched("assets/b.css", status=404)},
                include=("assets/*.js",),
            )
        },
        Verdict.CONSISTENT,
        set(),
        {K.CDN_MISSING},
        "serves release 1.0",
    ),
    (
        "cdn-include-matches",
        serving(CLEAN),
        {
            "cdn": cdn_of(
                {**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=404)},
                include=("assets/*.js",),
            )
        },
        Verdict.CDN_MISSING,
        {K.CDN_MISSING},
        set(),
        "missing on the CDN: assets/a.js",
    ),
    (
        "cdn-exclude-can-be-emptied",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "index.html": fetched("index.html", status=404)}, exclude=())},
        Verdict.CDN_MISSING,
        {K.CDN_MISSING},
        set(),
        "missing on the CDN: index.html",
    ),
    (
        "cdn-403",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=403)})},
        Verdict.CDN_MISSING,
        {K.CDN_MISSING},
        set(),
        "missing on the CDN: assets/a.js",
    ),
    (
        "cdn-410",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=410)})},
        Verdict.CDN_MISSING,
        {K.CDN_MISSING},
        set(),
        "missing on the CDN: assets/a.js",
    ),
    (
        "cdn-fallback-page-is-missing",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", IDX1)})},
        Verdict.CDN_MISSING,
        {K.FALLBACK_PAGE},
        {K.CDN_DIFFERS},
        "missing on the CDN: assets/a.js",
    ),
    (
        "cdn-fallback-of-its-own-index",
        serving(CLEAN),
        {
            "cdn": cdn_of(
                {
                    **CDN_CLEAN,
                    "index.html": fetched("index.html", X9),
                    "assets/a.js": fetched("assets/a.js", X9),
                }
            )
        },
        Verdict.CDN_MISSING,
        {K.FALLBACK_PAGE},
        {K.CDN_DIFFERS},
        "missing on the CDN: assets/a.js",
    ),
    (
        "cdn-differs",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)})},
        Verdict.CDN_MISMATCH,
        {K.CDN_DIFFERS},
        set(),
        "differs on the CDN: assets/a.js",
    ),
    (
        "cdn-right-instance-wrong-blames-the-instance-only",
        serving(OLD),
        {"cdn": cdn_of({**CDN_CLEAN, "index.html": fetched("index.html", IDX1)})},
        Verdict.MISMATCH,
        {K.CONTENT_DIFFERS},
        {K.CDN_DIFFERS},
        "serves 2.0's content",
    ),
    (
        "cdn-differs-without-release",
        serving(CLEAN),
        {
            "expectation": DOWN,
            "cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)}),
        },
        Verdict.CDN_MISMATCH,
        {K.CDN_DIFFERS, K.EXPECTATION_UNAVAILABLE},
        set(),
        "differs on the CDN",
    ),
    (
        "cdn-down-inconclusive",
        serving(CLEAN),
        {"cdn": cdn_of({}, error="CDN unreachable")},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        set(),
        "the CDN could not be checked: CDN unreachable",
    ),
    (
        "cdn-down-only-html-nothing-to-check",
        serving({"index.html": IDX1}),
        {"cdn": cdn_of({}, error="CDN unreachable"), "sampled": True},
        Verdict.CONSISTENT,
        set(),
        {K.OBSERVATION_FAILED},
        "1 of 3 files",
    ),
    (
        "cdn-asset-timeout-inconclusive",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", error="timeout")})},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        set(),
        "the CDN could not be checked: timeout",
    ),
    (
        "cdn-asset-502-inconclusive",
        serving(CLEAN),
        {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=502)})},
        Verdict.INCONCLUSIVE,
        {K.OBSERVATION_FAILED},
        {K.CDN_MISSING},
        "the CDN could not be checked: HTTP 502",
    ),
    (
        "cdn-down-mismatch-still-seen",
        serving(OLD),
        {"cdn": cdn_of({}, error="CDN unreachable")},
        Verdict.MISMATCH,
        {K.CONTENT_DIFFERS},
        set(),
        "serves 2.0's content",
    ),
    (
        "referenced-on-the-cdn-and-right",
        {**serving(CLEAN), "app/assets/a.js": fetched("app/assets/a.js", A1)},
        {"on_cdn": {"app/assets/a.js": "http://cdn/app/assets/a.js"}, "cdn": cdn_of(CDN_CLEAN)},
        Verdict.CONSISTENT,
        set(),
        {K.FILE_UNEXPECTED, K.CDN_DIFFERS},
        "serves release 1.0",
    ),
    (
        "referenced-on-the-cdn-and-wrong",
        {**serving(CLEAN), "app/assets/a.js": fetched("app/assets/a.js", A2)},
        {"on_cdn": {"app/assets/a.js": "http://cdn/app/assets/a.js"}, "cdn": cdn_of(CDN_CLEAN)},
        Verdict.CDN_MISMATCH,
        {K.CDN_DIFFERS},
        {K.FILE_UNEXPECTED, K.CONTENT_DIFFERS},
        "differs on the CDN: app/assets/a.js",
    ),
    (
        "referenced-on-the-cdn-and-missing",
        {**serving(CLEAN), "app/assets/a.js": fetched("app/assets/a.js", status=404)},
        {"on_cdn": {"app/assets/a.js": "http://cdn/app/assets/a.js"}, "cdn": cdn_of(CDN_CLEAN)},
        Verdict.CDN_MISSING,
        {K.CDN_MISSING},
        {K.FILE_MISSING},
        "missing on the CDN: app/assets/a.js",
    ),
    (
        "referenced-on-the-cdn-only",
        {"index.html": fetched("index.html", IDX1), "assets/x.js": fetched("assets/x.js", A1)},
        {
            "on_cdn": {"assets/x.js": "http://cdn/assets/x.js"},
            "expectation": Expectation("1.0", release("1.0", {"index.html": IDX1, "x.js": A1})),
        },
        Verdict.CONSISTENT,
        set(),
        {K.FILE_UNEXPECTED, K.NOT_COMPARED},
        "serves release 1.0",
    ),
]


@pytest.mark.parametrize(
    ("assets", "kw", "verdict", "present", "absent", "reason"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_judge_instance(
    assets: dict[str, Fetched],
    kw: dict[str, Any],
    verdict: Verdict,
    present: set[FindingKind],
    absent: set[FindingKind],
    reason: str,
) -> None:
    result = judge(assets, **kw)
    kinds = {f.kind for f in result.findings}
    assert result.verdict is verdict, result.reason
    assert present <= kinds, kinds
    assert not absent & kinds, kinds
    assert reason in result.reason, result.reason
    if "serves release" in result.reason:  # the claim is made only on complete evidence
        assert result.coverage is not None and result.coverage.complete
        assert K.NAMES_ONLY not in kinds
    assert ("file names only" in result.reason) is (K.NAMES_ONLY in kinds)
    # every finding is about this instance, says something, and has a severity
    for f in result.findings:
        assert f.instance == "i1" and isinstance(f.message, str) and f.message, f
        assert isinstance(f.severity, Severity), f
    assert result.observation is not None and result.reported_version == kw.get("version", "1.0")
    assert result.serves_version is None or result.verdict is Verdict.MISMATCH
    if result.observation.assets:
        assert result.fingerprint is not None


@pytest.mark.parametrize(
    ("assets", "kw", "compared", "total", "not_compared"),
    [
        pytest.param(serving(CLEAN), {}, 3, 3, {}, id="complete"),
        pytest.param(
            serving({"index.html": IDX1}),
            {"sampled": True},
            1,
            3,
            {"assets/a.js": "sampled out", "assets/b.css": "sampled out"},
            id="sampled",
        ),
        pytest.param(
            serving({"index.html": IDX1, "assets/a.js": A1}),
            {
                "manifest": Manifest(
                    "vite", {"assets/a.js": ManifestEntry("assets/a.js")}, source="x"
                )
            },
            2,
            3,
            {"assets/b.css": "not referenced by the served manifest (not fetched)"},
            id="unreferenced",
        ),
        pytest.param(
            serving({"index.html": IDX1}),
            {"manifest_fetch": fetched("artifactcheck.json", status=404)},
            1,
            3,
            {
                "assets/a.js": "the served manifest is missing",
                "assets/b.css": "the served manifest is missing",
            },
            id="manifest-missing",
        ),
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", error="read timeout")),
            {},
            2,
            3,
            {"assets/a.js": "could not be fetched (read timeout)"},
            id="timeout",
        ),
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", status=403)),
            {},
            2,
            3,
            {"assets/a.js": "the instance refuses it (HTTP 403)"},
            id="refused",
        ),
        pytest.param(
            serving({"index.html": IDX1, "assets/a.js": A1}),
            {},
            2,
            3,
            {"assets/b.css": "not fetched"},
            id="not-fetched",
        ),
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", status=404)),
            {},
            3,
            3,
            {},
            id="missing-counts-as-compared",
        ),
    ],
)
def test_every_release_file_is_accounted_for(
    assets: dict[str, Fetched],
    kw: dict[str, Any],
    compared: int,
    total: int,
    not_compared: dict[str, str],
) -> None:
    cov = judge(assets, **kw).coverage
    assert cov is not None
    assert (cov.compared, cov.total) == (compared, total)
    assert dict(cov.not_compared) == not_compared
    assert cov.complete is (not not_compared and compared == total)


@pytest.mark.parametrize(
    ("assets", "kw", "verified"),
    [
        pytest.param(serving(CLEAN), {}, True, id="clean"),
        pytest.param(serving(CLEAN), {"desired": "2.0"}, True, id="drift"),
        pytest.param(serving(OLD), {}, False, id="mismatch"),
        pytest.param(serving(CLEAN), {"expectation": DOWN}, False, id="no-release"),
        pytest.param(
            serving(CLEAN),
            {
                "expectation": DOWN,
                "cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)}),
            },
            False,
            id="cdn-mismatch-without-release",
        ),
        pytest.param(
            serving(CLEAN),
            {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)})},
            True,
            id="cdn-mismatch-instance-right",
        ),
        pytest.param(
            serving(CLEAN),
            {"cdn": cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=404)})},
            True,
            id="cdn-missing-instance-right",
        ),
        pytest.param(
            serving(CLEAN), {"expectation": Expectation("1.0", NAMES)}, False, id="names-only"
        ),
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", status=503)), {}, False, id="failed-fetch"
        ),
        pytest.param(serving(CLEAN), {"version": "1.0/.."}, False, id="invalid-version"),
        pytest.param(serving(CLEAN), {"endpoint_version": "0.9"}, False, id="signal-conflict"),
        pytest.param(serving(CLEAN), {"expectation": None, "peers": 1}, False, id="consensus-1"),
        pytest.param(
            serving(CLEAN),
            {"expectation": None, "peers": 2, "agreement": Agreement(1, ("assets/a.js",))},
            True,
            id="consensus-2",
        ),
        pytest.param(
            serving(CLEAN), {"expectation": None, "peers": 2}, False, id="consensus-2-unshared"
        ),
        pytest.param({p: fetched(p, status=403) for p in CLEAN}, {}, False, id="nothing-compared"),
    ],
)
def test_content_verified(assets: dict[str, Fetched], kw: dict[str, Any], verified: bool) -> None:
    r = judge(assets, **kw)
    assert r.content_verified is verified, r.reason
    assert r.verified is verified


def test_nothing_compared_is_never_consistent() -> None:
    r = judge({p: fetched(p, status=403) for p in CLEAN})
    assert r.verdict is Verdict.INCONCLUSIVE
    assert "no file of release 1.0 could be compared" in r.reason


def test_cdn_differs_orientation_and_message() -> None:
    r = judge(serving(CLEAN), cdn=cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)}))
    (f,) = [f for f in r.findings if f.kind is K.CDN_DIFFERS]
    assert (f.expected, f.actual) == (A1, A2)  # the release's hash, what the CDN served
    assert f"the release has {A1[:12]}, the CDN serves {A2[:12]}" in f.message


def test_cdn_differs_without_a_release_names_both_sides() -> None:
    r = judge(
        serving(CLEAN),
        expectation=DOWN,
        cdn=cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", A2)}),
    )
    (f,) = [f for f in r.findings if f.kind is K.CDN_DIFFERS]
    assert (f.expected, f.actual) == (None, A2)
    assert f"the instance serves {A1[:12]}, the CDN {A2[:12]}" in f.message


def test_fallback_page_message_says_index_html() -> None:
    r = judge(with_(CLEAN, a=fetched("assets/a.js", IDX1)))
    (f,) = [f for f in r.findings if f.kind is K.FALLBACK_PAGE]
    assert "answers with index.html" in f.message and f.path == "assets/a.js"
    c = judge(
        serving(CLEAN), cdn=cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", IDX1)})
    )
    (g,) = [f for f in c.findings if f.kind is K.FALLBACK_PAGE]
    assert "missing on the CDN" in g.message and "index.html" in g.message


def test_served_manifest_file_listed_but_fallback_is_missing() -> None:
    served = Manifest("vite", {"assets/x.js": ManifestEntry("assets/x.js")})
    r = judge({**serving(CLEAN), "assets/x.js": fetched("assets/x.js", IDX1)}, manifest=served)
    assert r.verdict is Verdict.MISMATCH
    (f,) = [f for f in r.findings if f.kind is K.FALLBACK_PAGE]
    assert "listed by the served manifest" in f.message


def test_served_manifest_lists_files_the_release_lacks() -> None:
    served = Manifest("vite", {"assets/y.js": ManifestEntry("assets/y.js")})
    r = judge(serving(CLEAN), manifest=served)
    assert r.verdict is Verdict.MISMATCH
    assert any(f.kind is K.FILE_UNEXPECTED and f.path == "assets/y.js" for f in r.findings)


def test_listed_file_404_is_missing_even_outside_the_release() -> None:
    served = Manifest("vite", {"assets/y.js": ManifestEntry("assets/y.js")})
    r = judge(
        {**serving(CLEAN), "assets/y.js": fetched("assets/y.js", status=404)}, manifest=served
    )
    assert r.verdict is Verdict.MISMATCH
    assert any(f.kind is K.FILE_MISSING and f.path == "assets/y.js" for f in r.findings)


def test_served_release_manifest_is_not_unexpected() -> None:
    r = judge(serving(CLEAN), manifest_fetch=fetched("artifactcheck.json", X9))
    assert r.verdict is Verdict.CONSISTENT, r.reason


def test_sampled_finding_is_info_and_not_compared_a_warning() -> None:
    sampled = judge(serving({"index.html": IDX1}), sampled=True)
    (s,) = [f for f in sampled.findings if f.kind is K.SAMPLED]
    assert s.severity is Severity.INFO and "1 of 3 files" in s.message
    partial = judge(serving({"index.html": IDX1}))
    (n,) = [f for f in partial.findings if f.kind is K.NOT_COMPARED]
    assert n.severity is Severity.WARNING and "2 file(s)" in n.message


def test_same_size_is_noted() -> None:
    r = judge(with_(CLEAN, a=fetched("assets/a.js", A2)))
    (f,) = [f for f in r.findings if f.kind is K.CONTENT_DIFFERS]
    assert "(same size)" in f.message and (f.expected, f.actual) == (A1, A2)


def test_serves_other_release_is_named() -> None:
    result = judge(serving(OLD))
    assert result.serves_version == "2.0"
    assert "reports 1.0 but serves 2.0" in result.reason
    assert "assets/a.js" in result.reason and "assets/b.css" in result.reason


def test_other_release_unknown_is_not_named() -> None:
    result = judge(serving(OLD), index=HashIndex({"1.0": R1}))
    assert result.verdict is Verdict.MISMATCH
    assert result.serves_version is None


def test_a_mix_of_unknown_bytes_is_content_differs() -> None:
    r = judge(with_(CLEAN, a=fetched("assets/a.js", X9)))
    assert r.reason == "reports 1.0 but content differs: assets/a.js"
    assert r.serves_version is None


def test_a_mix_of_two_other_releases_names_neither() -> None:
    r3 = release("3.0", {"assets/b.css": X9})
    r = judge(
        with_(CLEAN, a=fetched("assets/a.js", A2), b=fetched("assets/b.css", X9)),
        index=HashIndex({"1.0": R1, "2.0": R2, "3.0": r3}),
    )
    assert r.reason == "reports 1.0 but content differs: assets/a.js, assets/b.css"


def test_two_matching_releases_are_both_said_none_named() -> None:
    twin = replace(R2, version="2.1")
    result = judge(serving(OLD), index=HashIndex({"1.0": R1, "10.0": R2, "9.0": twin}))
    assert result.serves_version is None
    assert K.SERVES_OTHER_RELEASE not in {f.kind for f in result.findings}
    assert "matches each of releases 9.0, 10.0" in result.reason


def test_consistent_names_no_release() -> None:
    assert judge(serving(CLEAN)).serves_version is None


@pytest.mark.parametrize(
    ("hashes", "missing", "expected", "all_found"),
    [
        pytest.param([A2], (), "2.0", ("2.0",), id="one-release"),
        pytest.param([A2, B2, IDX2], (), "2.0", ("2.0",), id="all-of-one-release"),
        pytest.param([A2, IDX1], (), None, (), id="mix-names-none"),
        pytest.param([A1], (), None, (), id="only-the-excluded-one"),
        pytest.param([], (), None, (), id="no-hash-no-release"),
        pytest.param([X9], (), None, (), id="unknown-bytes"),
        pytest.param([A2], ("assets/b.css",), None, (), id="missing-file-the-other-has"),
        pytest.param([A2], ("assets/zzz.js",), "2.0", ("2.0",), id="missing-file-neither-has"),
        pytest.param([B1], (), None, ("9.0", "10.0"), id="several-none-numeric-order"),
    ],
)
def test_release_of_exactly_one(
    hashes: list[str], missing: tuple[str, ...], expected: str | None, all_found: tuple[str, ...]
) -> None:
    shared_b1 = release("9.0", {"assets/b.css": B1})
    also_b1 = release("10.0", {"assets/b.css": B1, "x": X9[:-1] + "8"})
    # 10.0 before 9.0, as text sorts them: only version order puts 9.0 first
    index = HashIndex({"1.0": R1, "2.0": R2, "10.0": also_b1, "9.0": shared_b1})
    assert index.release_of(hashes, exclude="1.0", missing=missing) == expected
    assert index.releases_of(hashes, exclude="1.0", missing=missing) == all_found


def test_version_key_orders_numbers_as_numbers() -> None:
    versions = ["10.0", "9.0", "1.10.0", "1.9.2", "2.0.0-rc.1"]
    assert sorted(versions, key=version_key) == ["1.9.2", "1.10.0", "2.0.0-rc.1", "9.0", "10.0"]


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        pytest.param((), ("*.html", "*.htm"), ["assets/a.js", "assets/b.css"], id="default"),
        pytest.param(
            (),
            (),
            ["about.htm", "assets/a.js", "assets/b.css", "index.html", "x/index.html"],
            id="none-excluded",
        ),
        pytest.param(("assets/*",), (), ["assets/a.js", "assets/b.css"], id="include"),
        pytest.param(("*.js",), ("*.html",), ["assets/a.js"], id="include-and-exclude"),
        pytest.param(("assets/*",), ("*.css",), ["assets/a.js"], id="exclude-wins"),
        pytest.param(("ASSETS/*",), (), [], id="case-sensitive"),
    ],
)
def test_cdn_paths(include: tuple[str, ...], exclude: tuple[str, ...], expected: list[str]) -> None:
    paths = ["about.htm", "assets/a.js", "assets/b.css", "index.html", "x/index.html"]
    assert cdn_paths(paths, include, exclude) == expected


def test_cdn_paths_default_excludes_html() -> None:
    assert cdn_paths(["index.html", "a.js", "b.htm"]) == ["a.js"]


@pytest.mark.parametrize(
    ("error_kind", "verdict", "kind"),
    [
        pytest.param("connect", Verdict.UNREACHABLE, K.UNREACHABLE, id="connect"),
        pytest.param("tls", Verdict.UNREACHABLE, K.UNREACHABLE, id="tls"),
        pytest.param("status", Verdict.INCONCLUSIVE, K.UNREACHABLE, id="status"),
        pytest.param("check-failed", Verdict.INCONCLUSIVE, K.CHECK_FAILED, id="check-failed"),
    ],
)
def test_unobserved_instance(error_kind: str, verdict: Verdict, kind: FindingKind) -> None:
    o = Observation(
        instance=Instance(name="x", base_url="http://x/", signals=(VersionSignal("t", "1.0"),)),
        manifest_path="",
        error="it went wrong",
        error_kind=error_kind,
    )
    r = judge_instance(o, expectation=E1, index=HashIndex({}))
    assert r.verdict is verdict
    assert [f.kind for f in r.findings] == [kind]
    assert r.reason == "could not be observed: it went wrong"
    assert r.reported_version == "1.0" and r.content_verified is False


def test_signal_conflict() -> None:
    r = judge(serving(CLEAN), endpoint_version="0.9")
    assert r.verdict is Verdict.SIGNAL_CONFLICT
    assert "0.9" in r.reason


def test_invalid_version_is_never_looked_up() -> None:
    looked: list[str] = []

    class Spy(dict[str, Expectation]):
        def get(self, key: str, default: Any = None) -> Any:
            looked.append(key)
            return super().get(key, default)

    bad = obs("i1", "1.0?a", serving(CLEAN))
    good = obs("i2", "1.0", serving(CLEAN))
    results = compare_fleet([bad, good], expectations=Spy({"1.0": E1}))
    assert results[0].verdict is Verdict.INCONCLUSIVE
    assert K.INVALID_VERSION in {f.kind for f in results[0].findings}
    assert results[1].verdict is Verdict.CONSISTENT
    assert "1.0?a" not in looked


def test_consensus_of_one_is_inconclusive() -> None:
    (r,) = compare_fleet([obs("only", "1.0", serving(CLEAN))], expectations=None)
    assert r.verdict is Verdict.INCONCLUSIVE
    assert "at least two" in r.reason and "siblings" not in r.reason


def test_consensus_of_one_per_version_is_inconclusive() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "2.0", serving(OLD))]
    assert {r.verdict for r in compare_fleet(fleet, expectations=None)} == {Verdict.INCONCLUSIVE}


def test_consensus_of_two_agrees() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(CLEAN))]
    results = compare_fleet(fleet, expectations=None)
    assert {r.verdict for r in results} == {Verdict.CONSISTENT}
    assert results[0].reason == "agrees with its 1 sibling(s) on 1.0"


def test_consensus_ignores_unobserved_siblings() -> None:
    gone = Observation(
        instance=Instance(name="g", base_url="http://g/", signals=(VersionSignal("t", "1.0"),)),
        manifest_path="",
        error="refused",
        error_kind="connect",
    )
    results = compare_fleet([obs("a", "1.0", serving(CLEAN)), gone], expectations=None)
    assert results[0].verdict is Verdict.INCONCLUSIVE


def test_consensus_minority_is_suspect() -> None:
    fleet = [obs(f"i{n}", "1.0", serving(CLEAN)) for n in range(4)] + [
        obs("odd", "1.0", serving(OLD))
    ]
    results = {r.instance.name: r for r in compare_fleet(fleet, expectations=None)}
    assert results["odd"].verdict is Verdict.MISMATCH
    assert {f.kind for f in results["odd"].findings} >= {FindingKind.MINORITY_CONTENT}
    assert all(results[f"i{n}"].verdict is Verdict.CONSISTENT for n in range(4))
    assert results["i0"].reason == "agrees with 3 of its 4 sibling(s) on 1.0"


def test_consensus_tie_is_inconclusive() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(OLD))]
    results = compare_fleet(fleet, expectations=None)
    assert {r.verdict for r in results} == {Verdict.INCONCLUSIVE}
    assert consensus_findings(fleet)
    assert "siblings disagree with no majority" in results[0].reason


def test_consensus_strict_majority() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(CLEAN))]
    fleet += [obs("c", "1.0", serving(OLD))]
    found = consensus_findings(fleet)
    assert [f.kind for f in found["c"]] == [K.MINORITY_CONTENT] * 3
    assert "a" not in found and "b" not in found
    (first, *_) = found["c"]
    assert "differs from 2 of its 2 siblings reporting 1.0" in first.message


def test_compare_fleet_missing_expectation_is_inconclusive() -> None:
    (r,) = compare_fleet([obs("a", "3.0", serving(CLEAN))], expectations={"1.0": E1})
    assert r.verdict is Verdict.INCONCLUSIVE
    assert "not loaded" in r.reason


def test_compare_fleet_names_releases_from_known_and_loaded() -> None:
    (r,) = compare_fleet(
        [obs("a", "1.0", serving(OLD))], expectations={"1.0": E1}, known_releases={"2.0": R2}
    )
    assert r.serves_version == "2.0"
    (s,) = compare_fleet(
        [obs("a", "1.0", serving(OLD))],
        expectations={"1.0": E1, "2.0": Expectation("2.0", R2)},
    )
    assert s.serves_version == "2.0"


def test_image_divergence_is_a_finding() -> None:
    fleet = [obs(f"i{n}", "1.0", serving(CLEAN), image_id="sha256:aaa") for n in range(3)]
    fleet.append(obs("odd", "1.0", serving(CLEAN), image_id="sha256:bbb"))
    results = {r.instance.name: r for r in compare_fleet(fleet, expectations={"1.0": E1})}
    kinds = {f.kind for f in results["odd"].findings}
    assert FindingKind.IMAGE_DIVERGES in kinds
    assert FindingKind.IMAGE_DIVERGES not in {f.kind for f in results["i0"].findings}


def test_integrity_from_served_manifest_without_release() -> None:
    served = Manifest(
        format="webpack-assets",
        files={"assets/a.js": ManifestEntry("assets/a.js", hashes={"sha256": A1})},
    )
    o = Observation(
        instance=Instance(
            name="i", base_url="http://i/", signals=(VersionSignal("target", "1.0"),)
        ),
        manifest_path="assets-manifest.json",
        manifest=served,
        assets={"assets/a.js": fetched("assets/a.js", A2)},
    )
    r = judge_instance(o, expectation=None, index=HashIndex({}))
    assert r.verdict is Verdict.MISMATCH
    assert FindingKind.INTEGRITY_FAILED in {f.kind for f in r.findings}


# ------------------------------------------------------- what each finding carries

ON_CDN = {"app/assets/a.js": "http://cdn/app/assets/a.js"}


@pytest.mark.parametrize(
    ("answer", "expectation", "verdict", "kind", "compared"),
    [
        pytest.param(fetched("app/assets/a.js", A1), E1, Verdict.CONSISTENT, None, 3, id="right"),
        pytest.param(
            fetched("app/assets/a.js", A2), E1, Verdict.CDN_MISMATCH, K.CDN_DIFFERS, 3, id="wrong"
        ),
        pytest.param(
            fetched("app/assets/a.js", status=404),
            E1,
            Verdict.CDN_MISSING,
            K.CDN_MISSING,
            3,
            id="missing",
        ),
        pytest.param(
            fetched("app/assets/a.js", IDX1),
            E1,
            Verdict.CDN_MISSING,
            K.FALLBACK_PAGE,
            3,
            id="fallback",
        ),
        pytest.param(
            fetched("app/assets/a.js", error="timeout"),
            E1,
            Verdict.INCONCLUSIVE,
            K.OBSERVATION_FAILED,
            2,
            id="timeout",
        ),
        pytest.param(
            fetched("app/assets/a.js", A2),
            Expectation("1.0", NAMES),
            Verdict.INCONCLUSIVE,  # the names are there; nobody vouched for the bytes
            K.NAMES_ONLY,
            3,
            id="names-only-present",
        ),
        pytest.param(
            fetched("app/assets/a.js", status=410),
            Expectation("1.0", NAMES),
            Verdict.CDN_MISSING,
            K.CDN_MISSING,
            3,
            id="names-only-gone",
        ),
        pytest.param(
            fetched("app/assets/a.js", A2),
            Expectation("1.0", release("1.0", {"index.html": IDX1, "b.css": B1})),
            Verdict.CONSISTENT,
            K.NOT_COMPARED,
            2,
            id="matches-no-release-file",
        ),
        pytest.param(
            fetched("app/assets/a.js", status=404),
            Expectation("1.0", release("1.0", {"index.html": IDX1, "b.css": B1})),
            Verdict.CDN_MISSING,
            K.CDN_MISSING,
            2,
            id="matches-no-release-file-and-missing",
        ),
    ],
)
def test_referenced_on_the_cdn(
    answer: Fetched,
    expectation: Expectation,
    verdict: Verdict,
    kind: FindingKind | None,
    compared: int,
) -> None:
    files = {p: fetched(p, h) for p, h in CLEAN.items() if p != "assets/a.js"}
    if "b.css" in expectation.manifest.files:  # type: ignore[union-attr]
        files = {"index.html": fetched("index.html", IDX1), "b.css": fetched("b.css", B1)}
    r = judge({**files, answer.path: answer}, expectation=expectation, on_cdn=ON_CDN)
    assert r.verdict is verdict, r.reason
    kinds = [f.kind for f in r.findings]
    if kind is not None:
        assert kind in kinds
        found = next(f for f in r.findings if f.kind is kind)
        assert found.instance == "i1"
        assert found.path in ("app/assets/a.js", ON_CDN[answer.path], "assets/b.css")
    else:
        assert kinds == []
    assert K.FILE_UNEXPECTED not in kinds and K.CONTENT_DIFFERS not in kinds
    assert r.coverage is not None and r.coverage.compared == compared


def test_referenced_on_the_cdn_findings_say_where() -> None:
    r = judge({**serving(CLEAN), "app/assets/a.js": fetched("app/assets/a.js", A2)}, on_cdn=ON_CDN)
    (f,) = r.findings
    assert f.message.startswith("http://cdn/app/assets/a.js on the CDN differs from release 1.0")
    assert (f.kind, f.path, f.expected, f.actual) == (K.CDN_DIFFERS, "app/assets/a.js", A1, A2)


def test_referenced_on_the_cdn_is_judged_after_the_view() -> None:
    """Every located file is judged, not only those before the first one unknown."""
    on_cdn = {"a/gone.js": "http://cdn/a/gone.js", "z/assets/b.css": "http://cdn/z/assets/b.css"}
    r = judge(
        {**serving(CLEAN), "z/assets/b.css": fetched("z/assets/b.css", B2)},
        on_cdn=on_cdn,
        cdn=cdn_of({"assets/a.js": fetched("assets/a.js", A1)}),
    )
    assert r.verdict is Verdict.CDN_MISMATCH
    assert [f.path for f in r.findings if f.kind is K.CDN_DIFFERS] == ["z/assets/b.css"]


@pytest.mark.parametrize(
    ("cdn_answer", "kind", "expected", "actual", "message"),
    [
        pytest.param(
            fetched("assets/a.js", status=404),
            K.CDN_MISSING,
            A1,
            "404",
            "assets/a.js is missing on the CDN: it answers 404",
            id="missing",
        ),
        pytest.param(
            fetched("assets/a.js", IDX1),
            K.FALLBACK_PAGE,
            A1,
            "answers with index.html (the fallback page)",
            "assets/a.js is missing on the CDN: it answers with index.html (the fallback page)",
            id="fallback",
        ),
        pytest.param(
            fetched("assets/a.js", A2),
            K.CDN_DIFFERS,
            A1,
            A2,
            f"assets/a.js on the CDN differs from release 1.0: the release has {A1[:12]}, "
            f"the CDN serves {A2[:12]}",
            id="differs",
        ),
    ],
)
def test_cdn_findings_carry_their_evidence(
    cdn_answer: Fetched, kind: FindingKind, expected: str, actual: str, message: str
) -> None:
    r = judge(serving(CLEAN), cdn=cdn_of({**CDN_CLEAN, "assets/a.js": cdn_answer}))
    (f,) = [f for f in r.findings if f.kind is kind]
    assert (f.instance, f.path, f.expected, f.actual, f.message) == (
        "i1",
        "assets/a.js",
        expected,
        actual,
        message,
    )
    assert r.content_verified is True  # the instance's own bytes are right


def test_cdn_checks_every_path_not_only_the_first() -> None:
    cdn = cdn_of({"assets/b.css": fetched("assets/b.css", B2)})  # a.js never asked
    r = judge(serving(CLEAN), cdn=cdn)
    assert r.verdict is Verdict.CDN_MISMATCH
    assert "assets/b.css" in r.reason


def test_cdn_unchecked_names_the_file() -> None:
    r = judge(
        serving(CLEAN),
        cdn=cdn_of({**CDN_CLEAN, "assets/b.css": fetched("assets/b.css", status=502)}),
    )
    (f,) = [f for f in r.findings if f.kind is K.OBSERVATION_FAILED]
    assert f.path == "assets/b.css" and f.instance == "i1"
    assert f.message == "CDN could not be checked for 1 file(s): HTTP 502"


def test_a_failed_asset_is_not_asked_of_the_cdn() -> None:
    assets = with_(CLEAN, a=fetched("assets/a.js", status=503))
    r = judge(assets, cdn=cdn_of({**CDN_CLEAN, "assets/a.js": fetched("assets/a.js", status=404)}))
    assert K.CDN_MISSING not in {f.kind for f in r.findings}


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        pytest.param("about.htm", K.CONTENT_DIFFERS, id="htm-page"),
        pytest.param("ABOUT.HTML", K.CONTENT_DIFFERS, id="upper-case-page"),
        pytest.param("about.txt", K.FALLBACK_PAGE, id="not-a-page"),
    ],
)
def test_a_page_is_never_its_own_fallback(path: str, kind: FindingKind) -> None:
    exp = Expectation("1.0", release("1.0", {**CLEAN, path: X9}))
    r = judge({**serving(CLEAN), path: fetched(path, IDX1)}, expectation=exp)
    assert kind in {f.kind for f in r.findings}


def test_no_version_content_reason() -> None:
    served = Manifest("ngsw", {"assets/a.js": ManifestEntry("assets/a.js", hashes={"sha256": A1})})
    r = judge(
        {"assets/a.js": fetched("assets/a.js", A2)}, version=None, expectation=None, manifest=served
    )
    assert r.reason == "reports (no version) but content differs: assets/a.js"


def test_releases_of_is_an_intersection() -> None:
    index = HashIndex({"2.0": R2, "9.0": release("9.0", {"assets/b.css": B1})})
    assert index.releases_of([A2, B1], exclude="1.0") == ()
    assert index.releases_of([B1, A2], exclude="1.0") == ()
    assert index.releases_of([A2, B2], exclude="1.0") == ("2.0",)
    assert index.releases_of([A2], exclude="2.0") == ()


def test_version_key_compares_numbers_before_words() -> None:
    assert sorted(["1.0.rc", "1.0.1"], key=version_key) == ["1.0.1", "1.0.rc"]
    assert sorted(["1.0.b", "1.0.a"], key=version_key) == ["1.0.a", "1.0.b"]


def test_unobserved_finding_carries_the_error_and_certificate() -> None:
    from datetime import UTC, datetime

    from artifactcheck.model.values import CertInfo

    now = datetime(2026, 1, 1, tzinfo=UTC)
    cert = CertInfo("x:443", "CN=x", "CN=ca", datetime(2025, 12, 1, tzinfo=UTC))
    o = Observation(
        instance=Instance(name="x", base_url="https://x/"),
        manifest_path="",
        error="certificate expired",
        error_kind="tls",
        tls=cert,
    )
    r = judge_instance(o, expectation=None, index=HashIndex({}), now=now)
    assert [(f.kind, f.message, f.instance) for f in r.findings][0] == (
        K.UNREACHABLE,
        "certificate expired",
        "x",
    )
    assert [f.kind for f in r.findings][1:] == [K.TLS_EXPIRING]
    assert r.observation is o and r.reported_version is None
    assert judge_instance(o, expectation=None, index=HashIndex({})).findings[1:] == ()


def test_coverage_without_a_release() -> None:
    served = Manifest(
        "vite",
        {p: ManifestEntry(p) for p in ("index.html", "assets/a.js", "assets/b.css")},
    )
    o = obs(
        "a",
        "1.0",
        {
            "index.html": fetched("index.html", IDX1),
            "assets/a.js": fetched("assets/a.js", error="timeout"),
        },
        manifest=served,
        encodings=("identity", "gzip"),
        sampled=True,
    )
    r = judge_instance(o, expectation=None, index=HashIndex({}), peers=2)
    assert r.coverage is not None
    assert (r.coverage.compared, r.coverage.total) == (1, 3)
    assert dict(r.coverage.not_compared) == {
        "assets/a.js": "could not be fetched (timeout)",
        "assets/b.css": "sampled out",
    }
    assert r.coverage.encodings == ("identity", "gzip")


# ------------------------------------------------------------- siblings and images


def test_consensus_findings_carry_their_evidence() -> None:
    unanimous = {"index.html": IDX1}
    fleet = [
        obs("a", "1.0", serving({**unanimous, "assets/a.js": A1})),
        obs("b", "1.0", serving({**unanimous, "assets/a.js": A1})),
        obs("c", "1.0", serving({**unanimous, "assets/a.js": A2})),
        obs("d", "2.0", serving({**unanimous, "assets/a.js": A1})),
        obs("e", "2.0", serving({**unanimous, "assets/a.js": A2})),
    ]
    found = consensus_findings(fleet)
    assert sorted(found) == ["c", "d", "e"]  # the unanimous first path hides nothing
    (minority,) = found["c"]
    assert (
        minority.kind,
        minority.instance,
        minority.path,
        minority.expected,
        minority.actual,
    ) == (
        K.MINORITY_CONTENT,
        "c",
        "assets/a.js",
        A1,
        A2,
    )
    (tie,) = found["d"]
    assert (tie.kind, tie.instance, tie.path, tie.severity) == (
        K.NO_CONSENSUS,
        "d",
        "assets/a.js",
        Severity.WARNING,
    )
    assert tie.message == "siblings reporting 2.0 disagree on assets/a.js with no majority"


def test_consensus_ignores_answers_without_a_digest() -> None:
    no_body = replace(fetched("assets/a.js", A1), hashes={})
    fleet = [
        obs("a", "1.0", {"assets/a.js": fetched("assets/a.js", A1)}),
        obs("b", "1.0", {"assets/a.js": fetched("assets/a.js", A1)}),
        obs("c", "1.0", {"assets/a.js": no_body}),
        obs("d", "1.0", {"assets/a.js": fetched("assets/a.js", status=404)}),
    ]
    found = consensus_findings(fleet)
    # c answered nothing to compare; d lacks the file two of its three siblings serve
    assert set(found) == {"d"}
    (f,) = found["d"]
    assert f.kind is K.MINORITY_CONTENT and f.expected == A1 and f.actual == "answers 404"
    assert (
        f.message == "assets/a.js is missing here (it answers 404) while 2 of its 2 siblings "
        "reporting 1.0 serve it"
    )


def test_consensus_skips_invalid_versions() -> None:
    fleet = [obs("a", "../x", serving(CLEAN)), obs("b", "../x", serving(OLD))]
    assert consensus_findings(fleet) == {}


def test_image_findings_carry_their_evidence() -> None:
    from artifactcheck.judge.compare import image_findings

    def inst(name: str, version: str | None, image: str) -> Instance:
        signals = (VersionSignal("label", version),) if version else ()
        return Instance(name=name, base_url="http://x/", signals=signals, image_id=image)

    found = image_findings(
        [
            inst("a", "1.0", "sha256:one"),
            inst("b", "1.0", "sha256:one"),
            inst("c", "2.0", "sha256:two"),
            inst("d", "2.0", "sha256:two"),
            inst("e", "2.0", "sha256:old"),
            inst("f", None, "sha256:other"),
        ]
    )
    assert list(found) == ["e"]
    (f,) = found["e"]
    assert (f.kind, f.instance, f.expected, f.actual, f.severity) == (
        K.IMAGE_DIVERGES,
        "e",
        "sha256:two",
        "sha256:old",
        Severity.WARNING,
    )
    assert f.message == (
        "runs image sha256:old while 2 of 3 instances reporting 2.0 run sha256:two"
    )


def test_compare_fleet_passes_everything_through() -> None:
    from datetime import UTC, datetime

    from artifactcheck.model.values import CertInfo

    now = datetime(2026, 1, 1, tzinfo=UTC)
    soon = CertInfo("i:443", "CN=i", "CN=ca", datetime(2026, 1, 15, tzinfo=UTC))
    fleet = [obs(f"i{n}", "1.0", serving(CLEAN), image_id="sha256:a") for n in range(3)]
    fleet.append(obs("odd", "1.0", serving(OLD), image_id="sha256:b", tls=soon))
    results = {
        r.instance.name: r
        for r in compare_fleet(fleet, expectations=None, now=now, tls_warn_days=15.0)
    }
    kinds = [f.kind for f in results["odd"].findings]
    assert K.IMAGE_DIVERGES in kinds and K.MINORITY_CONTENT in kinds  # both kept
    assert K.TLS_EXPIRING in kinds
    assert K.TLS_EXPIRING not in [
        f.kind
        for f in compare_fleet(fleet, expectations=None, now=now, tls_warn_days=14.0)[3].findings
    ]
    (drift,) = compare_fleet(
        [obs("a", "1.0", serving(CLEAN))], expectations={"1.0": E1}, desired_version="2.0"
    )
    assert drift.verdict is Verdict.DRIFT


def test_compare_fleet_unloaded_version_reason() -> None:
    (r,) = compare_fleet([obs("a", "3.0", serving(CLEAN))], expectations={"1.0": E1})
    assert r.reason == "no expected release for 3.0: not loaded"


@pytest.mark.parametrize(
    ("assets", "kw", "kind", "path", "expected", "actual"),
    [
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", status=404)),
            {},
            K.FILE_MISSING,
            "assets/a.js",
            A1,
            "answers 404",
            id="missing",
        ),
        pytest.param(
            with_(CLEAN, a=fetched("assets/a.js", IDX1)),
            {},
            K.FALLBACK_PAGE,
            "assets/a.js",
            A1,
            "answers with index.html (the fallback page)",
            id="fallback",
        ),
        pytest.param(
            with_(CLEAN, x=fetched("assets/0.js", A2)),
            {},
            K.FILE_UNEXPECTED,
            "assets/0.js",
            None,
            A2,
            id="unexpected",
        ),
        pytest.param(
            serving(CLEAN),
            {"version": "1.0/x"},
            K.INVALID_VERSION,
            None,
            None,
            "1.0/x",
            id="invalid-version",
        ),
        pytest.param(
            serving(CLEAN),
            {"manifest_fetch": fetched("artifactcheck.json", status=410)},
            K.MANIFEST_MISSING,
            "artifactcheck.json",
            None,
            "410",
            id="manifest-gone",
        ),
        pytest.param(
            serving(CLEAN),
            {"manifest_error": "nothing at any name", "manifest_path": ""},
            K.MANIFEST_MISSING,
            None,
            None,
            None,
            id="manifest-nowhere",
        ),
        pytest.param(
            serving(CLEAN),
            {"desired": "2.0"},
            K.DRIFT,
            None,
            "2.0",
            "1.0",
            id="drift",
        ),
    ],
)
def test_findings_carry_their_evidence(
    assets: dict[str, Fetched],
    kw: dict[str, Any],
    kind: FindingKind,
    path: str | None,
    expected: str | None,
    actual: str | None,
) -> None:
    r = judge(assets, **kw)
    (f,) = [f for f in r.findings if f.kind is kind]
    assert (f.instance, f.path, f.expected, f.actual) == ("i1", path, expected, actual)


def test_manifest_missing_messages() -> None:
    gone = judge(serving(CLEAN), manifest_fetch=fetched("artifactcheck.json", status=404))
    (f,) = [f for f in gone.findings if f.kind is K.MANIFEST_MISSING]
    assert (
        f.message
        == "served manifest artifactcheck.json answers 404: judged by the release's file list"
    )
    assert f.severity is Severity.WARNING
    nowhere = judge(
        serving(CLEAN),
        manifest_error="no served manifest: 4 names answer HTTP 404",
        manifest_path="",
    )
    (g,) = [f for f in nowhere.findings if f.kind is K.MANIFEST_MISSING]
    assert g.message == (
        "no served manifest: 4 names answer HTTP 404: judged by the release's file list"
    )


def test_not_compared_names_the_first_file_and_reason() -> None:
    r = judge(serving({"index.html": IDX1}))
    (f,) = [f for f in r.findings if f.kind is K.NOT_COMPARED]
    assert f.path == "assets/a.js"
    assert (
        f.message
        == "2 file(s) of release 1.0 not compared: assets/a.js, assets/b.css (not fetched)"
    )


def test_a_release_sharing_bytes_is_still_named() -> None:
    """Files whose bytes both releases hold count for the other release too."""
    r21 = release("2.1", {"index.html": IDX1, "assets/a.js": A2, "assets/b.css": B1})
    r = judge(serving(MIX), index=HashIndex({"1.0": R1, "2.1": r21}))
    assert r.serves_version == "2.1"
    assert r.reason == "reports 1.0 but serves 2.1's content: assets/a.js"


def test_a_404_outside_release_and_served_manifest_is_no_finding() -> None:
    r = judge({**serving(CLEAN), "robots.txt": fetched("robots.txt", status=404)})
    assert r.verdict is Verdict.CONSISTENT and r.findings == ()


def test_every_unexpected_and_differing_file_is_found() -> None:
    r = judge(with_(CLEAN, x=fetched("assets/0.js", A1), a=fetched("assets/a.js", A2)))
    assert {(f.kind, f.path) for f in r.findings} == {
        (K.FILE_UNEXPECTED, "assets/0.js"),
        (K.CONTENT_DIFFERS, "assets/a.js"),
    }


def test_same_size_only_when_sizes_are_equal() -> None:
    other_size = replace(fetched("assets/a.js", A2), size=11)
    r = judge(with_(CLEAN, a=other_size))
    (f,) = r.findings
    assert f.message == "assets/a.js differs from release 1.0"
    unknown = judge(
        serving(CLEAN) | {"assets/a.js": fetched("assets/a.js", A2)},
        expectation=Expectation(
            "1.0",
            replace(
                R1,
                files={
                    **R1.files,
                    "assets/a.js": ManifestEntry("assets/a.js", hashes={"sha256": A1}),
                },
            ),
        ),
    )
    assert unknown.findings[0].message == "assets/a.js differs from release 1.0"


def test_listed_release_files_not_fetched_are_not_unexpected() -> None:
    served = Manifest("vite", {p: ManifestEntry(p) for p in CLEAN})
    r = judge(serving({"index.html": IDX1}), manifest=served, sampled=True)
    assert r.verdict is Verdict.CONSISTENT
    assert K.FILE_UNEXPECTED not in {f.kind for f in r.findings}


def test_consensus_drift_claims_no_release() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(CLEAN))]
    results = compare_fleet(fleet, expectations=None, desired_version="2.0")
    assert results[0].verdict is Verdict.DRIFT
    assert results[0].reason == "consistent with 1.0, desired is 2.0"


def test_consensus_tie_reason_names_the_files() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(OLD))]
    r = compare_fleet(fleet, expectations=None)[0]
    assert r.reason == ("siblings disagree with no majority: assets/a.js, assets/b.css, index.html")


@pytest.mark.parametrize(
    ("days_left", "kind", "severity", "word"),
    [
        pytest.param(30.0, None, None, None, id="far"),
        pytest.param(14.0, None, None, None, id="at-the-warning-line"),
        pytest.param(13.9, K.TLS_EXPIRING, Severity.WARNING, "expires", id="soon"),
        pytest.param(0.0, K.TLS_EXPIRING, Severity.ERROR, "expired", id="now"),
        pytest.param(-1.0, K.TLS_EXPIRING, Severity.ERROR, "expired", id="past"),
    ],
)
def test_tls_findings(
    days_left: float, kind: FindingKind | None, severity: Severity | None, word: str | None
) -> None:
    from datetime import UTC, datetime, timedelta

    from artifactcheck.judge.compare import tls_findings
    from artifactcheck.model.values import CertInfo

    now = datetime(2026, 1, 1, tzinfo=UTC)
    cert = CertInfo("x:443", "CN=x", "CN=ca", now + timedelta(days=days_left))
    found = tls_findings(cert, now=now, warn_days=14.0, instance="x")
    if kind is None:
        assert found == []
        return
    (f,) = found
    assert (f.kind, f.severity, f.instance, f.actual) == (
        kind,
        severity,
        "x",
        cert.not_after.isoformat(),
    )
    assert f.message == f"certificate of x:443 (CN=x) {word} {cert.not_after:%Y-%m-%d %H:%M} UTC"


def test_judge_instance_default_tls_warning_is_fourteen_days() -> None:
    from datetime import UTC, datetime, timedelta

    from artifactcheck.model.values import CertInfo

    now = datetime(2026, 1, 1, tzinfo=UTC)
    cert = CertInfo("x:443", "CN=x", "CN=ca", now + timedelta(days=14, hours=12))
    o = obs("i1", "1.0", serving(CLEAN), tls=cert)
    assert judge_instance(o, expectation=E1, index=INDEX, now=now).findings == ()
    (drift,) = compare_fleet([o], expectations={"1.0": E1}, now=now, desired_version="2.0")
    assert K.TLS_EXPIRING not in {f.kind for f in drift.findings}


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            replace(fetched("assets/a.js", A1), error="truncated"), id="error-with-status"
        ),
        pytest.param(fetched("assets/a.js", A1, status=300), id="status-300"),
        pytest.param(fetched("assets/a.js", A1, status=304), id="status-304"),
    ],
)
def test_answers_that_say_nothing_about_content(answer: Fetched) -> None:
    if answer.status == 300 or answer.status == 304:
        answer = replace(answer, hashes={"sha256": A2})
    r = judge(with_(CLEAN, a=answer))
    assert r.verdict is Verdict.INCONCLUSIVE, r.reason


def test_status_299_with_a_body_is_content() -> None:
    r = judge(
        with_(CLEAN, a=replace(fetched("assets/a.js", A2), status=299, hashes={"sha256": A2}))
    )
    assert r.verdict is Verdict.MISMATCH


def test_many_files_are_summarised() -> None:
    files = {f"assets/{n}.js": A1 for n in range(7)}
    exp = Expectation("1.0", release("1.0", {p: A2 for p in files}))
    r = judge(serving(files), expectation=exp)
    assert r.reason.endswith(
        "assets/0.js, assets/1.js, assets/2.js, assets/3.js, assets/4.js and 2 more"
    )
    five = {f"assets/{n}.js": A1 for n in range(5)}
    r5 = judge(serving(five), expectation=Expectation("1.0", release("1.0", {p: A2 for p in five})))
    assert r5.reason.endswith("assets/4.js")


def test_integrity_findings_carry_their_evidence() -> None:
    served = Manifest(
        "webpack-assets",
        {
            "assets/0.js": ManifestEntry("assets/0.js"),
            "assets/a.js": ManifestEntry("assets/a.js", hashes={"sha256": A1}),
        },
    )
    o = obs(
        "i1",
        "1.0",
        {"assets/0.js": fetched("assets/0.js", B1), "assets/a.js": fetched("assets/a.js", A2)},
        manifest=served,
    )
    r = judge_instance(o, expectation=None, index=HashIndex({}))
    (f,) = [f for f in r.findings if f.kind is K.INTEGRITY_FAILED]
    assert (f.instance, f.path, f.expected, f.actual) == ("i1", "assets/a.js", f"sha256:{A1}", A2)


def test_fingerprint_tells_answers_apart() -> None:
    a = judge(serving(CLEAN)).fingerprint
    assert a is not None and len(a) == 12
    assert judge(serving(CLEAN)).fingerprint == a
    assert judge(with_(CLEAN, a=fetched("assets/a.js", status=404))).fingerprint != a
    assert judge(with_(CLEAN, a=fetched("assets/a.js", status=410))).fingerprint not in (
        a,
        judge(with_(CLEAN, a=fetched("assets/a.js", status=404))).fingerprint,
    )


def test_signal_conflict_message() -> None:
    r = judge(serving(CLEAN), endpoint_version="0.9")
    assert r.reason == "version signals disagree: target says 1.0, endpoint says 0.9"
    (f,) = [f for f in r.findings if f.kind is K.SIGNAL_CONFLICT]
    assert f.severity is Severity.ERROR


def test_fallback_to_the_release_index_without_fetching_it() -> None:
    r = judge({"assets/a.js": fetched("assets/a.js", IDX1)}, sampled=True)
    assert K.FALLBACK_PAGE in {f.kind for f in r.findings}
    assert r.coverage is not None and r.coverage.compared == 1


def test_missing_message_says_where_the_file_belongs() -> None:
    r = judge(with_(CLEAN, a=fetched("assets/a.js", status=404)))
    (f,) = [f for f in r.findings if f.kind is K.FILE_MISSING]
    assert f.message == "assets/a.js is in release 1.0 but the instance answers 404"


def test_another_release_is_named_by_its_extra_files_too() -> None:
    r2b = release("2.0", {**OLD, "assets/c.js": X9})
    r = judge(
        {**serving(OLD), "assets/c.js": fetched("assets/c.js", X9)},
        index=HashIndex({"1.0": R1, "2.0": r2b}),
    )
    assert r.serves_version == "2.0"
    other = judge(
        {**serving(MIX), "assets/c.js": fetched("assets/c.js", X9)},
        index=HashIndex({"1.0": R1, "2.0": r2b}),
    )
    assert "serves a mix: 2 file(s) are release 2.0's" in other.reason


def test_off_host_not_compared_finding() -> None:
    r = judge(serving(CLEAN), unsafe_paths=("http://a/x.js", "http://b/y.js"))
    (f,) = [f for f in r.findings if f.kind is K.NOT_COMPARED]
    assert (f.path, f.severity) == ("http://a/x.js", Severity.WARNING)
    assert f.message.startswith("2 file(s) the served manifest references on another host")
