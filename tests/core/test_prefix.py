"""The pure rules of layouts: where a release's files are served, and what a verdict
may say when they are not where they were looked for.

Each test is one rule of :mod:`artifactcheck.judge.prefix` or of the layout and
"serves release X" rules of :mod:`artifactcheck.judge.compare`.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.cli.options import spec_from_options
from artifactcheck.judge import prefix
from artifactcheck.judge.compare import CdnView, HashIndex, judge_instance
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import replace
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import (
    Expectation,
    Fetched,
    FindingKind,
    Instance,
    InstanceResult,
    Layout,
    Manifest,
    ManifestEntry,
    Observation,
    Verdict,
    VersionSignal,
)

K = FindingKind
A1, A2, B1, B2, C2, I1, I2, LOGIN = (c * 64 for c in "abcdefgh")


def release(version: str, files: dict[str, str]) -> Manifest:
    return Manifest(
        format="native",
        version=version,
        files={p: ManifestEntry(path=p, hashes={"sha256": h}, size=10) for p, h in files.items()},
    )


DJANGO = release("1.0.0", {"admin/css/base.css": A1, "app/app.3f2a.js": B1, "app/x.css": I1})


def got(path: str, sha: str | None = None, status: int = 200, html: bool = False) -> Fetched:
    return Fetched(
        url=f"http://i1/{path}",
        path=path,
        status=status,
        hashes={"sha256": sha} if sha and status == 200 else {},
        size=10,
        headers={"content-type": "text/html"} if html else {},
    )


def judge(
    assets: dict[str, Fetched],
    exp: Manifest = DJANGO,
    *,
    index: HashIndex | None = None,
    cdn: CdnView | None = None,
    **kw: Any,
) -> InstanceResult:
    inst = Instance(name="i1", base_url="http://i1/", signals=(VersionSignal("target", "1.0.0"),))
    kw.setdefault("manifest_path", "")
    observation = Observation(instance=inst, assets=assets, **kw)
    return judge_instance(
        observation,
        expectation=Expectation("1.0.0", exp),
        index=index or HashIndex({"1.0.0": exp}),
        cdn=cdn,
    )


LOGIN_PAGE = {p: got(p, LOGIN, html=True) for p in DJANGO.files}  # a redirect to /login/


# -- settings and flags ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [("/static/", "static/"), ("static", "static/"), ("/", ""), ("", ""), ("/a//b/", "a/b/")],
)
def test_a_prefix_is_stored_as_a_relative_directory(given: str, stored: str) -> None:
    assert load_spec({"prefix": given}).prefix == stored


def test_no_prefix_means_detected() -> None:
    assert load_spec({}).prefix is None


@pytest.mark.parametrize("bad", ["../x", "/static/../..", "http://cdn/static/", "//cdn/x", "a?b"])
def test_a_prefix_outside_the_instance_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="prefix"):
        load_spec({"prefix": bad})


def test_version_endpoint_takes_the_command_lines_spelling_in_yaml() -> None:
    spec = load_spec({"version_endpoint": "/api/version#/version"})
    assert spec.version_endpoint is not None
    assert (spec.version_endpoint.path, spec.version_endpoint.pointer) == (
        "/api/version",
        "/version",
    )
    as_dict = load_spec({"version_endpoint": {"path": "/api/version", "pointer": "/version"}})
    assert as_dict.version_endpoint == spec.version_endpoint
    bare = load_spec({"versionEndpoint": "/v"}).version_endpoint
    assert bare is not None and (bare.path, bare.pointer) == ("/v", "")
    with pytest.raises(ConfigError, match="JSON pointer"):
        load_spec({"version_endpoint": "/v#version"})


def _opts(**given: Any) -> dict[str, Any]:
    """Every shared flag unset, as click passes them, then ``given``."""
    from artifactcheck.cli.main import verify

    opts: dict[str, Any] = {}
    for param in verify.params:
        assert param.name is not None
        opts[param.name] = () if getattr(param, "multiple", False) else None
    opts.update(given)
    return opts


def test_cdn_globs_and_prefix_from_the_command_line() -> None:
    spec = spec_from_options(
        _opts(
            targets=("http://127.0.0.1:1/=1.0.0",),
            cdn="http://127.0.0.2:1/",
            cdn_include=("_next/static/*",),
            cdn_exclude=("*.map",),
            prefix="/static/",
        ),
        preflight=False,
    )
    assert spec.cdn_include == ["_next/static/*"]
    # added to the default: HTML pages stay off the CDN check
    assert spec.cdn_exclude == ["*.html", "*.htm", "*.map"]
    assert spec.prefix == "static/"


def test_a_bad_prefix_flag_is_named() -> None:
    with pytest.raises(ConfigError, match="--prefix"):
        spec_from_options(_opts(targets=("http://127.0.0.1:1/=1",), prefix="../up"))


def test_cdn_exclude_flag_adds_to_the_files_list(tmp_path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("cdn_exclude: ['*.txt']\n")
    spec = spec_from_options(
        _opts(config=str(config), cdn_exclude=("*.map",)),
        preflight=False,
    )
    assert spec.cdn_exclude == ["*.txt", "*.map"]


def test_help_says_names_only_never_exits_0_and_how_the_endpoint_resolves() -> None:
    text = " ".join(CliRunner().invoke(main, ["verify", "--help"]).output.split())
    assert "never exits 0" in text
    assert "resolved against the target URL, never against --prefix" in text
    for flag in ("--prefix PATH", "--cdn-include GLOB", "--cdn-exclude GLOB"):
        assert flag in text


# -- pure prefix rules ------------------------------------------------------------------


def test_the_served_listing_names_the_prefix() -> None:
    listed = ["static/admin/css/base.css", "static/app/app.3f2a.js", "static/staticfiles.json"]
    assert prefix.prefix_from_listing(listed, DJANGO.files) == "static/"
    # listed where the release has them: no prefix between them
    assert prefix.prefix_from_listing(list(DJANGO.files), DJANGO.files) is None
    # most entries unrelated: no evidence
    assert (
        prefix.prefix_from_listing(["x/1.js", "y/2.js", "static/app/x.css"], DJANGO.files) is None
    )


def test_candidates_put_evidence_first_and_end_at_the_target() -> None:
    assert prefix.candidates("", "static/", None, "api/") == ["static/", "api/", "assets/"]
    assert prefix.candidates("assets/") == ["static/", ""]
    assert prefix.candidates("static/", "static/") == ["assets/", ""]


def test_probes_skip_pages_and_dot_paths_and_spread() -> None:
    manifest = release(
        "1",
        {"index.html": I1, ".vite/manifest.json": A1, **{f"f{i:02}.js": A1 for i in range(9)}},
    )
    assert prefix.probe_paths(manifest) == ["f00.js", "f03.js", "f06.js"]


@pytest.mark.parametrize("path", ["docs/", "", "app/index.html", "about.HTM"])
def test_html_at_a_page_or_directory_is_no_fallback(path: str) -> None:
    """The judge and the investigation table read "the fallback page" by this one rule:
    HTML answered for a page (or a directory, which serves its index) is that page."""
    pages = frozenset({I1})
    assert not prefix.is_fallback(got(path, I1, html=True), path, pages)
    assert prefix.is_fallback(got("app/x.js", I1, html=True), "app/x.js", pages)


def test_most_probes_must_be_found() -> None:
    ok = [("a.js", got("a.js", A1)), ("b.js", got("b.js", B1))]
    fallback = ("c.js", got("c.js", LOGIN, html=True))
    assert prefix.confirmed(ok, frozenset())
    assert prefix.confirmed([*ok, fallback], frozenset())
    assert not prefix.confirmed([ok[0], fallback, ("d.js", got("d.js", status=404))], frozenset())
    assert not prefix.confirmed([], frozenset())


def test_nothing_found_needs_an_absent_file() -> None:
    assert prefix.nothing_found(LOGIN_PAGE, DJANGO)
    assert not prefix.nothing_found({**LOGIN_PAGE, "app/x.css": got("app/x.css", C2)}, DJANGO)
    timeouts = {
        p: Fetched(url="", path=p, error="timeout", error_kind="timeout") for p in DJANGO.files
    }
    assert not prefix.nothing_found(timeouts, DJANGO)


def test_an_endpoint_directory_is_a_prefix() -> None:
    assert prefix.directory_of("/static/version") == "static/"
    assert prefix.directory_of("/version") is None


# -- verdicts ---------------------------------------------------------------------------


def test_nothing_of_the_release_at_the_target_is_inconclusive_naming_the_prefix() -> None:
    r = judge(LOGIN_PAGE, layout=Layout(prefix="", found_at="static/"))
    assert r.verdict is Verdict.INCONCLUSIVE
    assert "give --prefix /static/" in r.reason
    kinds = [f.kind for f in r.findings]
    # one finding for the layout, and the first absent file only (the gate's evidence)
    assert kinds.count(K.LAYOUT) == 1 and kinds.count(K.FALLBACK_PAGE) == 1
    assert not r.content_verified


def test_found_nowhere_names_what_was_tried() -> None:
    r = judge(LOGIN_PAGE, layout=Layout(prefix="", tried=("static/", "assets/")))
    assert r.verdict is Verdict.INCONCLUSIVE
    assert "nor under /static/, /assets/" in r.reason and "--prefix PATH" in r.reason


def test_a_wrong_configured_prefix_is_never_a_mismatch() -> None:
    r = judge(
        {p: got(p, status=404) for p in DJANGO.files},
        layout=Layout(prefix="assets/", found_at="static/"),
    )
    assert r.verdict is Verdict.INCONCLUSIVE
    assert r.reason.startswith("no file of release 1.0.0 is served under /assets/")
    assert r.reason.endswith("give --prefix /static/")


def test_the_listing_of_a_manifest_found_under_a_prefix_names_it() -> None:
    """``--prefix /`` on Django: the manifest at static/staticfiles.json lists static/…,
    all served; the release's own paths fall back. The listing says where they are."""
    served = {
        f"static/{p}": got(f"static/{p}", h.hashes["sha256"]) for p, h in DJANGO.files.items()
    }
    r = judge({**LOGIN_PAGE, **served})
    assert r.verdict is Verdict.INCONCLUSIVE, r.reason
    assert "give --prefix /static/" in r.reason


