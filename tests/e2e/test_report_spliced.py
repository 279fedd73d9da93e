"""Compact JSON splices each shared ``not_compared`` list, encoded once: the same
document as :func:`to_json`, and nothing an instance sends can pose as a splice."""

from __future__ import annotations

import json

from artifactcheck.act.report import render_json, to_json
from artifactcheck.judge.compare import SAMPLED_OUT
from artifactcheck.model.values import Coverage, Instance, InstanceResult, Report, Verdict


def result(name: str, rows: tuple[tuple[str, str], ...], reason: str = "ok") -> InstanceResult:
    return InstanceResult(
        instance=Instance(name=name, base_url=f"http://{name}/"),
        verdict=Verdict.CONSISTENT,
        reason=reason,
        coverage=Coverage(compared=7, total=7 + len(rows), not_compared=rows),
    )


def test_compact_json_is_the_document_with_shared_rows_spliced() -> None:
    shared = tuple((f"assets/c{n}.js", SAMPLED_OUT) for n in range(300))
    other = tuple((f"assets/d{n}.js", "not fetched") for n in range(100))
    short = (("assets/e.js", "could not be fetched (reset)"),)
    report = Report(
        results=(
            result("web-1", shared),
            result("web-2", shared),
            result("web-3", other),
            result("web-4", short),
            result("web-5", ()),
        )
    )
    text = render_json(report, pretty=False)
    assert json.loads(text) == to_json(report) == json.loads(render_json(report, pretty=True))
    assert text.count('"assets/c7.js"') == 2  # both instances list it, encoded once
    assert "\\u0000" not in text


def test_a_forged_placeholder_in_instance_text_stays_text() -> None:
    """A reason (or path) that looks like a splice is encoded as itself: the
    placeholders carry a random nonce per rendering."""
    shared = tuple((f"assets/c{n}.js", SAMPLED_OUT) for n in range(100))
    forged = "\x000123456789abcdef:0"
    report = Report(results=(result("web-1", shared, reason=forged), result("web-2", shared)))
    doc = json.loads(render_json(report, pretty=False))
    assert doc["results"][0]["reason"] == forged
    assert doc == to_json(report)
