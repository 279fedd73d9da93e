"""A served manifest's path answering the site's HTML page is no manifest there.

lighttpd's ``server.error-handler-404 = "/index.html"``, nginx's and Caddy's
``try_files`` answer a wrong ``--manifest-path`` with the entry page and 200. Read as
JSON it is "not valid JSON", and it once made every instance of a correct fleet a
``mismatch`` (exit 1): it is absent, as a 404 says, and the release's file list judges.
"""

from __future__ import annotations

from compare_support import CLEAN, E1, IDX1, R1, K, fetched, obs, serving

from artifactcheck.judge.compare import HashIndex, compare_fleet, judge_instance
from artifactcheck.model.records import replace
from artifactcheck.model.values import Observation, Verdict

INDEX = HashIndex({"1.0": R1})

WRONG = "wrong/manifest.json"


def _at_wrong_path(name: str, files: dict[str, str] | None = None) -> Observation:
    page = fetched(WRONG, IDX1, content_type="text/html")
    return obs(
        name,
        "1.0",
        serving(files) if files is not None else {},
        manifest_path=WRONG,
        manifest_fetch=page,
        manifest_error="not valid JSON: Expecting value: line 1 column 1 (char 0)",
    )


def test_with_a_release_the_files_still_judge_and_nothing_is_against_the_content() -> None:
    r = judge_instance(_at_wrong_path("i1", CLEAN), expectation=E1, index=INDEX)
    assert r.verdict is Verdict.CONSISTENT, r.reason
    assert K.MANIFEST_INVALID not in {f.kind for f in r.findings}
    (f,) = [f for f in r.findings if f.kind is K.MANIFEST_MISSING]
    assert f.message == (
        f"served manifest {WRONG} answers with index.html (the fallback page): judged by "
        "the release's file list"
    )


def test_without_a_release_it_is_inconclusive_naming_the_answer() -> None:
    for r in compare_fleet([_at_wrong_path("a"), _at_wrong_path("b")], expectations=None):
        assert r.verdict is Verdict.INCONCLUSIVE
        assert r.reason.startswith(
            f"nothing was fetched to judge by: {WRONG} answers with index.html (the fallback "
            "page); no release was given"
        ), r.reason
        (f,) = [f for f in r.findings if f.kind is K.MANIFEST_MISSING]
        assert "answers with index.html (the fallback page), and no release was given" in (
            f.message
        )


def test_a_json_body_that_is_no_manifest_is_still_unusable() -> None:
    """Only the HTML page is absence: other bytes that do not parse stay evidence."""
    junk = fetched(WRONG, "8" * 64, content_type="application/json")
    o = obs("i1", "1.0", serving(CLEAN), manifest_path=WRONG, manifest_fetch=junk)
    o = replace(o, manifest_error="not valid JSON")
    r = judge_instance(o, expectation=E1, index=INDEX)
    assert r.verdict is Verdict.MISMATCH
    assert K.MANIFEST_INVALID in {f.kind for f in r.findings}
