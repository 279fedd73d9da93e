"""What ``verify`` fetches from each instance and the CDN, against real loopback servers.

Every file of the expected release is fetched as well as what the served manifest
references; a probe's 403 means "not here"; the CDN is asked only for what it should
hold; references by the CDN's own URL are checked on the CDN; sampling varies between
runs and says so; an unexpected exception is one instance's inconclusive.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from artifactcheck.manifests import native
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import FindingKind, Verdict
from artifactcheck.pipeline import run_check
from artifactcheck_sim.web import Site, Status

WEBPACK = Path(__file__).parents[1] / "fixtures" / "builds"


def check(spec: dict):
    return asyncio.run(run_check(load_spec(spec)))


def by_name(report):
    return {r.instance.name: r for r in report.results}


def test_a_release_file_the_served_manifest_does_not_reference_is_compared(make_fleet) -> None:
    """robots.txt is in the release but not in Vite's manifest: changed, it is caught."""
    fleet = make_fleet(2, version="1.4.1")
    fleet.instances[1].site.overrides["robots.txt"] = b"User-agent: *\nDisallow: /\n"
    report = check(fleet.spec(cdn=None))
    results = by_name(report)
    clean, changed = results["web-1"], results["web-2"]
    assert "robots.txt" in clean.observation.assets
    assert clean.verdict is Verdict.CONSISTENT, clean.reason
    assert changed.verdict is Verdict.MISMATCH, changed.reason
    differs = {f.path for f in changed.findings if f.kind is FindingKind.CONTENT_DIFFERS}
    assert differs == {"robots.txt"}
    assert report.exit_code == 1


def test_a_served_manifest_answering_404_is_recorded_and_the_release_still_fetched(
    make_fleet,
) -> None:
    fleet = make_fleet(2, version="1.4.2")
    drifted = fleet.drift(1, serves="1.4.1")
    for inst in fleet.instances:
        inst.site.overrides[".vite/manifest.json"] = Status(404)
    release = json.loads(Path(fleet.release_template.format(version="1.4.2")).read_text())
    # configured path: the 404 is the served manifest's absence, not a fallback
    report = check(fleet.spec(cdn=None, manifest_path=".vite/manifest.json"))
    results = by_name(report)
    for r in results.values():
        obs = r.observation
        assert obs.manifest is None and obs.manifest_fetch is not None
        assert obs.manifest_fetch.status == 404
        assert obs.manifest_error and "404" in obs.manifest_error
        assert set(release["files"]) - {".vite/manifest.json"} <= set(obs.assets)
    assert results["web-2"].verdict is Verdict.MISMATCH
    assert set(drifted) <= {f.path for f in results["web-2"].findings if f.path}
    # probed well-known names: every one answers "not here", which is said
    report = check(fleet.spec(cdn=None))
    for r in report.results:
        obs = r.observation
        assert obs.manifest is None
        assert obs.manifest_error and "no served manifest" in obs.manifest_error
        assert ".vite/manifest.json" in obs.manifest_error
        assert obs.manifest_error.endswith("answer HTTP 404")  # one line, by status
        assert set(release["files"]) <= set(obs.assets)
    assert by_name(report)["web-2"].verdict is Verdict.MISMATCH


def test_a_403_probe_is_not_here_and_the_next_name_is_tried(make_fleet, web) -> None:
    """nginx ``location ~ /\\. { deny all; }`` and S3 answer 403: try the other names."""
    fleet = make_fleet(2, version="1.4.2")
    drifted = fleet.drift(1, serves="1.4.1")
    for inst in fleet.instances:
        inst.site.overrides["artifactcheck.json"] = Status(403)
    report = check(fleet.spec(cdn=None))
    results = by_name(report)
    assert results["web-1"].observation.manifest_path == ".vite/manifest.json"
    assert results["web-1"].observation.manifest is not None
    assert results["web-1"].verdict is Verdict.CONSISTENT, results["web-1"].reason
    assert results["web-2"].verdict is Verdict.MISMATCH
    # every name denied (the dot-path rule of nginx, S3's 403 for missing keys): the
    # instance answered, so it is judged on the release's files, never "unreachable"
    denied = {name: Status(403) for name in ("artifactcheck.json", ".vite/manifest.json")}
    for inst in fleet.instances:
        inst.site.overrides.update(denied)
    report = check(fleet.spec(cdn=None))
    results = by_name(report)
    for r in results.values():
        assert r.verdict is not Verdict.UNREACHABLE, r.reason
        assert "answer HTTP 403" in (r.observation.manifest_error or "")
    assert results["web-2"].verdict is Verdict.MISMATCH, results["web-2"].reason
    assert set(drifted) <= {f.path for f in results["web-2"].findings if f.path}
    assert report.exit_code == 1


