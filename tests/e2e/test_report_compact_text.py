"""``render_json(pretty=False)`` is exactly ``json.dumps(to_json(...), separators=(",", ":"))``
for any report: the fast encoder's text differs from the standard library's on non-ASCII,
DEL, floats Python writes with an exponent, NaN and keys that are neither strings nor
numbers, and each of those must still come out as the standard library writes it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from artifactcheck.model.values import (
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Observation,
    Report,
    Severity,
    Verdict,
)
from artifactcheck.present.report import _compact, render_json, to_json

BASE = "http://web-1/"


def report(
    *,
    header: str = "nginx",
    message: str = "ok",
    elapsed: float = 0.0123,
    asset_elapsed: float = 0.0456,
    run_elapsed: float = 1.5,
    size: int = 1234,
) -> Report:
    inst = Instance(name="web-1", base_url=BASE)
    fetched = Fetched(
        url=BASE + "a.js",
        path="a.js",
        status=200,
        hashes={"sha256": "a" * 64},
        size=size,
        headers={"server": header},
        elapsed=asset_elapsed,
    )
    obs = Observation(
        instance=inst, manifest_path="m.json", assets={"a.js": fetched}, elapsed=elapsed
    )
    finding = Finding(
        kind=FindingKind.CONTENT_DIFFERS, severity=Severity.ERROR, message=message, instance="web-1"
    )
    return Report(
        results=(
            InstanceResult(
                instance=inst,
                verdict=Verdict.MISMATCH,
                reason=message,
                observation=obs,
                findings=(finding,),
            ),
        ),
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        elapsed=run_elapsed,
    )


CASES = {
    "plain": {},
    "non-ASCII header": {"header": "nginx/1.22 (Débian)"},
    "non-ASCII message": {"message": "diffère: ✓ \u2028 \U0001f600"},
    "DEL": {"header": "a\x7fb"},
    "control characters": {"message": 'a\x00\x01\x1f\n\t\r\x08\x0c"\\/'},
    "asset elapsed 1e16 ms": {"asset_elapsed": 1e13},
    "instance elapsed 1e16 ms": {"elapsed": 1e13},
    "run elapsed 1e17 s": {"run_elapsed": 1e17},
    "NaN elapsed": {"asset_elapsed": float("nan")},
    "infinite elapsed": {"run_elapsed": float("inf")},
    "size past 64 bits": {"size": 2**70},
}


@pytest.mark.parametrize("changes", CASES.values(), ids=CASES.keys())
def test_compact_text_is_the_standard_librarys(changes: dict[str, object]) -> None:
    r = report(**changes)  # type: ignore[arg-type]
    expected = json.dumps(to_json(r), separators=(",", ":")) + "\n"
    assert render_json(r, pretty=False) == expected


def test_pretty_text_is_indented() -> None:
    r = report()
    assert render_json(r, pretty=True) == json.dumps(to_json(r), indent=2) + "\n"


def test_a_key_the_fast_encoder_refuses_is_written_as_the_standard_library_writes_it() -> None:
    doc = {"elapsed_s": 0.5, "results": [], "odd": {None: 1, True: 2}}
    assert _compact(doc) == json.dumps(doc, separators=(",", ":"))
