"""What the e2e tests share about reports: the shipped schema, as the check a report
must pass (the conftest applies it to every report a test renders; tests that build a
report document by hand call it themselves)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from artifactcheck.present import report as report_module

_VALIDATOR: jsonschema.Draft202012Validator | None = None


def validate_report(doc: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when ``doc`` breaks the shipped report schema."""
    global _VALIDATOR
    if _VALIDATOR is None:
        schema = json.loads(report_module.schema_path().read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
    _VALIDATOR.validate(doc)
