"""What the page says first, from the report document alone (no browser)."""

from __future__ import annotations

import pytest

from artifactcheck.present.html_report import page_model


def doc(*verdicts: str) -> dict:
    results = [
        {"instance": f"web-{n}", "url": f"http://127.0.0.1:{8000 + n}/", "verdict": v}
        for n, v in enumerate(verdicts, 1)
    ]
    return {"exit_code": 0, "results": results, "findings": []}


@pytest.mark.parametrize(
    ("verdicts", "headline", "status"),
    [
        ((), "No instance was checked", "unknown"),
        (("consistent",) * 3, "All 3 instances are consistent", "ok"),
        (("consistent", "drift", "cdn-missing"), "1 of 3 instances serves wrong content", "bad"),
        (
            ("mismatch", "signal-conflict", "consistent"),
            "2 of 3 instances serve wrong content",
            "bad",
        ),
        (
            ("cdn-mismatch", "cdn-missing", "consistent"),
            "The CDN differs from what 2 of 3 instances serve",
            "bad",
        ),
        (
            ("unreachable", "consistent"),
            "1 of 2 instances could not be judged; none serves wrong content",
            "unknown",
        ),
        (
            ("inconclusive", "unreachable"),
            "2 of 2 instances could not be judged; none serves wrong content",
            "unknown",
        ),
        # a verdict from a newer report is never taken for consistent
        (("consistent", "quarantined"), "1 of 2 instances are not consistent", "unknown"),
    ],
)
def test_the_headline_says_the_worst_news(verdicts: tuple, headline: str, status: str) -> None:
    page = page_model(doc(*verdicts))
    assert page["headline"] == headline
    assert page["status"] == status


def test_cards_are_the_instances_serving_wrong_content_worst_first() -> None:
    page = page_model(doc("cdn-missing", "drift", "consistent", "mismatch", "unreachable"))
    assert [c["name"] for c in page["cards"]] == ["web-4", "web-2"]
    assert [(o["verdict"], o["n"]) for o in page["others"]] == [
        ("cdn-missing", 1),
        ("unreachable", 1),
    ]
    assert page["also"] == [("cdn-missing", 1), ("unreachable", 1)]


def test_instances_are_grouped_by_version_then_served_content() -> None:
    d = doc("consistent", "consistent", "mismatch", "consistent")
    for r, (version, fingerprint) in zip(
        d["results"],
        [("1.4.2", "aaa"), ("1.4.2", "aaa"), ("1.4.2", "bbb"), ("1.4.1", "ccc")],
        strict=True,
    ):
        r["reported_version"], r["fingerprint"] = version, fingerprint
    versions = page_model(d)["versions"]
    assert [(v["version"], v["n"]) for v in versions] == [("1.4.2", 3), ("1.4.1", 1)]
    groups = versions[0]["groups"]
    assert [(g["content"], len(g["instances"]), g["odd"]) for g in groups] == [
        ("aaa", 2, False),
        ("bbb", 1, True),
    ]
