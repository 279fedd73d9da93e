"""The verdict enums of the JSON schemas, written from the verdict table.

A schema is a document a consumer reads on its own, so its list of verdicts is spelled
out in it; this module keeps that list the table's (:data:`artifactcheck.model.verdicts.VERDICTS`).
``python -m artifactcheck.present.schema_enums [FILE ...]`` rewrites every verdict enum
of the current schemas (and of any other schema file named, e.g.
``docs/verdict-api.schema.json``) in place; the schemas of earlier report versions stay
as they were published. Rewritten as text, not through ``json``: the files are laid out
by hand for readers, and only the lists change.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from artifactcheck.model.verdicts import Verdict

SCHEMA_DIR = Path(__file__).parent / "schemas"
#: The schemas written now; report-v1 and report-v2 stay as published.
CURRENT = ("report-v3", "fleet-v1", "investigate-v1")
#: Names an enum of verdicts may hold besides verdicts: the verdict API counts the
#: pods not judged yet under "unchecked".
NOT_VERDICTS = ("unchecked",)
#: Values per line in a written list (the layout the files had by hand).
PER_LINE = 5
#: A JSON array of strings after ``"enum":``: the candidates for a verdict enum.
_ENUM = re.compile(r'("enum":\s*\[)(\s*)((?:"[^"]*"(?:\s*,\s*"[^"]*")*)?\s*)(\])')


def current_schemas() -> list[Path]:
    """The package's schema files whose verdict enums follow the table."""
    return [SCHEMA_DIR / f"{name}.schema.json" for name in CURRENT]


def verdict_enums(doc: object) -> list[list[str]]:
    """Every enum in a parsed schema that lists verdicts (it names ``consistent``)."""
    found: list[list[str]] = []
    if isinstance(doc, dict):
        enum = doc.get("enum")
        if isinstance(enum, list) and Verdict.CONSISTENT.value in enum:
            found.append(enum)
        for value in doc.values():
            found += verdict_enums(value)
    elif isinstance(doc, list):
        for value in doc:
            found += verdict_enums(value)
    return found


def _laid_out(values: list[str], m: re.Match[str], text: str) -> str:
    """The values as the files lay a list out: five a line, later lines indented as the
    first value is; a list that opens with a line break keeps its lines and closing."""
    quoted = [json.dumps(v) for v in values]
    lines = [", ".join(quoted[i : i + PER_LINE]) for i in range(0, len(quoted), PER_LINE)]
    before, listed = m.group(2), m.group(3)
    after = listed[len(listed.rstrip()) :]  # the line break and indent before "]", if any
    if "\n" in before:
        indent = before.rsplit("\n", 1)[1]
    else:
        line_start = text.rfind("\n", 0, m.start()) + 1
        indent = " " * (m.start() + len(m.group(1)) - line_start)
    return before + (",\n" + indent).join(lines) + after


def rewrite(text: str) -> str:
    """``text`` (a schema file) with each verdict enum listing the table's verdicts."""
    verdicts = [v.value for v in Verdict]

    def replace(m: re.Match[str]) -> str:
        listed = m.group(3).strip()
        values = json.loads("[" + listed + "]") if listed else []
        if Verdict.CONSISTENT.value not in values:
            return m.group(0)
        wanted = verdicts + [v for v in NOT_VERDICTS if v in values]
        return m.group(1) + _laid_out(wanted, m, text) + m.group(4)

    return _ENUM.sub(replace, text)


def main(paths: list[str]) -> int:
    """Rewrite the current schemas and ``paths``; print the files that changed."""
    for path in current_schemas() + [Path(p) for p in paths]:
        old = path.read_text(encoding="utf-8")
        new = rewrite(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            print(f"wrote the verdicts of {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