def test_another_build_served_right_there_is_still_a_mismatch() -> None:
    other = {
        "js/main.9f.js": got("js/main.9f.js", C2),
        "js/vendor.1b.js": got("js/vendor.1b.js", A2),
    }
    r = judge({**{p: got(p, status=404) for p in DJANGO.files}, **other})
    assert r.verdict is Verdict.MISMATCH, r.reason


def test_one_absent_file_is_evidence_about_that_file() -> None:
    r = judge({"app/x.css": got("app/x.css", LOGIN, html=True)}, sampled=True)
    assert r.verdict is Verdict.MISMATCH
    assert K.FALLBACK_PAGE in {f.kind for f in r.findings}


def test_a_detected_prefix_is_said() -> None:
    clean = {p: got(p, e.hashes["sha256"]) for p, e in DJANGO.files.items()}
    r = judge(clean, layout=Layout(prefix="static/", detected=True))
    assert r.verdict is Verdict.CONSISTENT
    assert r.reason == "serves release 1.0.0 (under /static/, detected)"
    said = [f for f in r.findings if f.kind is K.LAYOUT]
    assert (
        said
        and "served under /static/" in said[0].message
        and "--prefix /static/" in (said[0].message)
    )
    assert not [f for f in judge(clean).findings if f.kind is K.LAYOUT]


