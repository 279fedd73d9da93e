"""Validation of --output json documents against the committed JSON Schemas."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from artifactcheck.present.views import view_schema_path


def validate(doc: dict[str, Any], name: str) -> None:
    """Raise jsonschema.ValidationError when ``doc`` breaks the ``name`` schema."""
    schema = json.loads(view_schema_path(name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    validator.validate(doc)