def test_a_connection_failing_after_answers_is_not_unreachable(make_fleet, web) -> None:
    """The version endpoint answered, then the manifest probe's connection dies."""
    from artifactcheck_sim.web import Reset

    fleet = make_fleet(1, version="1.4.1")
    url = web.add(
        Site(
            root=fleet.releases["1.4.1"],
            version="1.4.1",
            overrides={"artifactcheck.json": Reset()},
        ),
        "127.93.4.1",
    )
    spec = fleet.spec(
        targets=[{"url": url, "name": "flaky"}],
        cdn=None,
        version_endpoint={"path": "/version", "pointer": "/version"},
        retry={"attempts": 1},
    )
    r = by_name(check(spec))["flaky"]
    assert r.verdict is Verdict.INCONCLUSIVE, r.reason
    assert "after answering" in (r.observation.error or "")


def test_the_cdn_is_asked_only_for_what_it_should_hold(make_fleet, web) -> None:
    """HTML comes from the origin: a CDN without index.html is the usual setup."""
    fleet = make_fleet(2, version="1.4.1")
    fleet.cdn_missing("index.html")
    report = check(fleet.spec())
    assert {r.verdict for r in report.results} == {Verdict.CONSISTENT}, [
        r.reason for r in report.results
    ]
    assert "/index.html" not in web.server(fleet.cdn_url).paths
    assert "/assets/index-Bfu9pp8v.js" in web.server(fleet.cdn_url).paths
    # excluding nothing demands the HTML from the CDN too
    report = check(fleet.spec(cdn_exclude=[]))
    assert {r.verdict for r in report.results} == {Verdict.CDN_MISSING}
    # an include list narrows the check to what the CDN serves
    fleet.cdn_missing("robots.txt")
    web.server(fleet.cdn_url).reset_stats()
    report = check(fleet.spec(cdn_include=["assets/*"], cdn_exclude=[]))
    assert {r.verdict for r in report.results} == {Verdict.CONSISTENT}
    assert all(p.startswith("/assets/") for p in web.server(fleet.cdn_url).paths)


def _webpack_with_cdn_public_path(tmp_path: Path, cdn: str, release: str) -> Path:
    """A copy of the webpack fixture whose manifest names its files by CDN URL."""
    import shutil

    root = tmp_path / release
    shutil.copytree(WEBPACK / f"webpack-{release}", root)
    doc = json.loads((root / "asset-manifest.json").read_text())
    doc["files"] = {k: cdn + v.lstrip("/") for k, v in doc["files"].items()}
    doc["entrypoints"] = [cdn + e for e in doc["entrypoints"]]
    (root / "asset-manifest.json").write_text(json.dumps(doc))
    return root