# -- "serves release X" only on a complete comparison -------------------------------------

R1 = release("1.0.0", {"index.html": I1, "a.js": A1, "b.js": B1})
R2 = release("2.0.0", {"index.html": I2, "a.js": A2, "b.js": B2, "c.js": C2})
BOTH = HashIndex({"1.0.0": R1, "2.0.0": R2})


def test_all_of_another_release_compared_serves_it() -> None:
    served = {p: got(p, e.hashes["sha256"]) for p, e in R2.files.items()}
    r = judge(served, R1, index=BOTH)
    assert r.verdict is Verdict.MISMATCH and r.serves_version == "2.0.0"


def test_another_release_not_all_compared_is_never_served() -> None:
    """No served manifest: 2.0.0's c.js was never fetched, so 2.0.0 is named, not claimed."""
    served = {p: got(p, R2.files[p].hashes["sha256"]) for p in R1.files}
    r = judge(served, R1, index=BOTH)
    assert r.verdict is Verdict.MISMATCH
    assert r.serves_version is None
    assert "serves release 2.0.0" not in r.reason and "serves 2.0.0" not in r.reason
    assert "release 2.0.0's" in r.reason and "1 were not compared: c.js" in r.reason
    assert K.SERVES_OTHER_RELEASE not in {f.kind for f in r.findings}


def test_another_release_with_a_file_falling_back_names_what_fell_back() -> None:
    served = {p: got(p, e.hashes["sha256"]) for p, e in R2.files.items()}
    served["b.js"] = got("b.js", I2, html=True)  # try_files $uri /index.html
    served["index.html"] = got("index.html", I2, html=True)
    r = judge(served, R1, index=BOTH)
    assert r.verdict is Verdict.MISMATCH
    assert r.serves_version is None
    assert "fall back or are missing: b.js" in r.reason, r.reason
    assert "mix" not in r.reason


def test_a_hostile_served_manifest_is_evidence_where_nothing_is_found() -> None:
    """An unusable served manifest says something is served right there: mismatch, and
    each absent file is still listed."""
    absent = {p: got(p, status=404) for p in DJANGO.files}
    r = judge(
        absent,
        manifest_path="artifactcheck.json",
        manifest_fetch=got("artifactcheck.json", C2),
        manifest_error="over the 100-entry cap",
    )
    assert r.verdict is Verdict.MISMATCH, r.reason
    kinds = [f.kind for f in r.findings]
    assert K.MANIFEST_INVALID in kinds and kinds.count(K.FILE_MISSING) == len(DJANGO.files)


