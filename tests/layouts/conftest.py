"""Real framework builds behind a real nginx, checked with the README's commands.

Every report a test renders is validated against the shipped JSON Schema, as in
tests/e2e; one nginx per test serves its instances and its CDN.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from layout_nginx import Nginx

from artifactcheck.present import report as report_module

_VALIDATOR: jsonschema.Draft202012Validator | None = None


def _validate(doc: dict[str, Any]) -> None:
    global _VALIDATOR
    if _VALIDATOR is None:
        schema = json.loads(report_module.schema_path().read_text(encoding="utf-8"))
        _VALIDATOR = jsonschema.Draft202012Validator(schema)
    _VALIDATOR.validate(doc)


@pytest.fixture(autouse=True)
def _reports_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    real = report_module.to_json

    def checked(report: Any) -> dict[str, Any]:
        doc = real(report)
        _validate(doc)
        return doc

    monkeypatch.setattr(report_module, "to_json", checked)


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    server = Nginx(tmp_path / "nginx")
    try:
        yield server
    finally:
        server.stop()
