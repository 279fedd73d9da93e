"""Report v3: each asset is one array of values in the order of ``asset_columns``, the
names stated once per document instead of once per asset; a reader recovers every field
of every asset."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from report_support import validate_report

from artifactcheck.model.values import (
    Fetched,
    Instance,
    InstanceResult,
    Observation,
    Report,
    Verdict,
)
from artifactcheck.present.report import (
    ASSET_COLUMNS,
    asset_headers,
    asset_url,
    assets,
    render_json,
    to_json,
)

BASE = "http://web-1/"
#: Every column with a value of its own, so a value in the wrong column shows.
FULL = Fetched(
    url="https://cdn.example/static/a.js",
    path="a.js",
    status=206,
    hashes={"sha256": "a" * 64},
    size=1234,
    headers={"etag": '"e1"', "server": "nginx"},
    elapsed=0.0456,
    error="body cut short",
    content_encoding="gzip",
)
EMPTY = Fetched(url=BASE + "b.js", path="b.js", error="connection refused")


def report() -> Report:
    inst = Instance(name="web-1", base_url=BASE)
    obs = Observation(instance=inst, manifest_path="m.json", assets={"a.js": FULL, "b.js": EMPTY})
    return Report(
        results=(
            InstanceResult(instance=inst, verdict=Verdict.CONSISTENT, reason="ok", observation=obs),
        )
    )


def test_every_field_of_every_asset_is_recovered() -> None:
    doc = json.loads(render_json(report(), pretty=False))
    validate_report(doc)
    result = doc["results"][0]
    a, b = assets(doc, result)
    assert a == {
        "path": "a.js",
        "url": "https://cdn.example/static/a.js",
        "status": 206,
        "sha256": "a" * 64,
        "size": 1234,
        "content_encoding": "gzip",
        "error": "body cut short",
        "elapsed_ms": 45.6,
        "headers_ref": a["headers_ref"],
    }
    assert asset_headers(doc, a) == {"etag": '"e1"', "server": "nginx"}
    assert asset_url(result, a) == "https://cdn.example/static/a.js"
    assert b["url"] is None and asset_url(result, b) == BASE + "b.js"
    assert (b["status"], b["sha256"], b["size"], b["content_encoding"]) == (None,) * 4
    assert b["error"] == "connection refused" and asset_headers(doc, b) == {}


def test_the_column_names_are_stated_once_per_document() -> None:
    rep = report()
    text = render_json(rep, pretty=False)
    doc = json.loads(text)
    assert doc["schema"] == "artifactcheck/report/v3"
    assert doc["asset_columns"] == list(ASSET_COLUMNS)
    assert all(isinstance(row, list) for row in doc["results"][0]["assets"])
    for name in ("content_encoding", "headers_ref", "sha256", "size"):
        assert text.count(f'"{name}"') == 1, name
    assert list(doc).index("asset_columns") < list(doc).index("results")  # streamed first
    assert doc == to_json(rep) == json.loads(render_json(rep, pretty=True))


@pytest.mark.parametrize(
    "change",
    [
        lambda row: row.append(None),  # a value no column names
        lambda row: row.pop(),  # a column without its value
        lambda row: row.__setitem__(3, 1234),  # a size where the sha256 goes
    ],
)
def test_the_schema_refuses_a_row_out_of_shape(change: Any) -> None:
    doc = to_json(report())
    validate_report(doc)
    change(doc["results"][0]["assets"][0])
    with pytest.raises(jsonschema.ValidationError):
        validate_report(doc)


def test_the_schema_refuses_other_columns() -> None:
    doc = to_json(report())
    doc["asset_columns"] = list(reversed(ASSET_COLUMNS))
    with pytest.raises(jsonschema.ValidationError):
        validate_report(doc)