def test_other_evidence_outranks_the_wrong_place() -> None:
    """A served manifest pointing outside the instance is evidence, misplaced or not."""
    served = Manifest(format="native", files={}, rejected=(("../../etc/passwd", "traversal"),))
    r = judge(
        LOGIN_PAGE,
        manifest_path="artifactcheck.json",
        manifest=served,
        unsafe_paths=("../../etc/passwd",),
        layout=Layout(found_at="static/"),
    )
    assert r.verdict is Verdict.MISMATCH, r.reason
    assert K.UNSAFE_REFERENCE in {f.kind for f in r.findings}


def test_the_cdn_is_not_judged_for_a_misplaced_instance() -> None:
    """``--prefix /`` on Django: what the CDN holds for static/static/... says nothing."""
    served = {
        f"static/{p}": got(f"static/{p}", e.hashes["sha256"]) for p, e in DJANGO.files.items()
    }
    cdn = CdnView(
        base_url="http://cdn/static/",
        assets={p: got(p, status=404) for p in served},
    )
    r = judge({**LOGIN_PAGE, **served}, cdn=cdn)
    assert r.verdict is Verdict.INCONCLUSIVE
    assert not {K.CDN_MISSING, K.CDN_DIFFERS} & {f.kind for f in r.findings}


def test_a_served_manifest_listing_only_its_own_directory_names_the_prefix() -> None:
    django = release("x", {"static/app/app.js": A1, "static/staticfiles.json": B1})
    assert prefix.manifest_directory("static/staticfiles.json", django) == "static/"
    vite = release("x", {"assets/index-1a.js": A1})  # .vite/manifest.json lists its parent's
    assert prefix.manifest_directory(".vite/manifest.json", vite) is None
    assert prefix.manifest_directory("artifactcheck.json", django) is None
    assert prefix.manifest_directory("static/staticfiles.json", None) is None


def test_a_misplaced_pod_never_fails_its_gate_open() -> None:
    """A new pod whose release files are found nowhere (a volume not mounted, a wrong
    prefix) is inconclusive, and keeps one absent file as evidence: with
    ``gate_fail_open`` the gate stays closed, as it does for a mismatch; a pod that is
    inconclusive for want of a dependency (its files timed out) is failed open."""
    from artifactcheck.judge.decide import History, decide
    from artifactcheck.model.settings import PolicySettings
    from artifactcheck.model.values import ActionKind

    def gate(assets: dict[str, Fetched]) -> set[ActionKind]:
        inst = Instance(
            name="i1",
            base_url="http://i1/",
            signals=(VersionSignal("target", "1.0.0"),),
            has_readiness_gate=True,
        )
        result = judge_instance(
            Observation(instance=inst, manifest_path="", assets=assets),
            expectation=Expectation("1.0.0", DJANGO),
            index=HashIndex({"1.0.0": DJANGO}),
        )
        assert result.verdict is Verdict.INCONCLUSIVE, result.reason
        decision = decide(
            [result], policy=PolicySettings(), history=History(), now=0.0, gate_mode=True
        )
        return {a.kind for a in decision.actions if a.target == "i1"}

    misplaced = gate({p: got(p, status=404) for p in DJANGO.files})
    assert ActionKind.RELEASE not in misplaced
    timeouts = {
        p: Fetched(url="", path=p, error="timeout", error_kind="timeout") for p in DJANGO.files
    }
    assert ActionKind.RELEASE in gate(timeouts)  # the contrast: the rule is not vacuous


def test_a_releases_entry_pages_are_worked_out_once_and_joined_with_the_served_ones() -> None:
    """``page_hashes`` of a release: its ``index.html`` anywhere, kept on the manifest
    (every sibling judged against it asks); the instance's own pages join them."""
    rel = release("1.0.0", {"index.html": I1, "app/index.html": I2, "a.js": A1})
    assert rel.page_hashes == {I1, I2}
    assert rel.page_hashes is rel.page_hashes  # kept, not walked again
    served = {"index.html": got("index.html", LOGIN), "b.js": got("b.js", B2)}
    assert prefix.page_hashes(served, rel) == {I1, I2, LOGIN}
    assert prefix.page_hashes(served, None) == {LOGIN}
    assert prefix.page_hashes({}, rel) == {I1, I2}
    # a manifest made from another works its own out; the memo is never compared
    other = replace(rel, files={"index.html": ManifestEntry("index.html", {"sha256": B1})})
    assert other.page_hashes == {B1}
    assert replace(other) == other