def test_references_by_the_cdn_url_are_checked_on_the_cdn(tmp_path, web) -> None:
    """webpack ``publicPath: 'http://cdn.../app/'``: files live on the CDN, checked there."""
    cdn_site = Site(root=WEBPACK / "webpack-r1")
    cdn = web.add(cdn_site, "127.93.1.9")
    root = _webpack_with_cdn_public_path(tmp_path, cdn, "r1")
    release = tmp_path / "1.0.0.json"
    release.write_bytes(native.dump(native.build(root, version="1.0.0")))
    instance = web.add(Site(root=root), "127.93.1.1")
    spec = {
        "targets": [{"url": instance, "version": "1.0.0", "name": "web"}],
        "release": {"manifests": str(release)},
        "manifest_path": "asset-manifest.json",
        "cdn": cdn,
    }
    r = by_name(check(spec))["web"]
    assert r.verdict is Verdict.CONSISTENT, (r.reason, r.findings)
    main_js = "static/js/main.ca16dfb6.js"
    assert r.observation.assets[main_js].url.startswith(cdn)
    assert not r.observation.unsafe_paths
    assert f"/{main_js}" in web.server(cdn).paths
    # the CDN holding other bytes under those names: what browsers get is wrong
    r2 = WEBPACK / "webpack-r2"
    cdn_site.overrides[main_js] = (r2 / "static/js/main.53067783.js").read_bytes()
    r = by_name(check(spec))["web"]
    assert r.verdict in (Verdict.MISMATCH, Verdict.CDN_MISMATCH), r.reason
    assert main_js in {f.path for f in r.findings}
    # without that CDN given, the references are not fetched from there (no SSRF) and
    # never called "different"; the release's files are still fetched from the origin
    spec["cdn"] = None
    web.server(cdn).reset_stats()
    r = by_name(check(spec))["web"]
    assert r.verdict is Verdict.CONSISTENT, r.reason
    assert r.observation.assets[main_js].url.startswith(instance)
    assert any(cdn in raw for raw in r.observation.unsafe_paths)
    assert web.server(cdn).request_count == 0


def test_sampling_varies_between_runs_and_is_reproducible(make_fleet) -> None:
    fleet = make_fleet(6, version="1.4.1")
    spec = fleet.spec(cdn=None, sampling={"instances": 2, "assets_per_instance": 1})
    runs = [check(spec) for _ in range(6)]
    seeds = {r.sample.seed for r in runs}
    assert len(seeds) == 6, "every run draws its own seed"
    for report in runs:
        assert report.sample.instances_checked == 2 and report.sample.instances_total == 6
        assert report.sample.assets_per_instance == 1
    picked = {tuple(sorted(r.instance.name for r in report.results)) for report in runs}
    files = {tuple(sorted(r.observation.assets)) for report in runs for r in report.results}
    assert len(picked) > 1, "different instances are checked from run to run"
    assert len(files) > 1, "different files are sampled from run to run"
    # a seed replays a run exactly
    seed = runs[0].sample.seed
    again = check({**spec, "sampling": {**spec["sampling"], "seed": seed}})
    assert again.sample.seed == seed
    assert [r.instance.name for r in again.results] == [r.instance.name for r in runs[0].results]
    assert [sorted(r.observation.assets) for r in again.results] == [
        sorted(r.observation.assets) for r in runs[0].results
    ]


def test_a_failing_version_endpoint_says_why(make_fleet, web) -> None:
    fleet = make_fleet(1, version="1.4.1")
    missing = web.add(Site(root=fleet.releases["1.4.1"]), "127.93.5.1")  # no /version: 404
    wrong = web.add(
        Site(root=fleet.releases["1.4.1"], overrides={"version": b'{"release": "1.4.1"}'}),
        "127.93.5.2",
    )
    text = web.add(
        Site(root=fleet.releases["1.4.1"], overrides={"version": b"1.4.1\n"}), "127.93.5.3"
    )
    spec = fleet.spec(
        targets=[
            {"url": missing, "name": "missing"},
            {"url": wrong, "name": "wrong"},
            {"url": text, "name": "text"},
        ],
        cdn=None,
        version_endpoint={"path": "/version", "pointer": "/version"},
    )
    results = by_name(check(spec))
    assert results["missing"].observation.endpoint_error == (
        "version endpoint /version answers HTTP 404"
    )
    assert results["wrong"].observation.endpoint_error == (
        "version endpoint /version has no JSON member at pointer '/version'"
    )
    assert "is not JSON" in (results["text"].observation.endpoint_error or "")
    for r in results.values():
        assert r.observation.endpoint_version is None
        assert r.verdict is not Verdict.CONSISTENT
