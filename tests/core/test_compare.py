"""Table-driven tests of the pure comparison rules."""

from __future__ import annotations

import pytest

from artifactcheck.compare import (
    CdnView,
    HashIndex,
    compare_fleet,
    consensus_findings,
    judge_instance,
)
from artifactcheck.models import (
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

A1, A2, B1, B2, IDX1, IDX2 = ("a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64, "f" * 64)


def release(version: str, files: dict[str, str]) -> Manifest:
    return Manifest(
        format="native",
        version=version,
        files={
            p: ManifestEntry(path=p, hashes={"sha256": h}, size=10, entry=p == "index.html")
            for p, h in files.items()
        },
    )


R1 = release("1.0", {"index.html": IDX1, "assets/a.js": A1, "assets/b.css": B1})
R2 = release("2.0", {"index.html": IDX2, "assets/a.js": A2, "assets/b.css": B2})


def fetched(
    path: str, sha: str | None = None, status: int = 200, error: str | None = None
) -> Fetched:
    return Fetched(
        url=f"http://127.0.0.2/{path}",
        path=path,
        status=None if error else status,
        hashes={"sha256": sha} if sha and status == 200 and not error else {},
        size=10,
        error=error,
        error_kind="timeout" if error else None,
    )


def obs(name: str, version: str | None, assets: dict[str, Fetched], **kw: object) -> Observation:
    signals = (VersionSignal("target", version),) if version else ()
    inst = Instance(
        name=name, base_url=f"http://{name}/", signals=signals, image_id=kw.pop("image_id", None)
    )  # type: ignore[arg-type]
    return Observation(instance=inst, manifest_path="artifactcheck.json", assets=assets, **kw)  # type: ignore[arg-type]


def serving(files: dict[str, str]) -> dict[str, Fetched]:
    return {p: fetched(p, h) for p, h in files.items()}


CLEAN = {"index.html": IDX1, "assets/a.js": A1, "assets/b.css": B1}
OLD = {
    "index.html": IDX1,
    "assets/a.js": A2,
    "assets/b.css": B2,
}  # release 2 bytes, release 1 names


@pytest.mark.parametrize(
    ("assets", "expectation", "cdn", "desired", "verdict", "kinds"),
    [
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1),
            None,
            None,
            Verdict.CONSISTENT,
            set(),
            id="clean",
        ),
        pytest.param(
            serving(OLD),
            Expectation("1.0", R1),
            None,
            None,
            Verdict.MISMATCH,
            {FindingKind.CONTENT_DIFFERS, FindingKind.SERVES_OTHER_RELEASE},
            id="serves-other-release",
        ),
        pytest.param(
            {**serving(CLEAN), "assets/a.js": fetched("assets/a.js", status=404)},
            Expectation("1.0", R1),
            None,
            None,
            Verdict.MISMATCH,
            {FindingKind.FILE_MISSING},
            id="file-404",
        ),
        pytest.param(
            {**serving(CLEAN), "assets/x.js": fetched("assets/x.js", A1)},
            Expectation("1.0", R1),
            None,
            None,
            Verdict.MISMATCH,
            {FindingKind.FILE_UNEXPECTED},
            id="unexpected-file",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", None, error="source down"),
            None,
            None,
            Verdict.INCONCLUSIVE,
            {FindingKind.EXPECTATION_UNAVAILABLE},
            id="no-expectation-inconclusive",
        ),
        pytest.param(
            serving(OLD),
            Expectation("1.0", None, error="source down"),
            None,
            None,
            Verdict.INCONCLUSIVE,
            {FindingKind.EXPECTATION_UNAVAILABLE},
            id="no-expectation-never-mismatch",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1, stale=True, error="down"),
            None,
            None,
            Verdict.CONSISTENT,
            {FindingKind.EXPECTATION_STALE},
            id="stale-copy-still-judges",
        ),
        pytest.param(
            {**serving(CLEAN), "assets/b.css": fetched("assets/b.css", error="read timeout")},
            Expectation("1.0", R1),
            None,
            None,
            Verdict.INCONCLUSIVE,
            {FindingKind.OBSERVATION_FAILED},
            id="asset-timeout-inconclusive",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1),
            None,
            "2.0",
            Verdict.DRIFT,
            {FindingKind.DRIFT},
            id="drift",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1),
            CdnView(
                "http://cdn/",
                {
                    "index.html": fetched("index.html", IDX1),
                    "assets/a.js": fetched("assets/a.js", status=403),
                    "assets/b.css": fetched("assets/b.css", B1),
                },
            ),
            None,
            Verdict.CDN_MISSING,
            {FindingKind.CDN_MISSING},
            id="cdn-403",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1),
            CdnView(
                "http://cdn/",
                {
                    "index.html": fetched("index.html", IDX1),
                    "assets/a.js": fetched("assets/a.js", A2),
                    "assets/b.css": fetched("assets/b.css", B1),
                },
            ),
            None,
            Verdict.CDN_MISMATCH,
            {FindingKind.CDN_DIFFERS},
            id="cdn-differs",
        ),
        pytest.param(
            serving(CLEAN),
            Expectation("1.0", R1),
            CdnView("http://cdn/", {}, error="CDN unreachable"),
            None,
            Verdict.INCONCLUSIVE,
            {FindingKind.OBSERVATION_FAILED},
            id="cdn-down-inconclusive",
        ),
        pytest.param(
            serving(OLD),
            Expectation("1.0", R1),
            CdnView("http://cdn/", {}, error="CDN unreachable"),
            None,
            Verdict.MISMATCH,
            {FindingKind.CONTENT_DIFFERS},
            id="cdn-down-mismatch-still-seen",
        ),
    ],
)
def test_judge_instance(assets, expectation, cdn, desired, verdict, kinds) -> None:
    o = obs("i1", "1.0", assets)
    index = HashIndex({"1.0": R1, "2.0": R2})
    result = judge_instance(
        o, expectation=expectation, index=index, cdn=cdn, desired_version=desired
    )
    assert result.verdict is verdict, result.reason
    assert kinds <= {f.kind for f in result.findings}


