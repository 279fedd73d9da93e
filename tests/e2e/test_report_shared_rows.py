"""Report v2 and later: each long ``not_compared`` list is stated once, in ``not_compared_lists``,
and each coverage that has it names it by id: the same information as stating it in
every result (v1), a fraction of the bytes at fleet scale."""

from __future__ import annotations

import json

import jsonschema
import pytest
from report_support import validate_report

from artifactcheck.judge.compare import SAMPLED_OUT
from artifactcheck.model.values import (
    Coverage,
    Fetched,
    Instance,
    InstanceResult,
    Observation,
    Report,
    Verdict,
)
from artifactcheck.present.report import (
    asset_headers,
    asset_url,
    assets,
    not_compared,
    render_json,
    to_json,
)


def result(name: str, rows: tuple[tuple[str, str], ...], reason: str = "ok") -> InstanceResult:
    return InstanceResult(
        instance=Instance(name=name, base_url=f"http://{name}/"),
        verdict=Verdict.CONSISTENT,
        reason=reason,
        coverage=Coverage(compared=7, total=7 + len(rows), not_compared=rows),
    )


SHARED = tuple((f"assets/c{n}.js", SAMPLED_OUT) for n in range(300))
OTHER = tuple((f"assets/d{n}.js", "not fetched") for n in range(100))
SHORT = (("assets/e.js", "could not be fetched (reset)"),)


def report() -> Report:
    equal_copy = tuple(list(SHARED))  # equal rows in another tuple: still one entry
    assert equal_copy is not SHARED
    return Report(
        results=(
            result("web-1", SHARED),
            result("web-2", SHARED),
            result("web-3", OTHER),
            result("web-4", SHORT),
            result("web-5", ()),
            result("web-6", equal_copy),
        )
    )


def test_every_long_list_is_stated_once_and_referenced() -> None:
    text = render_json(report(), pretty=False)
    doc = json.loads(text)
    validate_report(doc)
    assert doc["schema"] == "artifactcheck/report/v3"
    assert text.count('"assets/c7.js"') == 1  # three instances have it, stated once
    assert text.count('"assets/d7.js"') == 1
    assert len(doc["not_compared_lists"]) == 2
    refs = [r["coverage"]["not_compared_ref"] for r in doc["results"]]
    assert refs[0] == refs[1] == refs[5] != refs[2]
    assert refs[3] is None and refs[4] is None  # short lists stay in place
    assert doc["results"][3]["coverage"]["not_compared"] == [
        {"path": "assets/e.js", "why": "could not be fetched (reset)"}
    ]


def test_the_same_information_as_every_list_in_place() -> None:
    rep = report()
    doc = json.loads(render_json(rep, pretty=False))
    assert doc == to_json(rep) == json.loads(render_json(rep, pretty=True))
    for r, res in zip(doc["results"], rep.results, strict=True):
        assert res.coverage is not None
        expected = [{"path": p, "why": w} for p, w in res.coverage.not_compared]
        assert not_compared(doc, r["coverage"]) == expected
        assert r["coverage"]["complete"] is res.coverage.complete


def test_a_list_of_exactly_the_threshold_is_shared_and_one_shorter_is_not() -> None:
    at = tuple((f"a{n}", SAMPLED_OUT) for n in range(64))
    below = tuple((f"b{n}", SAMPLED_OUT) for n in range(63))
    doc = to_json(Report(results=(result("web-1", at), result("web-2", below))))
    validate_report(doc)
    assert doc["results"][0]["coverage"]["not_compared"] is None
    assert doc["results"][0]["coverage"]["not_compared_ref"] in doc["not_compared_lists"]
    assert len(doc["results"][1]["coverage"]["not_compared"]) == 63


def test_the_schema_refuses_a_coverage_with_both_or_neither() -> None:
    doc = to_json(report())
    doc["results"][3]["coverage"]["not_compared_ref"] = "nc0"  # both stated
    with pytest.raises(jsonschema.ValidationError):
        validate_report(doc)
    doc = to_json(report())
    doc["results"][0]["coverage"]["not_compared_ref"] = None  # neither stated
    with pytest.raises(jsonschema.ValidationError):
        validate_report(doc)


def observed(name: str, assets: dict[str, tuple[str, dict[str, str]]]) -> InstanceResult:
    inst = Instance(name=name, base_url=f"http://{name}/")
    fetched = {
        path: Fetched(url=url, path=path, status=200, hashes={"sha256": "0" * 64}, headers=hdrs)
        for path, (url, hdrs) in assets.items()
    }
    return InstanceResult(
        instance=inst,
        verdict=Verdict.CONSISTENT,
        reason="ok",
        observation=Observation(instance=inst, manifest_path="m.json", assets=fetched),
    )


def test_each_header_set_is_stated_once_and_urls_only_where_they_differ() -> None:
    common = {"etag": '"abc"', "content-type": "text/javascript"}
    other = {"etag": '"def"', "content-type": "text/javascript"}
    rep = Report(
        results=(
            observed("web-1", {"a.js": ("http://web-1/a.js", common)}),
            observed(
                "web-2",
                {
                    "a.js": ("http://web-2/a.js", dict(common)),  # equal, another dict
                    "b.js": ("https://cdn.example/b.js", other),  # on the CDN
                },
            ),
        )
    )
    text = render_json(rep, pretty=False)
    doc = json.loads(text)
    validate_report(doc)
    assert text.count('"abc') == 1 and text.count('"def') == 1
    a1, (a2, b2) = assets(doc, doc["results"][0]), assets(doc, doc["results"][1])
    assert a1[0]["headers_ref"] == a2["headers_ref"] != b2["headers_ref"]
    assert asset_headers(doc, b2) == other and asset_headers(doc, a2) == common
    assert a1[0]["url"] is None and a2["url"] is None  # at the instance's URL + path
    assert b2["url"] == "https://cdn.example/b.js"
    assert asset_url(doc["results"][1], a2) == "http://web-2/a.js"
    assert asset_url(doc["results"][1], b2) == "https://cdn.example/b.js"
