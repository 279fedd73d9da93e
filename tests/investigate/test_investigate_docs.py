"""The recorded examples exist, come from the documented command, and show the point."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_examples_are_recorded_by_the_documented_command() -> None:
    doc = (ROOT / "docs" / "investigate.md").read_text(encoding="utf-8")
    assert "sh docs/examples/record.sh" in doc
    assert (ROOT / "docs" / "examples" / "record.sh").is_file()
    investigate = (ROOT / "docs" / "examples" / "investigate.txt").read_text(encoding="utf-8")
    fleet = (ROOT / "docs" / "examples" / "fleet.txt").read_text(encoding="utf-8")
    assert investigate.startswith("$ artifactcheck investigate web-5 -c check.yaml --diff\n")
    assert "web-5 reports 1.4.2 but serves 1.4.1's" in investigate
    assert "2 of 14 instances do the same (web-10)" in " ".join(investigate.split())
    assert "expected bytes from sibling" in investigate
    assert fleet.startswith("$ artifactcheck fleet -c check.yaml\n")
    assert "2 of 14 instances of 1.4.2 serve different content" in fleet
    assert "\x1b" not in investigate + fleet
