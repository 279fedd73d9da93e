"""The verdict table is the one place a verdict's properties are declared.

Every verdict has a row whose columns agree with each other; the rows of the verdicts
that exist keep the behaviour they had when each was spelled out in its own module; the
JSON schemas list exactly the table's verdicts; and no module of the package declares a
set, list or map of verdicts by hand (it reads the table, or a set derived from it).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from artifactcheck.act.kube_actor import event_reason_for
from artifactcheck.model.verdicts import (
    BAD_VERDICTS,
    CDN_WRONG,
    FAIL_OPEN_VERDICTS,
    INSTANCE_WRONG,
    MAY_BE_RIGHT,
    QUARANTINABLE,
    UNKNOWN_VERDICTS,
    VERDICTS,
    VOUCHING,
    WORST_FIRST,
    Verdict,
)
from artifactcheck.present import schema_enums

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "artifactcheck"
TABLE = PACKAGE / "model" / "verdicts.py"
#: Schemas outside the package whose verdict enums follow the table too.
OTHER_SCHEMAS = (ROOT / "docs" / "verdict-api.schema.json",)
#: Published schemas of earlier report versions: as they were, never rewritten.
FROZEN = ("report-v1", "report-v2")

#: What each verdict did before the table, read from the sets each module declared:
#: (exit code, quarantines, bytes may be right, a gate may fail open on it, Event reason).
BEFORE = {
    Verdict.CONSISTENT: (0, False, True, True, "ContentConsistent"),
    Verdict.DRIFT: (1, False, True, False, "ContentDrift"),
    Verdict.SIGNAL_CONFLICT: (1, False, False, False, "SignalConflict"),
    Verdict.CDN_MISSING: (1, False, True, False, "CdnMissing"),
    Verdict.CDN_MISMATCH: (1, False, True, False, "CdnMismatch"),
    Verdict.MISMATCH: (1, True, False, False, "ContentMismatch"),
    Verdict.UNREACHABLE: (3, False, False, False, "ContentUnreachable"),
    Verdict.INCONCLUSIVE: (3, False, False, True, "ContentInconclusive"),
}


def test_every_verdict_has_one_row() -> None:
    assert list(VERDICTS) == list(Verdict)


@pytest.mark.parametrize("verdict", list(Verdict))
def test_a_row_agrees_with_itself(verdict: Verdict) -> None:
    """Columns that would contradict each other: a quarantine for what is not wrong,
    right bytes under "could not judge", a gate failing open on wrong content."""
    t = VERDICTS[verdict]
    assert t.exit_code in (0, 1, 3)
    assert not t.quarantines or t.exit_code == 1
    assert not t.may_be_right or t.exit_code != 3
    assert not t.vouches or t.may_be_right
    assert not t.fail_open or t.exit_code != 1
    assert (t.wrong_side is not None) == (t.exit_code == 1)
    assert re.fullmatch(r"(?:[A-Z][a-z]+)+", t.event_reason)
    assert re.fullmatch(r"#[0-9a-f]{6}", t.colour)
    assert t.style and t.meaning


def test_reasons_and_ranks_are_each_verdict_s_own() -> None:
    assert len({t.event_reason for t in VERDICTS.values()}) == len(VERDICTS)
    assert len({t.rank for t in VERDICTS.values()}) == len(VERDICTS)
    assert WORST_FIRST[0] is Verdict.MISMATCH and WORST_FIRST[-1] is Verdict.CONSISTENT


@pytest.mark.parametrize(("verdict", "before"), BEFORE.items(), ids=str)
def test_the_existing_verdicts_keep_their_behaviour(
    verdict: Verdict, before: tuple[int, bool, bool, bool, str]
) -> None:
    exit_code, quarantines, may_be_right, fail_open, reason = before
    assert (verdict in BAD_VERDICTS) == (exit_code == 1)
    assert (verdict in UNKNOWN_VERDICTS) == (exit_code == 3)
    assert (verdict in QUARANTINABLE) == quarantines
    assert (verdict in MAY_BE_RIGHT) == may_be_right
    assert (verdict in FAIL_OPEN_VERDICTS) == fail_open
    assert (verdict in VOUCHING) == (verdict in (Verdict.CONSISTENT, Verdict.DRIFT))
    assert (verdict in CDN_WRONG) == verdict.value.startswith("cdn-")
    assert (verdict in INSTANCE_WRONG) == (exit_code == 1 and verdict not in CDN_WRONG)
    assert event_reason_for(verdict.value) == reason


def test_an_unknown_verdict_value_still_gets_a_reason() -> None:
    assert event_reason_for("stale-page") == "ContentStalePage"
    assert event_reason_for(None) == "ContentInconsistent"


def _schema_files() -> list[Path]:
    return schema_enums.current_schemas() + list(OTHER_SCHEMAS)


@pytest.mark.parametrize("path", _schema_files(), ids=lambda p: p.name)
def test_each_schema_lists_the_table_s_verdicts(path: Path) -> None:
    enums = schema_enums.verdict_enums(json.loads(path.read_text(encoding="utf-8")))
    assert enums, f"{path.name} has no verdict enum"
    verdicts = [v.value for v in Verdict]
    for enum in enums:
        assert [v for v in enum if v not in schema_enums.NOT_VERDICTS] == verdicts, (
            f"{path.name} lists {enum}: run `python -m artifactcheck.present.schema_enums "
            "docs/verdict-api.schema.json`"
        )


@pytest.mark.parametrize("path", _schema_files(), ids=lambda p: p.name)
def test_each_schema_is_as_the_generator_writes_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert schema_enums.rewrite(text) == text


def test_the_generator_restores_a_verdict_a_schema_lost() -> None:
    text = (schema_enums.SCHEMA_DIR / "report-v3.schema.json").read_text(encoding="utf-8")
    lost = text.replace('"cdn-mismatch",', "", 1)
    assert lost != text
    assert schema_enums.rewrite(lost) == text


def test_the_published_schemas_stay_as_published() -> None:
    for name in FROZEN:
        path = schema_enums.SCHEMA_DIR / f"{name}.schema.json"
        (enum,) = schema_enums.verdict_enums(json.loads(path.read_text(encoding="utf-8")))
        assert enum == [v.value for v in BEFORE]


def _verdict_names(node: ast.expr) -> int:
    """How many elements of a display name a verdict (``Verdict.X`` or its value)."""
    values = {v.value for v in Verdict}
    names = {v.name for v in Verdict}
    if isinstance(node, ast.Dict):
        items: list[ast.expr | None] = list(node.keys)
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = list(node.elts)
    else:
        return 0
    n = 0
    for item in items:
        if isinstance(item, ast.Attribute) and item.attr in names:
            n += isinstance(item.value, ast.Name) and item.value.id == "Verdict"
        elif isinstance(item, ast.Constant) and isinstance(item.value, str):
            n += item.value in values
    return n


def hand_declared(root: Path = PACKAGE) -> list[str]:
    """Sets, lists, tuples and maps of two verdicts or more outside the table."""
    found: list[tuple[str, int]] = []
    for path in sorted(root.rglob("*.py")):
        if path == TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.expr) and _verdict_names(node) >= 2:
                found.append((path.relative_to(root.parent).as_posix(), node.lineno))
    return [f"{name}:{line}" for name, line in sorted(set(found))]


def test_no_module_declares_verdicts_by_hand() -> None:
    assert hand_declared() == [], "read model/verdicts.py (VERDICTS or a set derived from it)"


def test_a_set_declared_by_hand_is_noticed(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "policy.py").write_text(
        "from x import Verdict\n"
        "GOOD = frozenset({Verdict.CONSISTENT, Verdict.DRIFT})\n"
        "STYLE = {'mismatch': 'red', 'drift': 'yellow'}\n"
        "ONE = (Verdict.MISMATCH,)\n",
        encoding="utf-8",
    )
    assert hand_declared(tmp_path / "pkg") == ["pkg/policy.py:2", "pkg/policy.py:3"]
