"""Every compared content coding judged on its own, whatever order the codings were given in.

A server with precompressed files answers one path with another file per
``Accept-Encoding``: a plain file replaced while its ``.gz`` was left as it was is
wrong in identity and right in gzip, and the reverse for a stale ``.gz``. A path is
right only when every coding asked for is; the verdict is the same for every order of
``--compare-encoding`` (release, siblings, CDN). The answers are kept as the observer
keeps them (:func:`kept_answer`); the fleet is judged by :func:`compare_fleet`.
"""

from __future__ import annotations

import itertools

import pytest
from compare_support import A1, A2, CLEAN, E1, R1, fetched, obs, serving
from hypothesis import given
from hypothesis import strategies as st

from artifactcheck.judge.codings import canonical_codings, coding_views, kept_answer
from artifactcheck.judge.compare import CdnView, compare_fleet
from artifactcheck.model.records import replace
from artifactcheck.model.values import Fetched, FindingKind, Observation, Verdict

PATH = "assets/a.js"
RIGHT, WRONG, GONE, FAILED = "right", "wrong", "404", "timeout"


def _answer(kind: str, coding: str) -> Fetched:
    """What the instance answered for PATH when asked for ``coding``."""
    if kind == GONE:
        got = fetched(PATH, status=404)
    elif kind == FAILED:
        got = fetched(PATH, error="read timed out")
    else:
        got = fetched(PATH, A1 if kind == RIGHT else A2)
    return replace(got, content_encoding=None if coding == "identity" else coding)


def _instance(name: str, kinds: dict[str, str], order: tuple[str, ...]) -> Observation:
    """An instance serving CLEAN but PATH as ``kinds`` says, per coding, observed with
    the codings asked for in ``order``."""
    assets = serving(CLEAN)
    assets[PATH] = kept_answer({c: _answer(kinds[c], c) for c in order})
    return obs(name, "1.0", assets, encodings=canonical_codings(order))


#: PATH's answer per coding -> the verdict against release 1.0 (A1 is right).
RELEASE_CASES = [
    ({"identity": RIGHT, "gzip": RIGHT}, Verdict.CONSISTENT),
    ({"identity": WRONG, "gzip": RIGHT}, Verdict.MISMATCH),  # plain replaced, .gz left
    ({"identity": RIGHT, "gzip": WRONG}, Verdict.MISMATCH),  # a stale .gz
    ({"identity": WRONG, "gzip": WRONG}, Verdict.MISMATCH),
    ({"identity": RIGHT, "gzip": GONE}, Verdict.MISMATCH),
    ({"identity": RIGHT, "gzip": FAILED}, Verdict.INCONCLUSIVE),
    ({"identity": RIGHT, "gzip": RIGHT, "br": WRONG}, Verdict.MISMATCH),
    ({"identity": WRONG, "gzip": RIGHT, "br": RIGHT}, Verdict.MISMATCH),
]


@pytest.mark.parametrize(("kinds", "verdict"), RELEASE_CASES)
def test_against_the_release_every_coding_counts_in_every_order(
    kinds: dict[str, str], verdict: Verdict
) -> None:
    for order in itertools.permutations(kinds):
        (result,) = compare_fleet([_instance("i1", kinds, order)], expectations={"1.0": E1})
        assert result.verdict is verdict, (order, result.reason)
        if verdict is Verdict.MISMATCH:
            assert [f.path for f in result.findings if f.kind is FindingKind.CONTENT_DIFFERS] in (
                [PATH],
                [],  # the 404 case: a missing file, not other bytes
            ), order


def test_the_coding_that_differs_is_named() -> None:
    """The finding says which coding's bytes are wrong: gzip's for a stale .gz, the
    plain file's (no coding named) for a replaced plain file."""
    for kinds, named in (
        ({"identity": RIGHT, "gzip": WRONG}, True),
        ({"identity": WRONG, "gzip": RIGHT}, False),
    ):
        for order in itertools.permutations(kinds):
            (result,) = compare_fleet([_instance("i1", kinds, order)], expectations={"1.0": E1})
            (differs,) = [f for f in result.findings if f.kind is FindingKind.CONTENT_DIFFERS]
            assert ("gzip-encoded" in differs.message) is named, (order, differs.message)


@pytest.mark.parametrize(
    "bad",
    [
        {"identity": WRONG, "gzip": RIGHT},
        {"identity": RIGHT, "gzip": WRONG},
    ],
)
def test_siblings_agree_only_when_they_agree_in_every_coding(bad: dict[str, str]) -> None:
    """No release: two siblings right in both codings and one wrong in one coding; the
    odd one is the minority in either order, and the other two agree with one sibling."""
    good = {"identity": RIGHT, "gzip": RIGHT}
    for order in itertools.permutations(good):
        fleet = [_instance("g1", good, order), _instance("g2", good, order)]
        fleet.append(_instance("odd", bad, order))
        results = {r.instance.name: r for r in compare_fleet(fleet, expectations=None)}
        assert results["odd"].verdict is Verdict.MISMATCH, (order, results["odd"].reason)
        assert results["g1"].verdict is Verdict.CONSISTENT, (order, results["g1"].reason)
        minority = [f for f in results["odd"].findings if f.kind is FindingKind.MINORITY_CONTENT]
        assert [f.path for f in minority] == [PATH], order
        assert "agrees with 1 of its 2 sibling" in results["g1"].reason, results["g1"].reason


def test_the_cdn_check_is_the_same_in_every_order() -> None:
    """The CDN serves the release's bytes; with the release and without it, the CDN
    verdicts and findings do not depend on the order of the codings."""
    cdn = CdnView(base_url="http://cdn/", assets=serving(CLEAN))
    seen = []
    for order in itertools.permutations(["identity", "gzip"]):
        fleet = [_instance(n, {"identity": WRONG, "gzip": RIGHT}, order) for n in ("a", "b")]
        for expectations in ({"1.0": E1}, None):
            results = compare_fleet(fleet, expectations=expectations, cdn=cdn)
            seen.append([(r.verdict, sorted(f.message for f in r.findings)) for r in results])
    assert seen[0] == seen[2] and seen[1] == seen[3], seen


CODINGS = ["identity", "gzip", "br"]
KINDS = st.sampled_from([RIGHT, WRONG, GONE, FAILED])


@given(
    kinds=st.lists(KINDS, min_size=3, max_size=3),
    order=st.permutations(CODINGS),
    n=st.integers(min_value=1, max_value=3),
)
def test_no_order_changes_a_verdict(kinds: list[str], order: list[str], n: int) -> None:
    """Any answers in any of the first ``n`` codings, asked for in any order: the same
    verdict as in the canonical order, and consistent only when every coding is right."""
    asked = tuple(order[:n])
    per = dict(zip(CODINGS, kinds, strict=True))
    canonical = canonical_codings(asked)
    verdicts = []
    for codings in (asked, canonical):
        (result,) = compare_fleet([_instance("i1", per, codings)], expectations={"1.0": E1})
        verdicts.append(result.verdict)
    assert verdicts[0] is verdicts[1]
    all_right = all(per[c] == RIGHT for c in asked)
    assert (verdicts[0] is Verdict.CONSISTENT) is all_right, (per, asked, verdicts)


def test_one_coding_compared_is_one_view_and_the_observation_itself() -> None:
    fleet = [_instance("i1", {"identity": RIGHT}, ("identity",))]
    assert coding_views(fleet) == [fleet]
    assert fleet[0].assets[PATH].codings == {}
    assert R1.files[PATH].hashes["sha256"] == A1