def test_serves_other_release_is_named() -> None:
    result = judge_instance(
        obs("i1", "1.0", serving(OLD)),
        expectation=Expectation("1.0", R1),
        index=HashIndex({"1.0": R1, "2.0": R2}),
    )
    assert result.serves_version == "2.0"
    assert "reports 1.0 but serves 2.0" in result.reason
    assert "assets/a.js" in result.reason and "assets/b.css" in result.reason


def test_other_release_unknown_is_not_named() -> None:
    result = judge_instance(
        obs("i1", "1.0", serving(OLD)),
        expectation=Expectation("1.0", R1),
        index=HashIndex({"1.0": R1}),
    )
    assert result.verdict is Verdict.MISMATCH
    assert result.serves_version is None


def test_unreachable_instance() -> None:
    o = Observation(
        instance=Instance(name="x", base_url="http://x/"),
        manifest_path="",
        error="connection refused",
        error_kind="connect",
    )
    r = judge_instance(o, expectation=None, index=HashIndex({}))
    assert r.verdict is Verdict.UNREACHABLE


def test_signal_conflict() -> None:
    o = obs("i1", "1.0", serving(CLEAN), endpoint_version="0.9")
    inst = o.instance
    r = judge_instance(o, expectation=Expectation("1.0", R1), index=HashIndex({"1.0": R1}))
    assert inst.reported_version == "1.0"
    assert r.verdict is Verdict.SIGNAL_CONFLICT
    assert "0.9" in r.reason


def test_consensus_minority_is_suspect() -> None:
    fleet = [obs(f"i{n}", "1.0", serving(CLEAN)) for n in range(4)] + [
        obs("odd", "1.0", serving(OLD))
    ]
    results = {r.instance.name: r for r in compare_fleet(fleet, expectations=None)}
    assert results["odd"].verdict is Verdict.MISMATCH
    assert {f.kind for f in results["odd"].findings} >= {FindingKind.MINORITY_CONTENT}
    assert all(results[f"i{n}"].verdict is Verdict.CONSISTENT for n in range(4))


def test_consensus_tie_is_inconclusive() -> None:
    fleet = [obs("a", "1.0", serving(CLEAN)), obs("b", "1.0", serving(OLD))]
    results = compare_fleet(fleet, expectations=None)
    assert {r.verdict for r in results} == {Verdict.INCONCLUSIVE}
    assert consensus_findings(fleet)


def test_image_divergence_is_a_finding() -> None:
    fleet = [obs(f"i{n}", "1.0", serving(CLEAN), image_id="sha256:aaa") for n in range(3)]
    fleet.append(obs("odd", "1.0", serving(CLEAN), image_id="sha256:bbb"))
    results = {
        r.instance.name: r
        for r in compare_fleet(fleet, expectations={"1.0": Expectation("1.0", R1)})
    }
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
