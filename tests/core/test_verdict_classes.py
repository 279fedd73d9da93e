"""The wrong-verdict table of docs/reliability.md names tests that exist, and is current."""

from __future__ import annotations

import verdict_classes


def test_every_wrong_verdict_class_is_pinned_by_existing_tests() -> None:
    assert verdict_classes.CLASSES
    assert all(tests for _, _, tests in verdict_classes.CLASSES)
    assert verdict_classes.missing_tests() == []


def test_a_renamed_test_is_noticed(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    assert verdict_classes.missing_tests(tmp_path)  # nothing exists there


def test_reliability_page_shows_the_table_as_listed() -> None:
    text = verdict_classes.DOC.read_text(encoding="utf-8")
    assert verdict_classes.render().strip() in text, (
        "docs/reliability.md is out of date: run `python tests/verdict_classes.py`"
    )
